"""What the served benchmarks share: a free loopback port, and a process's CPU time and context switches."""
import os
import socket


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """User plus system CPU time of process PID and all its threads, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_stats(pid):
    """By thread name (rankd names its threads: src/common/thread_name.h), over the threads of
    process PID now running: "switches", the times they left their core, waiting (voluntary) or
    preempted (each a sleep and a wake-up that cost CPU on both sides), and "cpu", the seconds they
    ran (the scheduler's own count, in nanoseconds: /proc's per-thread clock ticks are 10 ms)."""
    by_name = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                name = f.read().strip()
            stats = by_name.setdefault(name, {"switches": 0, "cpu": 0.0})
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                        stats["switches"] += int(line.split(":")[1])
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                stats["cpu"] += int(f.read().split()[0]) / 1e9
        except OSError:  # the thread ended
            pass
    return by_name
