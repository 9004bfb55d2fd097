"""Batching served: merged requests score as alone, its metrics, and what it refuses.

  /usr/bin/python3 tests/server_batching_test.py RANKD_BINARY SOURCE_DIR
"""
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import unittest

from serving_harness import Server, enable_batching, random_din_request, scrape, ZOO


class BatchingTest(unittest.TestCase):
    """DIN served twice from one repository, as it is and with batching (cost model measured at
    warm-up) and shape buckets: concurrent clients on the batched copy get exactly what the plain
    copy answers."""

    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "din"), os.path.join(cls.repo, "din"))
        shutil.copytree(os.path.join(ZOO, "din"), os.path.join(cls.repo, "din_batched"))
        with open(os.path.join(cls.repo, "din_batched", "config.yaml")) as f:
            config = f.read().replace("name: din", "name: din_batched")
        with open(os.path.join(cls.repo, "din_batched", "config.yaml"), "w") as f:
            f.write(config)
        # Costs given, not measured: a measured fit with no fixed cost (as under a sanitizer) would
        # rightly run every request alone, and this test is about merged batches. No bound on the
        # queue's wait: on a loaded 2-core machine under a sanitizer 16 clients on one executor
        # queue past the automatic 20 ms and are refused (503), which is not what this test is about.
        enable_batching(os.path.join(cls.repo, "din_batched"),
                        "max_queue_delay_microseconds: 3000, max_queue_wait_microseconds: 0, executors: 1, "
                        "cost_per_row: 1, cost_per_sequence_element: 0, cost_per_request: 10, cost_budget: 400")
        with open(os.path.join(cls.repo, "din_batched", "config.yaml"), "a") as f:
            f.write("buckets: {}\n")  # merged batches are also padded to shape buckets
        cls.server = Server(cls.repo, "--http-threads", "16")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def test_concurrent_clients_get_unbatched_results_from_merged_executions(self):
        import random
        rng = random.Random(5)
        requests = [random_din_request(rng, rng.randint(1, 40), rng.randint(0, 20)) for _ in range(160)]
        for i, r in enumerate(requests):
            r["id"] = "r%d" % i
        bodies = [json.dumps(r) for r in requests]
        got, errors = {}, []

        def client(part):
            conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=30)
            for i in part:
                conn.request("POST", "/v2/models/din_batched/infer", body=bodies[i])
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    errors.append((r.status, data))
                else:
                    got[i] = json.loads(data)
            conn.close()

        threads = [threading.Thread(target=client, args=(range(t, len(bodies), 16),)) for t in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for i, body in enumerate(bodies):
            status, want = self.server.json("POST", "/v2/models/din/infer", requests[i])
            self.assertEqual(status, 200, want)
            self.assertEqual(got[i]["id"], "r%d" % i)
            self.assertEqual(got[i]["outputs"][0]["shape"], want["outputs"][0]["shape"])
            for a, b in zip(got[i]["outputs"][0]["data"], want["outputs"][0]["data"]):
                self.assertAlmostEqual(a, b, delta=1e-6)
        m = scrape(self.server)
        label = '{model="din_batched",version="1"}'
        self.assertGreaterEqual(m["nv_inference_request_success" + label], len(bodies))
        self.assertLess(m["nv_inference_exec_count" + label], m["nv_inference_request_success" + label])
        plain = '{model="din",version="1"}'
        self.assertEqual(m["nv_inference_exec_count" + plain], m["nv_inference_request_success" + plain])
        # Every merged batch ran padded to a bucket; the plain copy (CPU default) never pads.
        self.assertGreater(m["rankd_bucket_real_rows" + label], 0)
        self.assertGreater(m["rankd_bucket_padded_rows" + label], m["rankd_bucket_real_rows" + label])
        self.assertEqual(m["rankd_bucket_padded_rows" + plain], 0)
        self.assertEqual(m["rankd_graph_hits" + label] + m["rankd_graph_misses" + label], 0)  # no graphs on the CPU
        # Statistics count each merged batch once, at its rows summed: some above any one request's.
        status, stats = self.server.json("GET", "/v2/models/din_batched/stats")
        self.assertEqual(status, 200, stats)
        batches = stats["model_stats"][0]["batch_stats"]
        self.assertEqual(sum(b["compute_infer"]["count"] for b in batches), stats["model_stats"][0]["execution_count"])
        self.assertEqual(sum(int(b["batch_size"]) * b["compute_infer"]["count"] for b in batches),
                         stats["model_stats"][0]["inference_count"])
        self.assertGreater(max(int(b["batch_size"]) for b in batches), 40)  # one request has at most 40 candidates

    def test_bad_requests_fail_alone_and_deadlines_give_504(self):
        import random
        rng = random.Random(9)
        good = [random_din_request(rng, 5, 6) for _ in range(8)]
        bad = random_din_request(rng, 5, 6)
        bad["inputs"][3]["data"][2] = 10**9  # an item id far out of its table
        results = {}

        def send(key, req):
            results[key] = self.server.json("POST", "/v2/models/din_batched/infer", req)

        threads = [threading.Thread(target=send, args=(k, r)) for k, r in enumerate(good)]
        threads.append(threading.Thread(target=send, args=("bad", bad)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results["bad"][0], 400)
        self.assertIn("out of range", results["bad"][1]["error"])
        for k, req in enumerate(good):
            self.assertEqual(results[k][0], 200, results[k][1])
            want = self.server.json("POST", "/v2/models/din/infer", req)[1]
            for a, b in zip(results[k][1]["outputs"][0]["data"], want["outputs"][0]["data"]):
                self.assertAlmostEqual(a, b, delta=1e-6)
        # A timeout bounds the time queued: a request that finds the model idle runs at once, so
        # the late one is sent while other threads keep the model busy, until one had to queue.
        late = dict(good[0], parameters={"timeout": 1})
        busy = threading.Event()

        def keep_busy():
            while not busy.is_set():
                self.assertEqual(self.server.json("POST", "/v2/models/din_batched/infer", good[1])[0], 200)

        workers = [threading.Thread(target=keep_busy) for _ in range(4)]
        for t in workers:
            t.start()
        try:
            answers = [self.server.json("POST", "/v2/models/din_batched/infer", late) for _ in range(200)]
            while not any(status == 504 for status, _ in answers) and len(answers) < 2000:
                answers.append(self.server.json("POST", "/v2/models/din_batched/infer", late))
        finally:
            busy.set()
            for t in workers:
                t.join()
        for status, body in answers:
            # 503 only as the overload refusal a loaded machine may give (a request that waited past
            # --http-max-queue-ms for a worker: CI's 2 cores running tests side by side saw 25 ms).
            self.assertIn(status, (200, 503, 504), body)
            if status == 503:
                self.assertIn("overloaded", body["error"])
            if status == 504:
                self.assertIn("deadline", body["error"])
        self.assertTrue(any(status == 504 for status, _ in answers), "no late request ever queued")
        status, body = self.server.json("POST", "/v2/models/din_batched/infer", dict(good[0], parameters={"timeout": -5}))
        self.assertEqual(status, 400, body)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
