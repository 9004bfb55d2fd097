"""Serving over HTTP: inference in JSON and the binary extension, metadata, the repository calls,
metrics and errors, and a server's life: polling, explicit loads, swaps, reloads and SIGTERM.

  /usr/bin/python3 tests/server_http_test.py RANKD_BINARY SOURCE_DIR
"""
import copy
import http.client
import json
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import unittest

from serving_harness import Server, flatten, lines, rel_error, enable_batching, ZOO


class ServingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        for name in ["din", "dlrm_dcnv2", "mmoe"]:
            shutil.copytree(os.path.join(ZOO, name), os.path.join(cls.repo, name))
        cls.server = Server(cls.repo)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def assert_alive(self):
        self.assertEqual(self.server.request("GET", "/v2/health/live")[0], 200)

    def test_health_and_metadata(self):
        s = self.server
        self.assertEqual(s.request("GET", "/v2/health/ready")[0], 200)
        status, meta = s.json("GET", "/v2")
        self.assertEqual(status, 200)
        self.assertIn("binary_tensor_data", meta["extensions"])
        status, meta = s.json("GET", "/v2/models/din")
        self.assertEqual(status, 200)
        self.assertEqual(meta["versions"], ["1"])
        self.assertEqual([i["name"] for i in meta["inputs"]], ["profile", "seq_items", "seq_cats", "item", "cat", "context"])
        self.assertEqual(meta["inputs"][0]["shape"], [-1, 8])
        self.assertEqual(meta["inputs"][1]["parameters"], {"ragged": True, "max_length": 20, "scope": "user",
                                                           "lengths_input": "seq_items.lengths"})
        self.assertEqual(meta["outputs"], [{"name": "score", "datatype": "FP32", "shape": [-1, 1]}])  # the graph's dims
        self.assertEqual(s.request("GET", "/v2/models/din/ready")[0], 200)
        self.assertEqual(s.request("GET", "/v2/models/din/versions/1/ready")[0], 200)
        self.assertEqual(s.request("GET", "/v2/models/din/versions/9/ready")[0], 404)
        self.assertEqual(s.request("GET", "/v2/models/nope")[0], 404)
        status, index = s.json("POST", "/v2/repository/index")
        self.assertEqual(sorted(e["name"] for e in index), ["din", "dlrm_dcnv2", "mmoe"])
        self.assertTrue(all(e["state"] == "READY" for e in index))

    def test_model_configuration_in_tritons_schema(self):
        s = self.server
        status, meta = s.json("GET", "/v2")
        self.assertIn("model_configuration", meta["extensions"])
        for path in ["/v2/models/din/config", "/v2/models/din/versions/1/config"]:
            status, config = s.json("GET", path)
            self.assertEqual(status, 200, path)
            self.assertEqual(config["name"], "din")
            self.assertEqual(config["backend"], "rankd")
            self.assertGreater(config["max_batch_size"], 0)
            inputs = {i["name"]: i for i in config["input"]}
            self.assertEqual(list(inputs), ["profile", "seq_items", "seq_cats", "item", "cat", "context"])
            self.assertEqual(inputs["profile"]["data_type"], "TYPE_INT64")
            self.assertEqual(inputs["profile"]["dims"], [8])  # numbers, not protobuf's strings
            self.assertEqual(inputs["seq_items"]["dims"], [-1])
            self.assertTrue(inputs["seq_items"]["allow_ragged_batch"])
            self.assertFalse(inputs["profile"]["allow_ragged_batch"])  # defaults are written out, as Triton does
            self.assertEqual(config["parameters"]["input.seq_items.max_length"], {"string_value": "20"})
            self.assertEqual(config["parameters"]["input.profile.scope"], {"string_value": "user"})
            self.assertEqual(config["output"][0]["data_type"], "TYPE_FP32")
            self.assertEqual(config["version_policy"], {"latest": {"num_versions": 1}})
            self.assertEqual(config["instance_group"][0]["kind"], "KIND_CPU")
            # din's config has no batching section: it batches by default, with no queue delay.
            self.assertEqual(config["dynamic_batching"]["max_queue_delay_microseconds"], 0)
        self.assertEqual(s.request("GET", "/v2/models/nope/config")[0], 404)
        self.assertEqual(s.request("GET", "/v2/models/din/versions/9/config")[0], 404)

    def test_infer_json_matches_pytorch(self):
        for name in ["din", "dlrm_dcnv2", "mmoe"]:
            for req, want in zip(lines(name, "requests"), lines(name, "expected")):
                status, got = self.server.json("POST", f"/v2/models/{name}/infer", req)
                self.assertEqual(status, 200, got)
                self.assertEqual(got["id"], req["id"])
                for o, w in zip(got["outputs"], want["outputs"]):
                    self.assertEqual(o["name"], w["name"])
                    self.assertEqual(o["shape"], w["shape"])
                    self.assertLessEqual(rel_error(o["data"], w["data"]), 1e-5)

    def test_statistics_in_tritons_schema(self):
        s = self.server
        self.assertIn("statistics", s.json("GET", "/v2")[1]["extensions"])

        def stats():
            status, body = s.json("GET", "/v2/models/mmoe/stats")
            self.assertEqual(status, 200, body)
            self.assertEqual(len(body["model_stats"]), 1)
            return body["model_stats"][0]

        before = stats()
        self.assertEqual((before["name"], before["version"]), ("mmoe", "1"))
        requests = lines("mmoe", "requests")[:3]
        rows = 0
        for req in requests:
            self.assertEqual(s.json("POST", "/v2/models/mmoe/infer", req)[0], 200)
            rows += req["inputs"][0]["shape"][0]
        self.assertEqual(s.request("POST", "/v2/models/mmoe/infer", b"{not json")[0], 400)
        after = stats()
        got, was = after["inference_stats"], before["inference_stats"]
        self.assertEqual(got["success"]["count"] - was["success"]["count"], len(requests))
        self.assertEqual(got["fail"]["count"] - was["fail"]["count"], 1)
        self.assertEqual(after["inference_count"] - before["inference_count"], rows)
        self.assertEqual(after["execution_count"] - before["execution_count"], len(requests))
        for phase in ["success", "queue", "compute_input", "compute_infer", "compute_output"]:
            self.assertEqual(got[phase]["count"] - was[phase]["count"], len(requests), phase)
        self.assertGreater(got["success"]["ns"], was["success"]["ns"])
        self.assertGreater(got["compute_infer"]["ns"], was["compute_infer"]["ns"])
        self.assertGreaterEqual(got["success"]["ns"] - was["success"]["ns"],
                                got["compute_infer"]["ns"] - was["compute_infer"]["ns"])
        self.assertGreater(after["last_inference"], 1.7e12)  # milliseconds since the epoch
        # Executions by batch size (rows): each request ran alone here.
        def by_size(stats):
            return {int(b["batch_size"]): b for b in stats["batch_stats"]}
        grown = {}
        for req in requests:
            grown[req["inputs"][0]["shape"][0]] = grown.get(req["inputs"][0]["shape"][0], 0) + 1
        old, new = by_size(before), by_size(after)
        self.assertEqual(sorted(int(b["batch_size"]) for b in after["batch_stats"]),
                         [int(b["batch_size"]) for b in after["batch_stats"]])
        for size, n in grown.items():
            for phase in ["compute_input", "compute_infer", "compute_output"]:
                was_count = old[size][phase]["count"] if size in old else 0
                self.assertEqual(new[size][phase]["count"] - was_count, n, (size, phase))
        self.assertEqual(sum(b["compute_infer"]["count"] for b in after["batch_stats"]), after["execution_count"])
        status, everything = s.json("GET", "/v2/models/stats")
        self.assertEqual(status, 200)
        self.assertEqual(sorted(m["name"] for m in everything["model_stats"]), ["din", "dlrm_dcnv2", "mmoe"])
        self.assertEqual(s.json("GET", "/v2/models/mmoe/versions/1/stats")[0], 200)
        self.assertEqual(s.request("GET", "/v2/models/mmoe/versions/7/stats")[0], 404)
        self.assertEqual(s.request("GET", "/v2/models/nope/stats")[0], 404)

    def test_compressed_bodies_as_tritons_clients_send_them(self):
        import gzip
        import zlib
        req, want = lines("dlrm_dcnv2", "requests")[0], lines("dlrm_dcnv2", "expected")[0]
        raw = json.dumps(req).encode()
        for encoding, pack, unpack in [("gzip", gzip.compress, gzip.decompress),
                                       ("deflate", zlib.compress, zlib.decompress)]:
            status, body, headers = self.server.request(
                "POST", "/v2/models/dlrm_dcnv2/infer", pack(raw),
                {"Content-Encoding": encoding, "Accept-Encoding": encoding})
            self.assertEqual(status, 200, body[:200])
            self.assertEqual(headers.get("Content-Encoding"), encoding)
            got = json.loads(unpack(body))
            self.assertLessEqual(rel_error(got["outputs"][0]["data"], want["outputs"][0]["data"]), 1e-5)
        # A compressed body answered plainly when the client does not ask for compression.
        status, body, headers = self.server.request("POST", "/v2/models/dlrm_dcnv2/infer", gzip.compress(raw),
                                                    {"Content-Encoding": "gzip"})
        self.assertEqual(status, 200)
        self.assertNotIn("Content-Encoding", headers)
        self.assertEqual(json.loads(body)["id"], req["id"])
        for bad, encoding in [(gzip.compress(raw)[:-20], "gzip"), (b"plain text", "gzip"), (raw, "br"),
                              (gzip.compress(raw), "deflate")]:
            status, body, _ = self.server.request("POST", "/v2/models/dlrm_dcnv2/infer", bad,
                                                  {"Content-Encoding": encoding})
            self.assertEqual(status, 415 if encoding == "br" else 400, (encoding, body))
            self.assertIn("br" if encoding == "br" else "error", json.loads(body)["error"] if encoding == "br" else json.loads(body))
        self.assert_alive()

    def test_keep_alive_connection_serves_many_requests(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=10)
        body = json.dumps(lines("mmoe", "requests")[0])
        for _ in range(20):
            conn.request("POST", "/v2/models/mmoe/infer", body=body)
            r = conn.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
        conn.close()

    def test_binary_tensor_extension(self):
        req = lines("mmoe", "requests")[3]
        want = lines("mmoe", "expected")[3]
        inputs, blobs = [], b""
        for i in req["inputs"]:
            fmt = "<%d%s" % (len(i["data"]), "f" if i["datatype"] == "FP32" else "q")
            blob = struct.pack(fmt, *i["data"])
            inputs.append({"name": i["name"], "datatype": i["datatype"], "shape": i["shape"],
                           "parameters": {"binary_data_size": len(blob)}})
            blobs += blob
        header = json.dumps({"inputs": inputs, "outputs": [{"name": "ctr", "parameters": {"binary_data": True}},
                                                           {"name": "cvr"}]}).encode()
        status, body, headers = self.server.request("POST", "/v2/models/mmoe/infer", header + blobs,
                                                    {"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(status, 200, body)
        n = int(headers["Inference-Header-Content-Length"])
        meta = json.loads(body[:n])
        ctr_meta, cvr_meta = meta["outputs"]
        size = ctr_meta["parameters"]["binary_data_size"]
        ctr = struct.unpack("<%df" % (size // 4), body[n:n + size])
        self.assertLessEqual(rel_error(ctr, want["outputs"][0]["data"]), 1e-5)
        self.assertLessEqual(rel_error(cvr_meta["data"], want["outputs"][1]["data"]), 1e-5)
        # binary_data_size that disagrees with the shape
        inputs[0]["parameters"]["binary_data_size"] = 3
        header = json.dumps({"inputs": inputs}).encode()
        status, body, _ = self.server.request("POST", "/v2/models/mmoe/infer", header + blobs,
                                              {"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(status, 400)
        self.assertIn("the request holds 3 bytes", json.loads(body)["error"])

    def test_ids_past_int32_are_out_of_range_not_wrapped(self):
        # an executor may narrow mmoe's ids to 32 bits; 2**32 + 1 must not become id 1.
        req = copy.deepcopy(lines("mmoe", "requests")[0])
        sparse = next(i for i in req["inputs"] if i["name"] == "sparse")
        status, _ = self.server.json("POST", "/v2/models/mmoe/infer", req)
        self.assertEqual(status, 200)
        for bad in (2**32 + 1, -(2**32) + 1, 2**62):
            flat = sparse["data"]
            while isinstance(flat[0], list):
                flat = flat[0]
            flat[0] = bad
            status, got = self.server.json("POST", "/v2/models/mmoe/infer", req)
            self.assertEqual(status, 400, (bad, got))
            self.assertIn("out of range", got["error"])
        # the same through the binary extension
        blobs, inputs = b"", []
        for i in req["inputs"]:
            flat = flatten(i["data"])
            blob = struct.pack("<%d%s" % (len(flat), "f" if i["datatype"] == "FP32" else "q"), *flat)
            inputs.append({"name": i["name"], "datatype": i["datatype"], "shape": i["shape"],
                           "parameters": {"binary_data_size": len(blob)}})
            blobs += blob
        header = json.dumps({"inputs": inputs}).encode()
        status, body, _ = self.server.request("POST", "/v2/models/mmoe/infer", header + blobs,
                                              {"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(status, 400, body)
        self.assertIn("out of range", json.loads(body)["error"])

    def test_malformed_requests_get_4xx_and_server_keeps_serving(self):
        good = lines("din", "requests")[0]

        def variant(**change):
            r = json.loads(json.dumps(good))
            for k, v in change.items():
                idx, field = k.split("__")
                r["inputs"][int(idx[1:])][field] = v
            return json.dumps(r)

        cases = [
            ("truncated JSON", '{"inputs": [{"name": "profile"', 400, "not valid JSON"),
            ("deeply nested", '{"inputs":[{"name":"profile","datatype":"INT64","shape":[1,8],"data":' + "[" * 50000 + "]" * 50000 + "}]}", 400, ""),
            # An object in data is read through and skipped: unbounded, 400 KB of brackets there (or
            # 10 MB, read by the streaming reader past 8 MB) ran the worker's stack out and the server died.
            ("deeply nested in an object", '{"inputs":[{"name":"profile","datatype":"INT64","shape":[1,8],"data":{"a":' + "[" * 200000 + "]" * 200000 + "}}]}", 400, "nests too deeply"),
            ("deeply nested past 8 MB", '{"inputs":[{"name":"profile","datatype":"INT64","shape":[1,8],"data":[{"a":' + "[" * (5 << 20) + "]" * (5 << 20) + "}]}]}", 400, "nests too deeply"),
            ("empty body", "", 400, "empty"),
            ("not an object", "[]", 400, "JSON object"),
            ("wrong dtype", variant(i0__datatype="FP32"), 400, "must be INT64"),
            ("shape/data mismatch", variant(i0__shape=[1, 9]), 400, "needs 72 bytes (9 values)"),
            ("huge shape", variant(i0__shape=[1000000, 1000000, 1000]), 400, "too large"),
            ("negative shape", variant(i0__shape=[-3, 8]), 400, "non-negative"),
            ("id out of range", variant(i3__data=[10**9]), 400, "out of range"),
            ("unknown input", variant(i0__name="profilez"), 400, "unknown input"),
            ("NaN literal", '{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[NaN]}]}', 400, "not valid JSON"),
        ]
        for label, body, code, fragment in cases:
            status, data, _ = self.server.request("POST", "/v2/models/din/infer", body)
            self.assertEqual(status, code, f"{label}: {data[:200]}")
            self.assertIn(fragment, json.loads(data)["error"], label)
            self.assert_alive()
        status, data, _ = self.server.request("POST", "/v2/models/nope/infer", json.dumps(good))
        self.assertEqual(status, 404)
        self.assertIn("unknown model", json.loads(data)["error"])
        # A body over the limit is refused from its Content-Length, before it is read.
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10) as sock:
            sock.sendall(b"POST /v2/models/din/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (65 << 20) + b"x" * 1000)
            reply = sock.recv(4096).decode()
        self.assertTrue(reply.startswith("HTTP/1.1 413"), reply)
        self.assert_alive()
        status, _, _ = self.server.request("GET", "/v3/whatever")
        self.assertEqual(status, 404)
        # load/unload are refused in mode none
        status, data, _ = self.server.request("POST", "/v2/repository/models/din/unload")
        self.assertEqual(status, 503)
        # the good request still scores
        status, _ = self.server.json("POST", "/v2/models/din/infer", good)
        self.assertEqual(status, 200)

    def test_metrics(self):
        body = lines("mmoe", "requests")[4]  # 8 rows
        for _ in range(3):
            self.assertEqual(self.server.json("POST", "/v2/models/mmoe/infer", body)[0], 200)
        self.server.request("POST", "/v2/models/mmoe/infer", "{")
        status, text, _ = self.server.request("GET", "/metrics", port=self.server.metrics_port)
        self.assertEqual(status, 200)
        metrics = {}
        for line in text.decode().splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                metrics[key] = float(value)
        label = '{model="mmoe",version="1"}'
        self.assertGreaterEqual(metrics["nv_inference_request_success" + label], 3)
        self.assertGreaterEqual(metrics["nv_inference_request_failure" + label], 1)
        self.assertGreaterEqual(metrics["nv_inference_count" + label], 24)
        self.assertGreater(metrics["nv_inference_compute_infer_duration_us" + label], 0)
        self.assertIn('nv_inference_request_summary_us{model="mmoe",version="1",quantile="0.99"}', metrics)
        self.assertIn("rankd_inflight_requests", metrics)
        # W1's 26 tables of 1,000 x 8 FP32, all on the device (no budget): per loaded version.
        self.assertEqual(metrics['rankd_table_bytes{model="dlrm_dcnv2",version="1",tier="gpu"}'], 26 * 1000 * 8 * 4)
        self.assertEqual(metrics['rankd_table_bytes{model="dlrm_dcnv2",version="1",tier="host"}'], 0)
        self.assertEqual(metrics['rankd_table_bytes{model="dlrm_dcnv2",version="1",tier="cache"}'], 0)


class LifecycleTest(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "mmoe"), os.path.join(self.repo, "mmoe"))
        shutil.copytree(os.path.join(ZOO, "din"), os.path.join(self.repo, "din"))

    def tearDown(self):
        shutil.rmtree(self.repo)

    def test_load_with_a_config_override(self):
        s = Server(self.repo, "--model-control-mode", "explicit", "--load-model", "din")
        try:
            status, config = s.json("GET", "/v2/models/din/config")
            self.assertEqual(config["dynamic_batching"]["max_queue_delay_microseconds"], 0)
            config["max_batch_size"] = 4
            config["dynamic_batching"] = {"max_queue_delay_microseconds": 300}
            override = {"parameters": {"config": json.dumps(config)}}  # tritonclient's load_model(config=...)
            self.assertEqual(s.json("POST", "/v2/repository/models/din/load", override)[0], 200)
            status, now = s.json("GET", "/v2/models/din/config")
            self.assertEqual(now["max_batch_size"], 4)
            self.assertEqual(now["dynamic_batching"]["max_queue_delay_microseconds"], 300)
            req = lines("din", "requests")[0]
            self.assertEqual(s.json("POST", "/v2/models/din/infer", req)[0], 200)
            # Invalid overrides fail the call and change nothing.
            for bad in [{"parameters": {"config": "{not json"}},
                        {"parameters": {"config": json.dumps({"max_batch_size": 8, "no_such_field": 1})}},
                        {"parameters": {"config": json.dumps({"name": "other", "max_batch_size": 8})}},
                        {"parameters": {"config": 7}}, "[]"]:
                status, body, _ = s.request("POST", "/v2/repository/models/din/load",
                                            bad if isinstance(bad, str) else json.dumps(bad))
                self.assertEqual(status, 400, (bad, body))
            status, body, _ = s.request("POST", "/v2/repository/models/din/load",
                                        json.dumps({"parameters": {"file:1/model.onnx": "AAAA"}}))
            self.assertEqual(status, 400, body)  # model files sent with the call: not supported, said so
            self.assertIn("file:1/model.onnx", json.loads(body)["error"])
            self.assertEqual(s.json("GET", "/v2/models/din/config")[1]["max_batch_size"], 4)
            # A load without an override goes back to the file's config.
            self.assertEqual(s.request("POST", "/v2/repository/models/din/load")[0], 200)
            self.assertEqual(s.json("GET", "/v2/models/din/config")[1]["dynamic_batching"]["max_queue_delay_microseconds"], 0)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_explicit_load_unload(self):
        s = Server(self.repo, "--model-control-mode", "explicit", "--load-model", "mmoe")
        try:
            self.assertEqual(s.request("GET", "/v2/models/mmoe/ready")[0], 200)
            self.assertEqual(s.request("GET", "/v2/models/din/ready")[0], 503)
            self.assertEqual(s.request("POST", "/v2/repository/models/din/load")[0], 200)
            status, _ = s.json("POST", "/v2/models/din/infer", lines("din", "requests")[0])
            self.assertEqual(status, 200)
            self.assertEqual(s.request("POST", "/v2/repository/models/din/unload")[0], 200)
            self.assertEqual(s.request("GET", "/v2/models/din/ready")[0], 503)
            status, data, _ = s.request("POST", "/v2/repository/models/nosuch/load")
            self.assertEqual(status, 404)
            # A broken new version fails to load and the serving one stays.
            os.makedirs(os.path.join(self.repo, "mmoe", "2"))
            with open(os.path.join(self.repo, "mmoe", "2", "model.onnx"), "wb") as f:
                f.write(b"garbage")
            status, data, _ = s.request("POST", "/v2/repository/models/mmoe/load")
            self.assertEqual(status, 400)
            self.assertIn("protobuf", json.loads(data)["error"])
            status, got = s.json("POST", "/v2/models/mmoe/infer", lines("mmoe", "requests")[0])
            self.assertEqual((status, got["model_version"]), (200, "1"))
        finally:
            self.assertEqual(s.stop(), 0)

    def test_reload_under_load_loses_nothing(self):
        self.reload_under_load()

    def test_reload_of_a_batched_model_under_load_loses_nothing(self):
        enable_batching(os.path.join(self.repo, "mmoe"))
        self.reload_under_load()

    def reload_under_load(self):
        s = Server(self.repo, "--model-control-mode", "poll", "--repository-poll-secs", "1")
        body = json.dumps(lines("mmoe", "requests")[2])
        failures, versions, stop = [], set(), threading.Event()

        def client():
            conn = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=30)
            while not stop.is_set():
                conn.request("POST", "/v2/models/mmoe/infer", body=body)
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    failures.append((r.status, data))
                else:
                    versions.add(json.loads(data)["model_version"])
            conn.close()

        threads = [threading.Thread(target=client) for _ in range(4)]
        try:
            for t in threads:
                t.start()
            time.sleep(0.5)
            shutil.copytree(os.path.join(self.repo, "mmoe", "1"), os.path.join(self.repo, "mmoe", "tmp"))
            os.rename(os.path.join(self.repo, "mmoe", "tmp"), os.path.join(self.repo, "mmoe", "2"))
            deadline = time.time() + 20
            while "2" not in versions and time.time() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(failures, [])
        self.assertEqual(versions, {"1", "2"})
        self.assertEqual(s.json("GET", "/v2/models/mmoe")[1]["versions"], ["2"])
        self.assertEqual(s.stop(), 0)

    def test_sigterm_finishes_inflight_and_exits_zero(self):
        # Eight requests at once are not overload here: the queue bounds are lifted, so that on a busy
        # 2-core machine under sanitizers none is refused for its wait (OverloadTest checks the bounds).
        enable_batching(os.path.join(self.repo, "din"), "max_queue_wait_microseconds: 0")
        s = Server(self.repo)
        body = json.dumps(lines("din", "requests")[4])
        results, refusals = [], []

        def client():
            try:
                status, answer, _ = s.request("POST", "/v2/models/din/infer", body)
                results.append(status)
                if status != 200:
                    refusals.append(answer)
            except OSError as e:  # refused after the listener closed: fine, never a half answer
                results.append(str(e))

        threads = [threading.Thread(target=client) for _ in range(8)]
        for t in threads:
            t.start()
        start = time.time()
        code = s.stop(signal.SIGTERM)
        for t in threads:
            t.join()
        self.assertEqual(code, 0, s.output())
        self.assertLess(time.time() - start, 30)
        self.assertTrue(all(r == 200 or isinstance(r, str) for r in results), (results, refusals))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
