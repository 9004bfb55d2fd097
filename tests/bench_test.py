"""`rankd bench engine`, `rankd bench load` and `rankd bench server` (HTTP and gRPC) as a user runs them.

  /usr/bin/python3 tests/bench_test.py RANKD_BINARY SOURCE_DIR

The engine benchmark on a zoo model; the load generator against a real server on free ports:
every request answered, the figures consistent with each other, bad input refused before timing.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from serving_harness import RANKD, SRC, ZOO, Server, free_port

DATA = os.path.join(SRC, "tests", "data", "zoo")


def run(*args):
    return subprocess.run([RANKD, *args], capture_output=True, text=True, timeout=120)


def load(path):
    with open(path) as f:
        return json.load(f)


def zeros(x):
    return [zeros(e) for e in x] if isinstance(x, list) else 0


def write_zero_requests(path):
    """din's first request with every value replaced by 0: all-zero inputs."""
    with open(os.path.join(DATA, "din.requests.jsonl")) as f:
        body = json.loads(f.readline())
    for i in body["inputs"]:
        i["data"] = zeros(i["data"])
    with open(path, "w") as f:
        f.write(json.dumps(body) + "\n")


class EngineBenchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_result_line_and_json_file(self):
        requests = os.path.join(DATA, "dlrm_dcnv2.requests.jsonl")
        out = os.path.join(self.tmp, "r.json")
        r = run("bench", "engine", "--model-repo", ZOO, "--model", "dlrm_dcnv2", "--requests", requests, "--iters", "40",
                "--warmup", "3", "--label", "w1", "--json", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        line = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual(load(out), line)
        self.assertEqual(line["label"], "w1")
        self.assertEqual(line["backend"], "cpu")
        self.assertEqual(line["iters"], 40)
        self.assertIn("bench engine --model-repo", line["command"])
        with open(requests) as f:
            self.assertEqual(line["rows"], json.loads(f.readline())["inputs"][0]["shape"][0])
        self.assertLessEqual(line["min_ms"], line["median_ms"])
        self.assertLessEqual(line["median_ms"], line["p99_ms"])
        self.assertLessEqual(line["p99_ms"], line["max_ms"])
        self.assertAlmostEqual(line["pairs_per_s"], line["rows"] / line["median_ms"] * 1000, delta=1e-6 * line["pairs_per_s"])
        self.assertGreater(line["steps"], 10)
        self.assertEqual((line["graph_hits"], line["graph_misses"]), (0, 0))  # no graphs on the CPU
        self.assertIsNone(line["launches"])  # the CPU puts nothing on a device
        self.assertTrue(line["fusion"])

    def test_requests_in_flight(self):
        # Two threads score 40 requests; throughput counts the rows actually scored over the run.
        requests = os.path.join(DATA, "dlrm_dcnv2.requests.jsonl")
        began = time.time()
        r = run("bench", "engine", "--model-repo", ZOO, "--model", "dlrm_dcnv2", "--requests", requests, "--iters", "40",
                "--warmup", "3", "--in-flight", "2")
        ended = time.time()
        self.assertEqual(r.returncode, 0, r.stderr)
        line = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual(line["in_flight"], 2)
        with open(requests) as f:
            sizes = [json.loads(l)["inputs"][0]["shape"][0] for l in f if l.strip()]
        scored = sum(sizes[i % len(sizes)] for i in range(40))
        # Each request took at least min_ms; two at a time, the run took at least half their sum.
        self.assertGreater(line["throughput_pairs_per_s"], 0)
        self.assertLessEqual(line["throughput_pairs_per_s"], scored / (40 * line["min_ms"] / 2 / 1000) * 1.001)
        # The timed runs' window on the wall clock (bench/gpu_clocks.py reads the GPU's clock over it):
        # inside the command's run, and the span the throughput was counted over.
        self.assertGreaterEqual(line["timed_start_unix_s"], began - 1e-3)
        self.assertLessEqual(line["timed_start_unix_s"] + line["timed_s"], ended + 1e-3)
        self.assertAlmostEqual(line["throughput_pairs_per_s"] * line["timed_s"], scored, delta=1e-6 * scored)
        self.assertEqual(run("bench", "engine", "--model-repo", ZOO, "--model", "dlrm_dcnv2", "--requests", requests,
                             "--in-flight", "0").returncode, 105)  # CLI11's range check

    def test_csv_rows_append_under_one_header(self):
        path = os.path.join(self.tmp, "sweep.csv")
        for label in ["one, with a comma", 'two "quoted"']:
            r = run("bench", "engine", "--model-repo", ZOO, "--model", "mmoe", "--requests",
                    os.path.join(DATA, "mmoe.requests.jsonl"), "--iters", "10", "--label", label, "--csv", path,
                    "--no-fusion")
            self.assertEqual(r.returncode, 0, r.stderr)
        with open(path) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([row["label"] for row in rows], ["one, with a comma", 'two "quoted"'])
        self.assertEqual({row["backend"] for row in rows}, {"cpu"})
        for row in rows:
            self.assertAlmostEqual(float(row["pairs_per_s"]), int(row["rows"]) / float(row["median_ms"]) * 1000,
                                   delta=1e-3 * float(row["pairs_per_s"]))

    def test_refuses_all_zero_and_malformed_requests(self):
        zeros = os.path.join(self.tmp, "zeros.jsonl")
        write_zero_requests(zeros)
        r = run("bench", "engine", "--model-repo", ZOO, "--model", "din", "--requests", zeros)
        self.assertEqual(r.returncode, 2)
        self.assertIn("all zeros", r.stderr)
        bad = os.path.join(self.tmp, "bad.jsonl")
        with open(os.path.join(DATA, "din.requests.jsonl")) as f, open(bad, "w") as g:
            g.write(f.readline() + '{"inputs": [\n')
        r = run("bench", "engine", "--model-repo", ZOO, "--model", "din", "--requests", bad)
        self.assertEqual(r.returncode, 2)
        self.assertIn("line 2", r.stderr)
        r = run("bench", "engine", "--model-repo", ZOO, "--model", "nosuch", "--requests", os.path.join(DATA, "din.requests.jsonl"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("nosuch", r.stderr)


class LoadBenchTest(unittest.TestCase):
    """`rankd bench load`: open-loop load in-process through the batcher."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def bench(self, repo, model, *extra):
        out = os.path.join(self.tmp, "load.json")
        r = run("bench", "load", "--model-repo", repo, "--model", model, "--requests",
                os.path.join(DATA, "dlrm_dcnv2.requests.jsonl"), "--json", out, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return load(out)

    def test_every_arrival_answered_and_figures_consistent(self):
        # Rates a sanitized build on two busy cores still serves: the figures are checked, not the speed.
        result = self.bench(ZOO, "dlrm_dcnv2", "--rates", "100,200", "--seconds", "1", "--warmup", "0.5",
                            "--p99-target-ms", "2000")
        self.assertTrue(result["batching"])
        self.assertEqual(result["backend"], "cpu")
        self.assertIn("bench load --model-repo", result["command"])
        self.assertEqual([r["offered_rate"] for r in result["results"]], [100, 200])
        for r in result["results"]:
            self.assertEqual(r["errors"], 0, r)
            self.assertEqual(r["sent"], r["ok"])
            self.assertGreater(r["ok"], 0.6 * r["offered_rate"])  # Poisson arrivals over one second
            self.assertLess(r["ok"], 1.4 * r["offered_rate"])
            self.assertLessEqual(r["p50_ms"], r["p90_ms"])
            self.assertLessEqual(r["p90_ms"], r["p99_ms"])
            self.assertLessEqual(r["p99_ms"], r["p999_ms"])
            self.assertLessEqual(r["p999_ms"], r["max_ms"])
            self.assertGreaterEqual(r["requests_per_execution"], 1)
            self.assertGreater(r["cpu_ms_per_request"], 0)
        self.assertEqual(result["highest_rate_within_target"], 200)
        cost = result["batch_cost"]  # what the warm-up fitted, so runs that merge differently can be told apart
        # The fit's own figures, not its values: on a sanitized build's busy cores the fixed part of a
        # run can come out as nothing (no budget: every request alone), which is the fit's answer then.
        self.assertGreaterEqual(cost["cost_per_request"], 0)
        self.assertAlmostEqual(cost["cost_budget"], 10 * cost["cost_per_request"], delta=1e-6 * cost["cost_budget"] + 1e-9)
        self.assertGreaterEqual(cost["cost_per_row"], 0)
        self.assertGreater(cost["max_batch_rows"], 0)

    def test_a_full_queue_counts_as_failures(self):
        repo = os.path.join(self.tmp, "repo")
        shutil.copytree(os.path.join(ZOO, "dlrm_dcnv2"), os.path.join(repo, "dlrm_dcnv2"))
        with open(os.path.join(repo, "dlrm_dcnv2", "config.yaml"), "a") as f:
            f.write("\nbatching: {max_queue_size: 1, executors: 1, max_batch_size: 1, cost_per_row: 1, "
                    "cost_per_sequence_element: 0, cost_per_request: 0, cost_budget: 1}\n")
        result = self.bench(repo, "dlrm_dcnv2", "--rates", "20000", "--seconds", "0.5", "--warmup", "0",
                            "--p99-target-ms", "2000")
        r = result["results"][0]
        self.assertGreater(r["errors"], 0)
        self.assertEqual(r["sent"], r["ok"] + r["errors"])
        self.assertEqual(result["highest_rate_within_target"], 0)


class ServerBenchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        for name in ["din", "dlrm_dcnv2", "mmoe_strings"]:
            shutil.copytree(os.path.join(ZOO, name), os.path.join(cls.repo, name))
        # The frontends' queue bounds lifted: a request that waits 20 ms on a busy 2-core machine under
        # sanitizers is not overload here (OverloadTest in async_core_test.py checks the bounds).
        cls.server = Server(cls.repo, "--http-max-queue-ms", "600000", "--grpc-max-queue-ms", "600000")
        cls.tmp = tempfile.mkdtemp()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)
        shutil.rmtree(cls.tmp)

    def bench(self, protocol, model, requests, *extra):
        port = self.server.grpc_port if protocol == "grpc" else self.server.http_port
        out = os.path.join(self.tmp, "out.json")
        r = run("bench", "server", "--protocol", protocol, "--port", str(port), "--model", model, "--requests", requests,
                "--seconds", "1.5", "--warmup", "0.3", "--connections", "4", "--json", out, *extra)
        return r, (load(out) if r.returncode == 0 else None)

    def test_every_request_answered_over_both_protocols(self):
        for protocol in ["http", "grpc"]:
            for model in ["din", "dlrm_dcnv2"]:  # ragged ids and dense floats
                with self.subTest(protocol=protocol, model=model):
                    csv_path = os.path.join(self.tmp, "out.csv")
                    r, out = self.bench(protocol, model, os.path.join(DATA, f"{model}.requests.jsonl"),
                                        "--rates", "40,80", "--csv", csv_path, "--p99-target-ms", "10000")
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(out["protocol"], protocol)
                    self.assertEqual(out["client_threads"], 4)  # four sending threads (HTTP: one connection each)
                    self.assertIn(f"--protocol {protocol}", out["command"])
                    self.assertEqual([x["offered_rate"] for x in out["results"]], [40, 80])
                    ok_code = "200" if protocol == "http" else "0"
                    for x in out["results"]:
                        self.assertEqual((x["errors"], x["timeouts"]), (0, 0), x)
                        self.assertEqual(x["statuses"], {ok_code: x["ok"]})
                        self.assertEqual(x["sent"], x["ok"])
                        # Poisson arrivals over 1.5 s: the count is random, but not by half.
                        self.assertGreater(x["achieved_rate"], 0.5 * x["offered_rate"])
                        self.assertLess(x["achieved_rate"], 1.5 * x["offered_rate"])
                        self.assertTrue(0 < x["p50_ms"] <= x["p90_ms"] <= x["p99_ms"] <= x["p999_ms"] <= x["max_ms"], x)
                    self.assertIn(out["highest_rate_within_target"], (0, 40, 80))
                    with open(csv_path) as f:
                        rows = list(csv.DictReader(f))
                    self.assertEqual([float(row["offered_rate"]) for row in rows], [40, 80])
                    self.assertIn("[2/2] 80.0 requests/s", r.stderr)  # the progress line

    def test_errors_are_counted_not_timed(self):
        for protocol, code in [("http", "404"), ("grpc", "5")]:  # gRPC NOT_FOUND
            with self.subTest(protocol=protocol):
                r, out = self.bench(protocol, "nosuch", os.path.join(DATA, "din.requests.jsonl"), "--rates", "50")
                self.assertEqual(r.returncode, 0, r.stderr)
                x = out["results"][0]
                self.assertGreater(x["sent"], 0)
                self.assertEqual(x["errors"], x["sent"])
                self.assertEqual(x["ok"], 0)
                self.assertEqual(x["statuses"], {code: x["sent"]})
        r = self.server.request("GET", "/v2/health/live")
        self.assertEqual(r[0], 200)

    def test_binary_bodies_and_refusals(self):
        for lengths in ["tensor", "parameter"]:  # ragged lengths as NAME.lengths tensors, or as parameters
            r, out = self.bench("http", "dlrm_dcnv2", os.path.join(DATA, "dlrm_dcnv2.requests.jsonl"), "--rates", "50",
                                "--binary", "--lengths", lengths)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual((out["results"][0]["errors"], out["results"][0]["timeouts"]), (0, 0))
            self.assertGreater(out["results"][0]["ok"], 0)
            self.assertTrue(out["binary"])
            self.assertEqual(out["lengths"], lengths)
        r, _ = self.bench("grpc", "din", os.path.join(DATA, "din.requests.jsonl"), "--rates", "50", "--binary")
        self.assertEqual(r.returncode, 2)
        zeros = os.path.join(self.tmp, "zeros.jsonl")
        write_zero_requests(zeros)
        for protocol in ["http", "grpc"]:
            r, _ = self.bench(protocol, "din", zeros, "--rates", "50")
            self.assertEqual(r.returncode, 2)
            self.assertIn("all zeros", r.stderr)
        r = run("bench", "server", "--port", str(free_port()), "--model", "din", "--requests",
                os.path.join(DATA, "din.requests.jsonl"), "--seconds", "0.5")
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot connect", r.stderr)

    def test_typed_contents(self):
        """--typed: gRPC tensors as typed contents (int64_contents, fp32_contents, bytes_contents for
        W4s's strings), every request answered; refused over HTTP."""
        strings = os.path.join(self.tmp, "mmoe_strings.jsonl")
        with open(strings, "w") as f:
            for k in range(3):
                rows = range(2)
                f.write(json.dumps({"inputs": [
                    {"name": "ids", "datatype": "INT64", "shape": [2, 14],
                     "data": [[(k + i + j) % 100 for j in range(14)] for i in rows]},
                    {"name": "categories", "datatype": "BYTES", "shape": [2, 6],
                     "data": [["f%d=v%d" % (14 + j, 7 * k + i + j) for j in range(6)] for i in rows]},
                    {"name": "dense", "datatype": "FP32", "shape": [2, 10],
                     "data": [[0.5 * (i + j + k) for j in range(10)] for i in rows]}]}) + "\n")
        for model, requests in [("din", os.path.join(DATA, "din.requests.jsonl")),
                                ("dlrm_dcnv2", os.path.join(DATA, "dlrm_dcnv2.requests.jsonl")),
                                ("mmoe_strings", strings)]:
            with self.subTest(model=model):
                r, out = self.bench("grpc", model, requests, "--rates", "50", "--typed")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(out["typed"])
                x = out["results"][0]
                self.assertEqual((x["errors"], x["timeouts"]), (0, 0), x)
                self.assertEqual(x["statuses"], {"0": x["ok"]})
                self.assertGreater(x["ok"], 0)
        r, _ = self.bench("http", "din", os.path.join(DATA, "din.requests.jsonl"), "--rates", "50", "--typed")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--typed is for --protocol grpc", r.stderr)

    def test_shared_memory_requests(self):
        """--shared-memory system over either protocol: every request answered from a region the client
        registered over that protocol, which is gone from the server and from /dev/shm afterwards."""
        for protocol, ok in [("grpc", "0"), ("http", "200")]:
            for model in ["din", "dlrm_dcnv2"]:
                with self.subTest(protocol=protocol, model=model):
                    r, out = self.bench(protocol, model, os.path.join(DATA, f"{model}.requests.jsonl"), "--rates",
                                        "60", "--shared-memory", "system")
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(out["shared_memory"], "system")
                    x = out["results"][0]
                    self.assertEqual((x["errors"], x["timeouts"]), (0, 0), x)
                    self.assertEqual(x["statuses"], {ok: x["ok"]})
                    self.assertGreater(x["ok"], 0)
                    status, regions = self.server.json("GET", "/v2/systemsharedmemory/status")
                    self.assertEqual((status, regions), (200, []))
                    self.assertFalse([f for f in os.listdir("/dev/shm") if f.startswith("rankd_bench_")])
        r, _ = self.bench("http", "din", os.path.join(DATA, "din.requests.jsonl"), "--rates", "50",
                          "--shared-memory", "system", "--binary")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--shared-memory sends no tensors in the body", r.stderr)
        for protocol in ["grpc", "http"]:
            r, _ = self.bench(protocol, "nosuch", os.path.join(DATA, "din.requests.jsonl"), "--rates", "50",
                              "--shared-memory", "system")
            self.assertEqual(r.returncode, 2)
            self.assertIn("model metadata", r.stderr)


class DiskBenchTest(unittest.TestCase):
    """`rankd bench disk`: a file written, its rows read in batches, the figures consistent."""

    def setUp(self):
        # In the build tree (a disk filesystem) rather than /tmp, which may be tmpfs.
        self.tmp = tempfile.mkdtemp(dir=os.getcwd())

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_rows_and_ceiling_with_and_without_a_host_cache(self):
        path, out = os.path.join(self.tmp, "rows.bin"), os.path.join(self.tmp, "disk.json")
        r = run("bench", "disk", "--file", path, "--create-mb", "16", "--seconds", "0.4", "--batch", "512",
                "--json", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.path.getsize(path), 16 << 20)
        self.assertIn("disk ceiling: random 4096-byte reads", r.stdout)
        d = load(out)
        self.assertGreater(d["ceiling"]["reads_per_second"], 0)
        rows = d["rows"]
        self.assertEqual(rows["row_bytes"], 256)
        self.assertGreater(rows["rows_per_second"], 0)
        self.assertGreater(rows["file_mb_per_second"], 0)
        self.assertEqual(rows["host_cache_hit_ratio"], 0)
        self.assertLessEqual(rows["batch_p50_ms"], rows["batch_p99_ms"])
        # Zipf ids through a host cache of a tenth of the rows: most come from the cache.
        r = run("bench", "disk", "--file", path, "--seconds", "0.4", "--batch", "512", "--zipf", "1.05",
                "--cache-rows", str((16 << 20) // 256 // 10), "--json", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(load(out)["rows"]["host_cache_hit_ratio"], 0.5)

    def test_missing_file_and_bad_options(self):
        r = run("bench", "disk", "--file", os.path.join(self.tmp, "absent.bin"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("no file", r.stderr)
        r = run("bench", "disk", "--file", os.path.join(self.tmp, "x.bin"), "--queue-depth", "0")
        self.assertNotEqual(r.returncode, 0)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
