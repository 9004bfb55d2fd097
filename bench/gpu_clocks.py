"""The GPU's SM clock, power draw and clock-limit reasons while a benchmark runs, sampled by nvidia-smi.

Under sustained load an H200 reaches its 700 W software power cap and lowers its SM clock (docs/log/benchmarks.md,
"W1 at 32,768 pairs under load: the power cap"), so a throughput figure means little without the clock it ran at.

    with ClockSampler() as clocks:
        run_the_benchmark()
    clocks.summary(since=timing_began, until=timing_ended)  # time.time() seconds; default: all samples
    # {"sm_mhz": 1515, "power_w": 698.7, "limited": 0.92, "samples": 30}, or None without samples

`limited` is the share of samples whose clock-event reasons name a power or thermal limit (nvidia-smi's
clocks_event_reasons.active: 0x4 software power cap, 0x8 hardware slowdown, 0x20 software thermal slowdown,
0x40 hardware thermal slowdown, 0x80 hardware power brake). Without nvidia-smi nothing is sampled.
"""
import datetime
import shutil
import subprocess
import threading

QUERY = ["--query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active", "--format=csv,noheader,nounits"]
LIMIT_BITS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def parse(line):
    """(time, SM MHz, watts, reason bits) from one line of QUERY's output, or None (a header, N/A). The
    time is nvidia-smi's own (local time, as time.time() counts), since a pipe may deliver lines late."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 4:
        return None
    try:
        when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        return when, float(parts[1]), float(parts[2]), int(parts[3], 16)
    except ValueError:
        return None


def summarize(samples, since=None, until=None):
    """Median SM clock, mean power and the share limited by power or heat over samples (time, MHz, W,
    reasons) taken from `since` to `until` (time.time() seconds; None: unbounded), or None."""
    chosen = [s for s in samples if (since is None or s[0] >= since) and (until is None or s[0] <= until)]
    if not chosen:
        return None
    mhz = sorted(s[1] for s in chosen)
    return {"sm_mhz": mhz[len(mhz) // 2], "power_w": round(sum(s[2] for s in chosen) / len(chosen), 1),
            "limited": round(sum(1 for s in chosen if s[3] & LIMIT_BITS) / len(chosen), 3), "samples": len(chosen)}


class ClockSampler:
    """Samples every `period_ms` on a reader thread while the `with` block runs. `command` replaces
    nvidia-smi (tests)."""

    def __init__(self, period_ms=100, command=None):
        if command is None and shutil.which("nvidia-smi"):
            command = ["nvidia-smi", *QUERY, f"-lms={period_ms}"]
        self.command = command
        self.samples = []
        self._process = self._reader = None

    def __enter__(self):
        if self.command:
            self._process = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()
        return self

    def _read(self):
        for line in self._process.stdout:
            sample = parse(line)
            if sample:
                self.samples.append(sample)

    def __exit__(self, *exc):
        if self._process:
            if self._process.poll() is None:
                self._process.terminate()
            self._process.wait()
            self._reader.join()
        return False

    def summary(self, since=None, until=None):
        """Over the samples from `since` to `until` (time.time() seconds; None: unbounded)."""
        return summarize(self.samples, since, until)


def describe(clocks):
    """'1,515 MHz, 699 W, limited in 92% of 12 samples' for a summary; '' for None."""
    if not clocks:
        return ""
    return (f"{clocks['sm_mhz']:,.0f} MHz, {clocks['power_w']:.0f} W, limited in {clocks['limited']:.0%} of "
            f"{clocks['samples']} samples")
