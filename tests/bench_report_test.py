"""bench/report.py: the GPU table, the plots and the generated section of a markdown file;
bench/ncu_last.py: the last kernels of an ncu table; bench/gpu_clocks.py: the GPU's clock and power;
bench/trace_summary.py: a kernel trace's busy time, overlap, gaps, copies and kernels.

  /usr/bin/python3 tests/bench_report_test.py SOURCE_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

SRC = sys.argv[1] if len(sys.argv) > 1 else "."
sys.path.insert(0, os.path.join(SRC, "bench"))
import gpu_clocks  # noqa: E402
import report  # noqa: E402
import trace_summary  # noqa: E402

REPORT = {
    "meta": {"gpu": "Test GPU", "torch": "2.x", "iters": 50, "date": "2026-01-02", "commit": "abc1234",
             "command": "python3 bench/gpu_bench.py --report out", "variants": ["fp32", "fp32 no graphs"],
             "peers": ["eager", "cudagraphs"]},
    "rows": [
        {"label": "W1, 1 pairs", "n": 1, "steps": 40, "rankd": {"fp32": [0.25, 0.3], "fp32 no graphs": [0.5, 0.6]},
         "spread": {"fp32": 0.05, "fp32 no graphs": 0.4}, "eager": [2.0, 2.5], "cudagraphs": [1.0, 1.1],
         "launches": {"fused": {"kernels": 40, "copies": 2, "memsets": 1, "other": 0},
                      "unfused": {"kernels": 130, "copies": 2, "memsets": 1, "other": 0}}},
        {"label": "W1, 512 pairs", "n": 512, "steps": 40, "rankd": {"fp32": [1.0, 1.2], "fp32 no graphs": None},
         "spread": {"fp32": 0.01}, "eager": [3.0, 3.5], "cudagraphs": None},
        {"label": "W2, 1 user x 200, L=100", "n": 200, "seq": 100, "steps": 30, "rankd": {"fp32": [0.4, 0.5]},
         "eager": None, "cudagraphs": None},
    ],
}
LOAD = [
    {"workload": "W1", "batching": b, "offered_rate": rate, "achieved_rate": rate * 0.99, "p50_ms": 1.0 + rate / 100,
     "p99_ms": 2.0 + rate / 50, "p999_ms": 3.0 + rate / 50, "errors": 0, "timeouts": 1 if rate == 200 else 0,
     "requests_per_execution": 1.5 if b else 1.0, "spread": 0.5 if rate == 200 else 0.1}
    for b in (False, True) for rate in (50, 100, 200)
]


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_table_cells_and_ratios(self):
        text = report.render_gpu(REPORT)
        lines = text.splitlines()
        self.assertIn("GPU: Test GPU", lines[0])
        self.assertIn("commit abc1234", lines[0])
        self.assertIn("`python3 bench/gpu_bench.py --report out`", text)
        rows = [l for l in lines if l.startswith("| W")]
        self.assertEqual(len(rows), 3)
        # Best peer 1.0 ms (cudagraphs) over best rankd 0.25 ms; 1 pair in 0.25 ms is 4,000 pairs/s.
        self.assertTrue(rows[0].endswith("| 4,000 | 4.00x |"), rows[0])
        self.assertTrue(rows[0].startswith("| W1, 1 pairs | 40 | 40 / 130 (+2 copies, 1 memsets) | 0.250 / 0.300 |"), rows[0])
        self.assertIn("| failed |", rows[1])  # rankd without graphs and cudagraphs failed there
        self.assertTrue(rows[1].endswith("| 512,000 | 3.00x |"), rows[1])
        self.assertTrue(rows[2].endswith("|  |"), rows[2])  # no peer result: no ratio
        self.assertIn("W1, 1 pairs fp32 no graphs: spread 40%", text)
        self.assertNotIn("fp32: spread", text)

    def test_not_applicable_cells(self):
        # A variant that does not apply (no user inputs to hoist) says so and never counts as best.
        rep = {"meta": dict(REPORT["meta"], variants=["fp32", "fp32 unhoisted"]),
               "rows": [{"label": "W1, 1 pairs", "n": 1, "rankd": {"fp32": [0.5, 0.6], "fp32 unhoisted": "n/a"},
                         "eager": [1.0, 1.1], "cudagraphs": None},
                        {"label": "W3, 1 user x 200, L=50", "n": 200, "rankd": {"fp32": [0.5, 0.6], "fp32 unhoisted": [0.25, 0.3]},
                         "eager": [1.0, 1.1], "cudagraphs": None}]}
        rows = [l for l in report.render_gpu(rep).splitlines() if l.startswith("| W")]
        self.assertIn("| 0.500 / 0.600 | n/a | 1.000 / 1.100 | failed |", rows[0])
        self.assertTrue(rows[0].endswith("| 2.00x |"), rows[0])
        self.assertTrue(rows[1].endswith("| 4.00x |"), rows[1])

    def test_in_flight_table(self):
        # Throughput with requests in flight against the best peer's pairs/s at its median.
        row = dict(REPORT["rows"][1], n=32768, eager=[16.0, 17.0], cudagraphs=[32.0, 33.0],
                   in_flight={"requests": 2, "bf16": 4.0e6, "bf16 bf16-tables": 3.0e6})
        text = report.render_gpu({"meta": REPORT["meta"], "rows": [row, REPORT["rows"][0]]})
        loaded = [l for l in text.splitlines() if l.startswith("| W1, 512 pairs | 2 |")]
        self.assertEqual(len(loaded), 1, text)
        # 32,768 pairs in 16 ms is 2,048,000 pairs/s; 4,000,000 over that is 1.95x.
        self.assertEqual(loaded[0], "| W1, 512 pairs | 2 | 4,000,000 (bf16), 3,000,000 (bf16 bf16-tables) | 2,048,000 | 1.95x |")
        self.assertNotIn("| W1, 1 pairs | 2 |", text)  # no in-flight run for that row
        self.assertNotIn("requests in flight", report.render_gpu(REPORT))

    def test_in_flight_table_with_the_gpu_clocks(self):
        # The clock column shows rankd's best cell and the fastest peer's; a cell without samples says so.
        row = dict(REPORT["rows"][1], n=32768, eager=[16.0, 17.0], cudagraphs=[32.0, 33.0],
                   in_flight={"requests": 4, "bf16": 4.0e6, "bf16 bf16-tables": 5.0e6},
                   clocks={"bf16 bf16-tables": {"sm_mhz": 1515.0, "power_w": 698.7, "limited": 0.92, "samples": 12},
                           "cudagraphs": {"sm_mhz": 1980.0, "power_w": 420.2, "limited": 0.0, "samples": 30}})
        text = report.render_gpu({"meta": REPORT["meta"], "rows": [row]})
        self.assertIn("| rankd vs best peer | GPU while timed |", text)
        loaded = [l for l in text.splitlines() if l.startswith("| W1, 512 pairs | 4 |")]
        self.assertEqual(loaded, ["| W1, 512 pairs | 4 | 4,000,000 (bf16), 5,000,000 (bf16 bf16-tables) | 2,048,000 | 2.44x | "
                                  "rankd (bf16 bf16-tables): 1,515 MHz, 699 W, limited in 92% of 12 samples; "
                                  "eager: not sampled |"])
        row["eager"] = [64.0, 65.0]  # now cudagraphs is the fastest peer
        text = report.render_gpu({"meta": REPORT["meta"], "rows": [row]})
        self.assertIn("; cudagraphs: 1,980 MHz, 420 W, limited in 0% of 30 samples |", text)
        self.assertIn("power cap", text)

    def test_load_table(self):
        lines = [l for l in report.render_load(LOAD, "test machine").splitlines() if l.startswith("| W1")]
        self.assertEqual(len(lines), 6)
        self.assertEqual(lines[0], "| W1 | off | n/a | 50 | 49.5 | 1.50 | 3.00 | 4.00 | 0 | 1.00 | yes |")
        self.assertEqual(lines[5], "| W1 | on | n/a | 200 | 198.0 | 3.00 | 6.00 | 7.00 | 1 | 1.50 | no (quarters differ by 50%) |")

    def test_plots_and_generated_section(self):
        if not shutil.which("gnuplot"):
            self.skipTest("gnuplot not installed (scripts/setup.sh installs gnuplot-nox)")
        src = os.path.join(self.tmp, "report.json")
        load = os.path.join(self.tmp, "load.json")
        import json
        with open(src, "w") as f:
            json.dump(REPORT, f)
        with open(load, "w") as f:
            json.dump(LOAD, f)
        doc = os.path.join(self.tmp, "docs", "benchmarks.md")
        os.makedirs(os.path.dirname(doc))
        with open(doc, "w") as f:
            f.write("# Benchmarks\n\nHand-written text.\n")
        plots = os.path.join(self.tmp, "docs", "plots")
        cmd = [sys.executable, os.path.join(SRC, "bench", "report.py"), "--gpu", src, "--load", load, "--docs", doc,
               "--plots", plots]
        for _ in range(2):  # the second run replaces the section, it does not append another
            subprocess.run(cmd, check=True, capture_output=True)
        with open(doc) as f:
            text = f.read()
        self.assertTrue(text.startswith("# Benchmarks\n\nHand-written text.\n"))
        self.assertEqual(text.count(report.BEGIN), 1)
        self.assertEqual(text.count(report.END), 1)
        self.assertIn("![W1: pairs/s against batch size](plots/throughput_W1.png)", text)
        self.assertIn("![W1: latency against offered load](plots/latency_W1.png)", text)
        self.assertIn("| W1 | on | n/a | 200 |", text)
        for name in ["throughput_W1.png", "latency_W1.png"]:
            with open(os.path.join(plots, name), "rb") as f:
                data = f.read()
            self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n", name)
            self.assertGreater(len(data), 5000, name)
        self.assertFalse(os.path.exists(os.path.join(plots, "throughput_W2.png")))  # one batch size: no plot


NCU_CSV = """==PROF== Connected to process 7
{"backend":"cuda"}
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","7","rankd","h","Warm(int)","1","7","(256, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","5,024"
"1","7","rankd","h","Concat<4, 2>(Launch)","1","7","(256, 1, 1)","(9, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","278,944"
"1","7","rankd","h","Concat<4, 2>(Launch)","1","7","(256, 1, 1)","(9, 1, 1)","0","9.0","Command line profiler metrics","smsp__inst_executed.sum","inst","164,567,978"
"2","7","rankd","h","nvjet_sm90_tst","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","155.25"
"""


class NcuLastTest(unittest.TestCase):
    def run_tool(self, text, *args):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(text)
        try:
            return subprocess.run([sys.executable, os.path.join(SRC, "bench", "ncu_last.py"), f.name, *args],
                                  capture_output=True, text=True)
        finally:
            os.unlink(f.name)

    def test_the_last_kernels_in_microseconds_and_their_sum(self):
        out = self.run_tool(NCU_CSV, "2")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(len(lines), 3)
        self.assertIn("278.9 µs  Concat<4, 2>(Launch)", lines[0])  # a kernel name with a comma
        self.assertIn("155.2 µs  nvjet_sm90_tst", lines[1])
        self.assertIn("434.2 µs  the last 2 of 3 kernels", lines[2])

    def test_a_file_without_an_ncu_table_is_refused(self):
        out = self.run_tool("==ERROR== rankd does not exist\n")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("no ncu table", out.stderr)


class GpuClocksTest(unittest.TestCase):
    LINES = ["timestamp, clocks.current.sm [MHz], power.draw [W], clocks_event_reasons.active",  # a header
             "2026/11/25 13:39:31.000, 345, 80.10, 0x0000000000000001",
             "2026/11/25 13:39:32.000, 1980, 485.38, 0x0000000000000000",
             "2026/11/25 13:39:33.000, 1500, 700.22, 0x0000000000000004",
             "2026/11/25 13:39:34.000, 1545, 698.21, 0x0000000000000004",
             "2026/11/25 13:39:35.000, [N/A], [N/A], [N/A]"]

    def test_lines_parsed_and_the_rest_skipped(self):
        samples = [gpu_clocks.parse(l) for l in self.LINES]
        self.assertIsNone(samples[0])
        self.assertIsNone(samples[-1])
        self.assertEqual(samples[3][1:], (1500.0, 700.22, 4))
        self.assertAlmostEqual(samples[3][0] - samples[2][0], 1.0, places=6)
        self.assertIsNone(gpu_clocks.parse("1980, 485.38, 0x0"))  # no timestamp

    def test_summary_over_a_window(self):
        samples = [s for s in map(gpu_clocks.parse, self.LINES) if s]
        t0 = samples[0][0]
        whole = gpu_clocks.summarize(samples)
        self.assertEqual(whole, {"sm_mhz": 1545.0, "power_w": 491.0, "limited": 0.5, "samples": 4})
        loaded = gpu_clocks.summarize(samples, t0 + 0.5, t0 + 3.0)  # the last three
        self.assertEqual(loaded["samples"], 3)
        self.assertEqual(loaded["sm_mhz"], 1545.0)
        self.assertAlmostEqual(loaded["limited"], 2 / 3, places=3)
        self.assertIsNone(gpu_clocks.summarize(samples, t0 + 10))
        self.assertEqual(gpu_clocks.describe(loaded), "1,545 MHz, 628 W, limited in 67% of 3 samples")
        self.assertEqual(gpu_clocks.describe(None), "")

    def test_a_sampler_reads_its_command_until_the_block_ends(self):
        script = "import sys, time\n" + "".join(f"print({l!r}, flush=True)\n" for l in self.LINES) + "time.sleep(30)\n"
        with gpu_clocks.ClockSampler(command=[sys.executable, "-c", script]) as clocks:
            for _ in range(200):  # until the lines are read; the command then sleeps and is stopped
                if len(clocks.samples) == 4:
                    break
                time.sleep(0.01)
        self.assertEqual([s[1] for s in clocks.samples], [345.0, 1980.0, 1500.0, 1545.0])
        self.assertEqual(clocks.summary()["samples"], 4)
        with gpu_clocks.ClockSampler(command=[]) as nothing:  # no nvidia-smi: nothing sampled
            pass
        self.assertIsNone(nothing.summary())


class TraceSummaryTest(unittest.TestCase):
    # Two streams over 100 µs: a warm-up kernel, then A (0-40 µs) beside B (30-50), a gap to 60, C
    # (60-100); host-to-device copies of 1 MB in 10 µs beside A and of 2 MB in 20 µs (half of it in
    # the gap), a memset, and lines that are not rows.
    TRACE = "\n".join([
        "K,0,5000,7,warmup",
        "K,100000,140000,7,_Z1Av", "K,130000,150000,8,B", "K,160000,200000,7,_Z1Av",
        "C,100000,110000,7,1 1000000", "C,145000,165000,8,1 2000000", "S,120000,121000,8,memset 64",
        "garbage", "K,1,2,3", "K,x,2,3,bad",
    ]) + "\n"

    def summary(self, last=0):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(self.TRACE)
        try:
            return trace_summary.summarize(trace_summary.read(f.name), last)
        finally:
            os.unlink(f.name)

    def test_busy_time_overlap_gaps_and_copies_of_the_last_kernels(self):
        lines = self.summary(last=3)
        # 100 µs span, kernels running 90 of it (the 50-60 gap), their times adding up to 100.
        self.assertEqual(lines[0], "3 kernels over 0.100 ms on 2 streams: a kernel running 90.0% of the time; "
                                   "the kernels' times add up to 0.100 ms")
        self.assertEqual(lines[1], "kernels at once, share of the time: 0: 10.0%, 1: 80.0%, 2: 10.0%")
        self.assertEqual(lines[2], "idle gaps: 1, 0.010 ms in all, median 10.0 µs, longest 10.0 µs")
        self.assertIn("host to device: 2, 0.030 ms, 3.0 MB, 100.0 GB/s while running, 66.7% of it beside a kernel", lines)
        self.assertIn("memset: 1, 0.001 ms, 0.0 MB, 0.1 GB/s while running, 100.0% of it beside a kernel", lines)
        kernels = lines[lines.index("    runs     mean   median      min      max  µs, kernel") + 1:]
        self.assertEqual(len(kernels), 2)
        self.assertTrue(kernels[0].startswith("       2     40.0     40.0     40.0     40.0  "), kernels[0])
        self.assertTrue(kernels[0].endswith("A()") or kernels[0].endswith("_Z1Av"), kernels[0])  # c++filt or not
        self.assertTrue(kernels[1].endswith("  B"), kernels[1])

    def test_the_whole_trace_and_a_file_without_rows(self):
        lines = self.summary()
        self.assertTrue(lines[0].startswith("4 kernels over 0.200 ms on 2 streams"), lines[0])
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("no trace here\n")
        try:
            out = subprocess.run([sys.executable, os.path.join(SRC, "bench", "trace_summary.py"), f.name],
                                 capture_output=True, text=True)
        finally:
            os.unlink(f.name)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("no trace rows", out.stderr)

    def test_timeline_of_the_runs_with_the_commonest_kernel_count(self):
        # Three runs 100 µs apart: two of kernels X (0-4 µs, then 0-6) and Y (5-9, then 7-13), one
        # of X alone; the medians are over the two runs of two kernels, each from its run's start.
        rows = [("K", 0, 4000, 7, "X"), ("K", 5000, 9000, 7, "Y"),
                ("K", 100000, 106000, 7, "X"), ("K", 107000, 113000, 8, "Y"),
                ("K", 200000, 203000, 7, "X"),
                ("C", 50000, 51000, 7, "1 64")]
        lines = trace_summary.timeline(rows, 15)
        self.assertEqual(lines[0], "2 of 3 runs with 2 kernels; median span 13.0 µs")
        self.assertEqual(lines[2], "     0.0      6.0      6.0  X")  # medians of two: the upper one
        self.assertEqual(lines[3], "     7.0     13.0      6.0  Y")
        # A gap no longer than the threshold keeps the kernels in one run.
        self.assertEqual(trace_summary.timeline(rows, 200)[0], "1 of 1 runs with 5 kernels; median span 203.0 µs")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
