"""rankd serve on the GPU when the device fails, by fault injection (`--cuda fault_*`, a build with
RANKD_FAULT_INJECTION; src/backend/cuda/faults.h), over real sockets:

- a device allocation that fails (a request too large for the memory left): that request gets a
  503 naming device memory, the server stays ready, and smaller requests before and after score
  the same; a merged batch too large to allocate runs its requests alone and all succeed;
- a sticky CUDA error (a kernel writing to an invalid address poisons the context): the request
  that met it gets a 500 saying so, every later one a fast 503, readiness and liveness fail so an
  orchestrator restarts the server, and the process still answers and stops cleanly on SIGTERM;
- a model with CPU routing's fallback (`routing: {cpu: fallback}`) whose GPU fails, by a real or a
  simulated sticky error: every request is answered from the CPU with the GPU's scores, the one
  that met the failure included, and the server stays ready;
- a load that does not fit beside a serving model is refused, with the estimate, before it takes
  device memory, and the serving model goes on answering as before; with `routing: {cpu: fallback}`
  it loads on the CPU instead and scores as the GPU does;
- on two GPUs, a model replicated on both (`--gpus all`) whose second GPU fails as after a sticky
  error (simulated: a real one poisoned both GPUs of the process on the host measured,
  docs/replicas.md): the request running there fails, every later one is served by the first GPU
  with the same scores, the server stays ready and live, and `rankd_gpu_healthy` names the failed GPU.

  /usr/bin/python3 tests/gpu_faults_test.py RANKD_BINARY SOURCE_DIR

Skipped without a CUDA device or without fault injection in the build.
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from serving_harness import RANKD, ZOO, Server, enable_batching, random_din_request


def probe():
    """None when this binary can inject CUDA faults on a device here, else why not."""
    run = subprocess.run([RANKD, "inspect", "--model-repository", ZOO, "--model", "din", "--backend", "cuda", "--cuda",
                          "fault_device_mb=1000000"], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        return (run.stderr or run.stdout).strip().splitlines()[-1:] or ["inspect failed"]
    return None


WHY_NOT = probe()


def gpu_count():
    """GPUs a model replicated on all of them runs on (rankd inspect's replica lines)."""
    if WHY_NOT:
        return 0
    run = subprocess.run([RANKD, "inspect", "--model-repository", ZOO, "--model", "din", "--backend", "cuda",
                          "--gpus", "all"], capture_output=True, text=True, timeout=120)
    return len(re.findall(r"^  cuda:\d+$", run.stdout, re.M)) if run.returncode == 0 else 0


GPUS = gpu_count()


def din_repo(*names):
    repo = tempfile.mkdtemp()
    for name in names:
        shutil.copytree(os.path.join(ZOO, "din"), os.path.join(repo, name))
        path = os.path.join(repo, name, "config.yaml")
        with open(path) as f:
            config = f.read().replace("name: din", "name: " + name)
        with open(path, "w") as f:
            f.write(config)
    return repo


def infer(server, model, body):
    status, data, _ = server.request("POST", "/v2/models/%s/infer" % model, json.dumps(body))
    return status, json.loads(data) if data else None


def scores(answer):
    return [o["data"] for o in answer["outputs"]]


def assert_same_scores(test, got, want):
    """Two answers' scores, output by output, within the 1e-5 the GPU and CPU or two plans may
    round apart."""
    for a, b in zip(scores(got), want):
        test.assertEqual(len(a), len(b))
        for x, y in zip(a, b):
            test.assertAlmostEqual(x, y, delta=1e-6 + 1e-5 * abs(y))


@unittest.skipIf(WHY_NOT, "no CUDA fault injection here: %s" % WHY_NOT)
class DeviceAllocationFailure(unittest.TestCase):
    LIMIT_MB = 40  # above each executor's 32 MB cuBLASLt workspace, below a large request's workspace

    def test_a_request_too_large_for_device_memory_gets_503_and_the_rest_score_as_before(self):
        repo = din_repo("din")
        server = Server(repo, "--backend", "cuda", "--cuda", "fault_fail_allocations_over_mb=%d" % self.LIMIT_MB)
        try:
            rng = random.Random(59)
            small = random_din_request(rng, 16, 12)
            status, before = infer(server, "din", small)
            self.assertEqual(status, 200, before)
            failed = None
            for rows in (1024, 4096, 16384, 65536):
                status, answer = infer(server, "din", random_din_request(rng, rows, 20))
                if status != 200:
                    failed = (rows, status, answer)
                    break
            self.assertIsNotNone(failed, "no request up to 65,536 rows needed more than %d MB" % self.LIMIT_MB)
            rows, status, answer = failed
            self.assertEqual(status, 503, answer)
            self.assertIn("out of device memory", answer["error"])
            self.assertEqual(server.request("GET", "/v2/health/ready")[0], 200)
            status, after = infer(server, "din", small)
            self.assertEqual(status, 200, after)
            self.assertEqual(scores(after), scores(before))
        finally:
            self.assertEqual(server.stop(), 0, server.output())

    def test_a_merged_batch_too_large_to_allocate_runs_its_requests_alone(self):
        repo = din_repo("din", "din_batched")
        enable_batching(os.path.join(repo, "din_batched"),
                        "max_queue_delay_microseconds: 50000, executors: 1, cost_per_row: 1, "
                        "cost_per_sequence_element: 0, cost_per_request: 10, cost_budget: 100000000")
        server = Server(repo, "--backend", "cuda", "--cuda", "fault_fail_allocations_over_mb=%d" % self.LIMIT_MB)
        try:
            rng = random.Random(60)
            # The largest size that runs alone; eight of them merged pass the limit.
            alone = 0
            for rows in (256, 1024, 4096, 16384):
                if infer(server, "din", random_din_request(rng, rows, 20))[0] != 200:
                    break
                alone = rows
            self.assertGreater(alone, 0)
            bodies = [random_din_request(rng, alone, 20) for _ in range(8)]
            expected = []
            for body in bodies:
                status, answer = infer(server, "din", body)
                self.assertEqual(status, 200, answer)
                expected.append(scores(answer))
            got = [None] * len(bodies)

            def send(k):
                got[k] = infer(server, "din_batched", bodies[k])

            threads = [threading.Thread(target=send, args=(k,)) for k in range(len(bodies))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for k, (status, answer) in enumerate(got):
                self.assertEqual(status, 200, answer)
                for a, b in zip(scores(answer), expected[k]):
                    self.assertEqual(len(a), len(b))
                    for x, y in zip(a, b):
                        self.assertAlmostEqual(x, y, delta=1e-4 + 1e-3 * abs(y))
        finally:
            self.assertEqual(server.stop(), 0, server.output())


@unittest.skipIf(WHY_NOT, "no CUDA fault injection here: %s" % WHY_NOT)
class StickyError(unittest.TestCase):
    def test_a_poisoned_device_fails_its_request_then_refuses_fast_and_drops_readiness_and_liveness(self):
        repo = din_repo("din")
        server = Server(repo, "--backend", "cuda", "--cuda", "fault_poison_after_runs=300")
        try:
            rng = random.Random(61)
            body = random_din_request(rng, 8, 10)
            served = 0
            while True:
                status, answer = infer(server, "din", body)
                if status != 200:
                    break
                served += 1
                self.assertLess(served, 300, "no run met the injected fault")
            self.assertGreater(served, 0, "the fault came before the model served (the load's runs took it)")
            self.assertEqual(status, 500, answer)
            self.assertIn("unusable until the server restarts", answer["error"])
            start = time.monotonic()
            for _ in range(20):
                status, answer = infer(server, "din", body)
                self.assertEqual(status, 503, answer)
                self.assertIn("unrecoverable error", answer["error"])
            self.assertLess((time.monotonic() - start) / 20, 0.05)
            for probe_path in ("/v2/health/ready", "/v2/health/live", "/v2/models/din/ready"):
                status, data, _ = server.request("GET", probe_path)
                self.assertEqual(status, 503, probe_path)
                self.assertIn("unrecoverable error", json.loads(data)["error"])
            status, data, _ = server.request("POST", "/v2/repository/index")
            self.assertEqual(status, 200)
            self.assertEqual([e["state"] for e in json.loads(data)], ["UNAVAILABLE"])
            self.assertEqual(server.request("GET", "/v2/models/din")[0], 200)  # metadata still answers
            self.assertIsNone(server.proc.poll())
        finally:
            self.assertEqual(server.stop(), 0, server.output())


@unittest.skipIf(WHY_NOT, "no CUDA fault injection here: %s" % WHY_NOT)
class CpuFallback(unittest.TestCase):
    """A model with `routing: {cpu: fallback}` (docs/routing.md) whose GPU fails serves every request
    on the CPU, the one that met the failure included, with the GPU's scores; it stays ready."""

    def check(self, *cuda_args):
        repo = din_repo("din")
        with open(os.path.join(repo, "din", "config.yaml"), "a") as f:
            f.write("\nrouting: {cpu: fallback}\n")
        server = Server(repo, "--backend", "cuda", *cuda_args)
        try:
            rng = random.Random(65)
            bodies = [random_din_request(rng, 8 + 4 * k, 10) for k in range(4)]
            expected = []
            for body in bodies:
                status, answer = infer(server, "din", body)
                self.assertEqual(status, 200, answer)
                expected.append(scores(answer))
            for i in range(400):
                status, answer = infer(server, "din", bodies[i % len(bodies)])
                self.assertEqual(status, 200, answer)
                assert_same_scores(self, answer, expected[i % len(bodies)])
            status, text, _ = server.request("GET", "/metrics", port=server.metrics_port)
            text = text.decode() if isinstance(text, bytes) else text
            fallbacks = re.search(r'^rankd_route_fallbacks\{model="din",version="1"\} (\d+)$', text, re.M)
            self.assertTrue(fallbacks, text)
            self.assertGreater(int(fallbacks.group(1)), 0, "no run met the injected fault")
            for probe_path in ("/v2/health/ready", "/v2/models/din/ready"):
                self.assertEqual(server.request("GET", probe_path)[0], 200, probe_path)
        finally:
            self.assertEqual(server.stop(), 0, server.output())

    def test_a_sticky_error(self):
        self.check("--cuda", "fault_poison_after_runs=300")

    def test_a_simulated_sticky_error(self):
        self.check("--cuda", "fault_poison_after_runs=300", "--cuda", "fault_poison_simulated=1")


@unittest.skipIf(GPUS < 2, "needs two GPUs and CUDA fault injection")
class OneReplicaFails(unittest.TestCase):
    def test_the_other_gpu_serves_on_with_the_same_scores(self):
        repo = din_repo("din")
        server = Server(repo, "--backend", "cuda", "--gpus", "all", "--cuda", "fault_poison_device=1", "--cuda",
                        "fault_poison_after_runs=200", "--cuda", "fault_poison_simulated=1")
        try:
            rng = random.Random(63)
            bodies = [random_din_request(rng, 8 + 8 * k, 10) for k in range(8)]
            expected = []
            for body in bodies:
                status, answer = infer(server, "din", body)
                self.assertEqual(status, 200, answer)
                expected.append(scores(answer))
            failures = []
            done = threading.Event()

            def client(k):  # eight at once keep both GPUs busy until the second one fails
                for _ in range(400):
                    if done.is_set():
                        return
                    status, answer = infer(server, "din", bodies[k])
                    if status != 200:
                        failures.append((status, answer))
                        done.set()

            threads = [threading.Thread(target=client, args=(k,)) for k in range(len(bodies))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertTrue(failures, "no run on GPU 1 met the injected fault")
            for status, answer in failures:  # only what ran on the poisoned GPU
                self.assertEqual(status, 500, answer)
                self.assertIn("unusable until the server restarts", answer["error"])
            for _ in range(3):
                for k, body in enumerate(bodies):
                    status, answer = infer(server, "din", body)
                    self.assertEqual(status, 200, answer)
                    assert_same_scores(self, answer, expected[k])  # another bucket's plan may round apart
            for probe_path in ("/v2/health/ready", "/v2/health/live", "/v2/models/din/ready"):
                self.assertEqual(server.request("GET", probe_path)[0], 200, probe_path)
            status, text, _ = server.request("GET", "/metrics", port=server.metrics_port)
            self.assertEqual(status, 200)
            text = text.decode() if isinstance(text, bytes) else text
            self.assertIn('rankd_gpu_healthy{model="din",version="1",gpu="0"} 1', text)
            self.assertIn('rankd_gpu_healthy{model="din",version="1",gpu="1"} 0', text)
        finally:
            self.assertEqual(server.stop(), 0, server.output())


@unittest.skipIf(WHY_NOT, "no CUDA fault injection here: %s" % WHY_NOT)
class LoadThatDoesNotFit(unittest.TestCase):
    NEED = re.compile(r"needs about (\d+) MB")

    def need_mb(self, repo):
        """What a DIN load is estimated to need: read from a refusal on a device of 1 MB."""
        server = Server(repo, "--backend", "cuda", "--model-control-mode", "explicit", "--cuda", "fault_device_mb=1")
        try:
            status, data, _ = server.request("POST", "/v2/repository/models/din/load")
            self.assertNotEqual(status, 200)
            return int(self.NEED.search(json.loads(data)["error"]).group(1))
        finally:
            server.stop()

    def test_a_load_past_the_free_memory_is_refused_and_the_serving_model_goes_on(self):
        repo = din_repo("din", "din_copy")
        need = self.need_mb(repo)
        # Room for one model and the 256 MB kept for serving ones, plus 16 MB: the first model's
        # buffers (four 32 MB cuBLASLt workspaces at least) leave too little for the second.
        server = Server(repo, "--backend", "cuda", "--model-control-mode", "explicit", "--cuda",
                        "fault_device_mb=%d" % (need + 256 + 16))
        try:
            status, data, _ = server.request("POST", "/v2/repository/models/din/load")
            self.assertEqual(status, 200, data)
            body = random_din_request(random.Random(62), 32, 15)
            status, before = infer(server, "din", body)
            self.assertEqual(status, 200, before)
            status, data, _ = server.request("POST", "/v2/repository/models/din_copy/load")
            self.assertNotEqual(status, 200, data)
            error = json.loads(data)["error"]
            self.assertRegex(error, self.NEED)
            self.assertIn("stay free for the models already serving", error)
            status, after = infer(server, "din", body)
            self.assertEqual(status, 200, after)
            self.assertEqual(scores(after), scores(before))
            # The model's own readiness holds (the server's, under the default strict readiness,
            # waits for every model asked for, din_copy included, as Triton's does).
            self.assertEqual(server.request("GET", "/v2/models/din/ready")[0], 200)
            status, data, _ = server.request("POST", "/v2/repository/index")
            states = {e["name"]: (e["state"], e["reason"]) for e in json.loads(data)}
            self.assertEqual(states["din"][0], "READY")
            self.assertEqual(states["din_copy"][0], "UNAVAILABLE")
            self.assertRegex(states["din_copy"][1], self.NEED)
        finally:
            self.assertEqual(server.stop(), 0, server.output())


    def test_with_cpu_fallback_a_load_past_the_free_memory_serves_on_the_cpu(self):
        repo = din_repo("din", "din_copy")
        need = self.need_mb(repo)
        with open(os.path.join(repo, "din_copy", "config.yaml"), "a") as f:
            f.write("\nrouting: {cpu: fallback}\n")  # docs/routing.md
        server = Server(repo, "--backend", "cuda", "--model-control-mode", "explicit", "--cuda",
                        "fault_device_mb=%d" % (need + 256 + 16))
        try:
            for name in ("din", "din_copy"):
                status, data, _ = server.request("POST", "/v2/repository/models/%s/load" % name)
                self.assertEqual(status, 200, data)
            rng = random.Random(64)
            for rows in (1, 8, 32):
                body = random_din_request(rng, rows, 15)
                status, on_gpu = infer(server, "din", body)
                self.assertEqual(status, 200, on_gpu)
                status, on_cpu = infer(server, "din_copy", body)
                self.assertEqual(status, 200, on_cpu)
                assert_same_scores(self, on_cpu, scores(on_gpu))
            self.assertEqual(server.request("GET", "/v2/health/ready")[0], 200)
            self.assertIn("it serves on the CPU alone", server.output())
        finally:
            self.assertEqual(server.stop(), 0, server.output())


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
