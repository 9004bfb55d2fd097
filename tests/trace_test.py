"""Triton's trace extension over real sockets: settings read and changed over HTTP and gRPC, globally
and per model; sampled requests' timestamps and tensors written as Triton's JSON trace files.

  /usr/bin/python3 tests/trace_test.py RANKD_BINARY SOURCE_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from serving_harness import RANKD, ZOO, Server, flatten, grpc_stubs, lines

STAMPS = ["REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START",
          "COMPUTE_END", "REQUEST_END"]


class TraceTest(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp()
        for name in ["mmoe", "din"]:
            shutil.copytree(os.path.join(ZOO, name), os.path.join(self.repo, name))
        self.out = tempfile.mkdtemp()
        self.server = Server(self.repo)

    def tearDown(self):
        self.server.stop()
        shutil.rmtree(self.repo)
        shutil.rmtree(self.out)

    def post(self, path, body):
        return self.server.json("POST", path, body)

    def infer(self, model, n):
        body = lines(model, "requests")[0]
        for i in range(n):
            status, got = self.post("/v2/models/%s/infer" % model, dict(body, id="%s-%d" % (model, i)))
            self.assertEqual(status, 200, got)

    def traces(self, path, model, count):
        """The traces in `path`: Triton's pairs of objects, checked; their request ids."""
        with open(path) as f:
            objects = json.load(f)
        self.assertEqual(len(objects), 2 * count, objects)
        ids = []
        for head, times in zip(objects[::2], objects[1::2]):
            self.assertEqual(head["id"], times["id"])
            self.assertEqual((head["model_name"], head["model_version"]), (model, 1))
            ids.append(head["request_id"])
            self.assertEqual([t["name"] for t in times["timestamps"]], STAMPS)
            ns = [t["ns"] for t in times["timestamps"]]
            self.assertEqual(ns, sorted(ns))
            self.assertGreater(ns[-1], ns[0])
        return ids

    def test_settings_sampling_and_files(self):
        s = self.server
        self.assertIn("trace", s.json("GET", "/v2")[1]["extensions"])
        self.assertEqual(s.json("GET", "/v2/trace/setting"),
                         (200, {"trace_level": ["OFF"], "trace_rate": "1000", "trace_count": "-1",
                                "log_frequency": "0", "trace_file": ""}))
        for body, message in [({"trace_level": ["TIMESTAMPS"]}, "needs a trace_file"),
                              ({"trace_level": ["TENSORS"]}, "needs a trace_file"),
                              ({"trace_level": ["ALL"], "trace_file": "x"}, "OFF, TIMESTAMPS or TENSORS"),
                              ({"trace_rate": "0"}, "trace_rate"), ({"trace_rate": 5}, "trace_rate"),
                              ({"trace_count": "-2"}, "trace_count"), ({"nope": "1"}, "unknown trace setting 'nope'"),
                              ({"trace_rate": None}, "cannot be cleared"), ([1], "JSON object")]:
            status, answer = self.post("/v2/trace/setting", body)
            self.assertEqual(status, 400, body)
            self.assertIn(message, answer["error"])
        self.assertEqual(s.json("GET", "/v2/trace/setting")[1]["trace_level"], ["OFF"])  # nothing changed
        self.assertEqual(s.json("GET", "/v2/models/nope/trace/setting")[0], 404)

        # Every second request, two traces a file.
        prefix = os.path.join(self.out, "all.json")
        status, answer = self.post("/v2/trace/setting", {"trace_file": prefix, "trace_level": ["TIMESTAMPS"],
                                                         "trace_rate": "2", "log_frequency": "2"})
        self.assertEqual(status, 200, answer)
        self.assertEqual((answer["trace_rate"], answer["log_frequency"]), ("2", "2"))
        self.infer("mmoe", 8)
        self.assertEqual(self.traces(prefix + ".0", "mmoe", 2), ["mmoe-0", "mmoe-2"])
        self.assertEqual(self.traces(prefix + ".1", "mmoe", 2), ["mmoe-4", "mmoe-6"])
        self.assertFalse(os.path.exists(prefix + ".2"))

        # DIN's own settings over gRPC: every request, one trace in all, into its own file.
        din_file = os.path.join(self.out, "din.json")
        stubs = grpc_stubs()
        if stubs is not None:
            import grpc
            pb, pb_grpc = stubs
            with grpc.insecure_channel("127.0.0.1:%d" % s.grpc_port) as channel:
                stub = pb_grpc.GRPCInferenceServiceStub(channel)
                req = pb.TraceSettingRequest(model_name="din")
                for name, value in [("trace_rate", "1"), ("trace_count", "1"), ("trace_file", din_file)]:
                    req.settings[name].value.append(value)
                answer = stub.TraceSetting(req, timeout=10)
                self.assertEqual(list(answer.settings["trace_count"].value), ["1"])
                self.assertEqual(list(answer.settings["log_frequency"].value), ["2"])  # the global one
                with self.assertRaises(grpc.RpcError) as e:
                    stub.TraceSetting(pb.TraceSettingRequest(model_name="nope"), timeout=10)
                self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        else:
            self.assertEqual(self.post("/v2/models/din/trace/setting",
                                       {"trace_rate": "1", "trace_count": "1", "trace_file": din_file})[0], 200)
        self.infer("din", 3)
        self.assertEqual(self.traces(din_file + ".0", "din", 1), ["din-0"])  # the count ran out: written
        status, answer = self.post("/v2/models/din/trace/setting", {"trace_count": None})
        self.assertEqual((status, answer["trace_count"], answer["trace_file"]), (200, "-1", din_file))
        self.assertEqual(s.json("GET", "/v2/trace/setting")[1]["trace_file"], prefix)  # global unchanged

        # log_frequency 0: written when the server stops.
        final = os.path.join(self.out, "final.json")
        self.assertEqual(self.post("/v2/trace/setting", {"trace_file": final, "log_frequency": "0",
                                                         "trace_rate": "1"})[0], 200)
        self.infer("mmoe", 2)
        self.assertFalse(os.path.exists(final))
        self.assertEqual(s.stop(), 0)
        self.assertEqual(self.traces(final, "mmoe", 2), ["mmoe-0", "mmoe-1"])

    def test_tensors(self):
        """TENSORS: every input as the request sent it (ragged ones with their lengths) and every
        output as answered; with TIMESTAMPS too, both; alone, no timestamps."""
        path = os.path.join(self.out, "tensors.json")
        status, answer = self.post("/v2/trace/setting", {"trace_file": path, "trace_level": ["TENSORS", "TIMESTAMPS"],
                                                         "trace_rate": "1", "log_frequency": "1"})
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["trace_level"], ["TENSORS", "TIMESTAMPS"])
        body = lines("din", "requests")[0]
        status, got = self.post("/v2/models/din/infer", dict(body, id="din-t"))
        self.assertEqual(status, 200, got)
        with open(path + ".0") as f:
            objects = json.load(f)
        head, times = objects[0], objects[1]
        self.assertEqual((head["model_name"], head["request_id"]), ("din", "din-t"))
        self.assertEqual([t["name"] for t in times["timestamps"]], STAMPS)
        inputs = [o for o in objects if o.get("activity") == "TENSOR_QUEUE_INPUT"]
        outputs = [o for o in objects if o.get("activity") == "TENSOR_BACKEND_OUTPUT"]
        self.assertEqual(len(objects), 2 + len(inputs) + len(outputs))
        self.assertTrue(all(o["id"] == head["id"] for o in objects))
        self.assertEqual([o["tensor"]["name"] for o in inputs], [i["name"] for i in body["inputs"]])
        for traced, sent in zip(inputs, body["inputs"]):
            t = traced["tensor"]
            self.assertEqual(t["dtype"], sent["datatype"])
            flat = flatten(sent["data"])
            self.assertEqual([float(v) for v in t["data"].split(",")], [float(v) for v in flat], t["name"])
            if sent["shape"][-1] == -1:  # nested rows: flat values with their lengths
                self.assertEqual(t["lengths"], ",".join(str(len(r)) for r in sent["data"]))
                self.assertEqual(t["shape"], str(len(flat)))
            else:
                self.assertNotIn("lengths", t)
                self.assertEqual(t["shape"], ",".join(map(str, sent["shape"])))
        self.assertEqual([o["tensor"]["name"] for o in outputs], [o["name"] for o in got["outputs"]])
        for traced, answered in zip(outputs, got["outputs"]):
            t = traced["tensor"]
            self.assertEqual((t["dtype"], t["shape"]), (answered["datatype"], ",".join(map(str, answered["shape"]))))
            for a, b in zip(t["data"].split(","), answered["data"]):
                self.assertAlmostEqual(float(a), b, places=5)

        # TENSORS alone: no timestamps.
        self.assertEqual(self.post("/v2/trace/setting", {"trace_level": ["TENSORS"]})[0], 200)
        self.infer("mmoe", 1)
        with open(path + ".1") as f:
            objects = json.load(f)
        self.assertEqual(objects[0]["model_name"], "mmoe")
        self.assertFalse(any("timestamps" in o for o in objects))
        self.assertEqual([o["activity"] for o in objects[1:]],
                         ["TENSOR_QUEUE_INPUT"] * len(lines("mmoe", "requests")[0]["inputs"]) + ["TENSOR_BACKEND_OUTPUT"] * 2)


class TraceFlagsTest(unittest.TestCase):
    """Triton's --trace-config flags set the global settings at start; a bad one stops the start."""

    def test_flags(self):
        repo, out = tempfile.mkdtemp(), tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, repo)
        self.addCleanup(shutil.rmtree, out)
        shutil.copytree(os.path.join(ZOO, "mmoe"), os.path.join(repo, "mmoe"))
        path = os.path.join(out, "t.json")
        server = Server(repo, "--trace-config", "triton,file=" + path, "--trace-config", "level=TIMESTAMPS",
                        "--trace-config", "rate=1", "--trace-config", "triton,log-frequency=1")
        try:
            self.assertEqual(server.json("GET", "/v2/trace/setting"),
                             (200, {"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "trace_count": "-1",
                                    "log_frequency": "1", "trace_file": path}))
            status, got = server.json("POST", "/v2/models/mmoe/infer", lines("mmoe", "requests")[0])
            self.assertEqual(status, 200, got)
            with open(path + ".0") as f:
                self.assertEqual(len(json.load(f)), 2)
        finally:
            server.stop()
        for flags, message in [(["level=TIMESTAMPS"], "needs a trace_file"), (["opentelemetry,url=x"], "Triton's"),
                               (["speed=3"], "SETTING=VALUE"), (["rate=0"], "trace_rate")]:
            args = [RANKD, "serve", "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
                    "--metrics-port", "0"]
            for flag in flags:
                args += ["--trace-config", flag]
            proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn("--trace-config", proc.stderr)
            self.assertIn(message, proc.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
