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


def context_switches(pid):
    """Times the threads of process PID now running have left their core, waiting (voluntary) or
    preempted, by thread name (rankd names its threads: src/common/thread_name.h): each is a sleep
    and a wake-up that cost CPU on both sides."""
    by_name = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                        by_name[name] = by_name.get(name, 0) + int(line.split(":")[1])
        except OSError:  # the thread ended
            pass
    return by_name
