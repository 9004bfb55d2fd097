"""Triton's edges: a repository of config.pbtxt files, restricted APIs, logging settings, and the same
mistake answered alike over JSON, the binary extension and gRPC.

  /usr/bin/python3 tests/server_triton_test.py RANKD_BINARY SOURCE_DIR
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

from serving_harness import Server, lines, rel_error, GrpcServerCase, RANKD, ZOO


class TritonRepositoryTest(unittest.TestCase):
    """A model whose config is Triton's config.pbtxt: it loads, scores, and its unused fields are named."""

    def test_config_pbtxt_serves(self):
        repo = tempfile.mkdtemp()
        try:
            os.makedirs(os.path.join(repo, "din", "1"))
            shutil.copy(os.path.join(ZOO, "din", "1", "model.onnx"), os.path.join(repo, "din", "1", "model.onnx"))
            with open(os.path.join(repo, "din", "config.pbtxt"), "w") as f:
                f.write("""
name: "din"
platform: "onnxruntime_onnx"
max_batch_size: 256
input [
  { name: "profile" data_type: TYPE_INT64 dims: [ 8 ] },
  { name: "seq_items" data_type: TYPE_INT64 dims: [ -1 ] allow_ragged_batch: true },
  { name: "seq_cats" data_type: TYPE_INT64 dims: [ -1 ] allow_ragged_batch: true },
  { name: "item" data_type: TYPE_INT64 dims: [ ] },
  { name: "cat" data_type: TYPE_INT64 dims: [ ] },
  { name: "context" data_type: TYPE_INT64 dims: [ 6 ] }
]
output [ { name: "score" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100 }
instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0 ] } ]
parameters { key: "input.profile.scope" value: { string_value: "user" } }
parameters { key: "input.seq_items.scope" value: { string_value: "user" } }
parameters { key: "input.seq_items.max_length" value: { string_value: "20" } }
parameters { key: "input.seq_cats.scope" value: { string_value: "user" } }
parameters { key: "input.seq_cats.max_length" value: { string_value: "20" } }
""")
            s = Server(repo)
            try:
                self.assertEqual(s.request("GET", "/v2/models/din/ready")[0], 200)
                for req, want in zip(lines("din", "requests"), lines("din", "expected")):
                    status, got = s.json("POST", "/v2/models/din/infer", req)
                    self.assertEqual(status, 200, got)
                    self.assertLessEqual(rel_error(got["outputs"][0]["data"], want["outputs"][0]["data"]), 1e-5)
                status, config = s.json("GET", "/v2/models/din/config")
                self.assertEqual(config["max_batch_size"], 256)
                self.assertEqual(config["dynamic_batching"]["max_queue_delay_microseconds"], 100)
                # The replica's GPU is named in a load-time warning: this server runs models on the CPU.
                self.assertIn("gpus: 0 is not used: it runs on the cpu backend", s.output())
                self.assertEqual(config["instance_group"][0]["count"], 2)
            finally:
                s.stop()
        finally:
            shutil.rmtree(repo)


class RestrictedApiTest(GrpcServerCase):
    """Triton's restricted APIs: the repository calls and statistics need an admin key on HTTP, the
    repository calls on gRPC; inference and health stay open; a bad restriction stops the start."""
    MODELS = ["mmoe"]
    SERVER_ARGS = ("--http-restricted-api", "model-repository,statistics:admin-key=s3cret",
                   "--grpc-restricted-protocol", "model-repository:admin-key=s3cret")

    def test_restricted_calls_need_the_header(self):
        s = self.server
        status, body, _ = s.request("POST", "/v2/repository/index")
        self.assertEqual(status, 403)
        self.assertIn("This API is restricted, expecting header 'admin-key'", json.loads(body)["error"])
        self.assertEqual(s.request("POST", "/v2/repository/index", headers={"admin-key": "wrong"})[0], 403)
        self.assertEqual(s.request("POST", "/v2/repository/index", headers={"Admin-Key": "s3cret"})[0], 200)
        self.assertEqual(s.request("GET", "/v2/models/mmoe/stats")[0], 403)
        self.assertEqual(s.request("GET", "/v2/models/mmoe/stats", headers={"admin-key": "s3cret"})[0], 200)
        self.assertEqual(s.json("POST", "/v2/models/mmoe/infer", lines("mmoe", "requests")[0])[0], 200)
        self.assertEqual(s.request("GET", "/v2/health/ready")[0], 200)
        pb, grpc = self.pb, self.grpc
        with self.assertRaises(grpc.RpcError) as e:
            self.stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=10)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertIn("expecting header 'admin-key'", e.exception.details())
        index = self.stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=10, metadata=(("admin-key", "s3cret"),))
        self.assertEqual([m.name for m in index.models], ["mmoe"])
        self.assertEqual(len(self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="mmoe")).model_stats), 1)

    def test_a_bad_restriction_stops_the_start(self):
        proc = subprocess.run([RANKD, "serve", "--model-repository", self.repo, "--http-port", "0", "--grpc-port", "0",
                               "--metrics-port", "0", "--http-restricted-api", "models:k=v"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("unknown API category 'models'", proc.stderr)


class LoggingTest(GrpcServerCase):
    """Triton's logging extension: the settings read and changed over HTTP and gRPC; verbose messages
    (a failed request is one, at level 1) go to the file asked for, in the format asked for, and stop
    when the level drops; bad settings are refused and change nothing."""
    MODELS = ["mmoe"]

    def test_log_settings_over_http_and_grpc(self):
        s = self.server
        self.assertIn("logging", s.json("GET", "/v2")[1]["extensions"])
        self.assertEqual(s.json("GET", "/v2/logging"),
                         (200, {"log_file": "", "log_info": True, "log_warning": True, "log_error": True,
                                "log_verbose_level": 0, "log_format": "default", "log_access": False}))
        path = os.path.join(self.repo, "rankd.log")
        status, settings = s.json("POST", "/v2/logging",
                                  {"log_file": path, "log_verbose_level": 1, "log_format": "ISO8601"})
        self.assertEqual(status, 200, settings)
        self.assertEqual((settings["log_file"], settings["log_verbose_level"], settings["log_format"]),
                         (path, 1, "ISO8601"))
        bad_request = {"inputs": [{"name": "dense", "datatype": "FP32", "shape": [1, 3], "data": [1, 2]}]}
        self.assertEqual(s.json("POST", "/v2/models/mmoe/infer", bad_request)[0], 400)
        with open(path) as f:
            logged = f.read().splitlines()
        self.assertEqual(len(logged), 1, logged)
        self.assertRegex(logged[0], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ D .*model 'mmoe' version 1: a request failed")
        self.assertEqual(s.json("POST", "/v2/logging", {"log_verbose_level": 0})[0], 200)
        self.assertEqual(s.json("POST", "/v2/models/mmoe/infer", bad_request)[0], 400)
        with open(path) as f:
            self.assertEqual(len(f.read().splitlines()), 1)  # level 0: not written
        for body in [{"log_info": "yes"}, {"nope": 1}, {"log_format": "xml"}, {"log_verbose_level": -1},
                     {"log_file": os.path.join(self.repo, "mmoe", "1", "model.onnx", "x.log")}, [1]]:  # under a file
            self.assertEqual(s.json("POST", "/v2/logging", body)[0], 400, body)
        self.assertEqual(s.json("GET", "/v2/logging")[1]["log_file"], path)  # unchanged by the refusals

        pb = self.pb
        req = pb.LogSettingsRequest()
        req.settings["log_verbose_level"].uint32_param = 2
        req.settings["log_file"].string_param = ""
        req.settings["log_format"].string_param = "default"
        r = self.stub.LogSettings(req, timeout=10)
        self.assertEqual(r.settings["log_verbose_level"].uint32_param, 2)
        self.assertEqual(r.settings["log_file"].string_param, "")
        self.assertTrue(r.settings["log_info"].bool_param)
        bad = pb.LogSettingsRequest()
        bad.settings["log_info"].string_param = "on"
        with self.assertRaises(self.grpc.RpcError) as e:
            self.stub.LogSettings(bad, timeout=10)
        self.assertEqual(e.exception.code(), self.grpc.StatusCode.INVALID_ARGUMENT)
        self.stub.LogSettings(pb.LogSettingsRequest(settings={"log_verbose_level": pb.LogSettingsRequest.SettingValue(
            uint32_param=0)}), timeout=10)

    def test_access_log(self):
        """log_access: a line per HTTP request (peer, request line, status, bytes in and out, time) and
        per gRPC call (peer, method, code, time), whatever the other kinds' settings; none when off."""
        s = self.server
        path = os.path.join(self.repo, "access.log")
        self.assertEqual(s.json("POST", "/v2/logging", {"log_file": path, "log_access": True, "log_info": False})[0], 200)
        body = json.dumps(lines("mmoe", "requests")[0])
        self.assertEqual(s.request("POST", "/v2/models/mmoe/infer", body)[0], 200)
        self.assertEqual(s.request("GET", "/v2/models/nope")[0], 404)
        self.assertTrue(self.stub.ServerLive(self.pb.ServerLiveRequest()).live)
        with self.assertRaises(self.grpc.RpcError):
            self.stub.ModelMetadata(self.pb.ModelMetadataRequest(name="nope"))
        with open(path) as f:
            logged = f.read().splitlines()
        self.assertTrue(all(re.match(r"^I\d{4} [\d:.]+ \d+\] A ", line) for line in logged), logged)
        self.assertTrue(any(re.search(r'A http 127\.0\.0\.1:\d+ "POST /v2/models/mmoe/infer" 200 %d \d+ \d+us$'
                                      % len(body), line) for line in logged), logged)
        self.assertTrue(any(re.search(r'"GET /v2/models/nope" 404 0 \d+ \d+us$', line) for line in logged), logged)
        self.assertTrue(any(re.search(r"A grpc \S+ ServerLive 0 \d+us$", line) for line in logged), logged)
        self.assertTrue(any(re.search(r"A grpc \S+ ModelMetadata 5 \d+us$", line) for line in logged), logged)
        self.assertEqual(s.json("POST", "/v2/logging", {"log_access": False})[0], 200)
        count = len(logged)
        self.assertEqual(s.request("GET", "/v2/models/mmoe")[0], 200)
        with open(path) as f:
            self.assertEqual(len(f.read().splitlines()), count)  # turned off while the POST ran: none since
        self.assertEqual(s.json("POST", "/v2/logging", {"log_file": "", "log_info": True})[0], 200)


class SameMistakeSameAnswer(GrpcServerCase):
    """Each malformed DIN request sent as JSON, as the binary extension and over gRPC (raw
    contents, what a stock KServe client sends) gets the same status and the same message."""

    PACK = {"INT64": "q", "INT32": "i", "FP32": "f", "FP16": "e"}
    HTTP_FOR = {"INVALID_ARGUMENT": 400, "RESOURCE_EXHAUSTED": 400, "NOT_FOUND": 404, "UNAVAILABLE": 503}

    @staticmethod
    def good():
        return [
            {"name": "profile", "datatype": "INT64", "shape": [1, 8], "data": list(range(8))},
            {"name": "seq_items", "datatype": "INT64", "shape": [3], "data": [1, 2, 3], "parameters": {"lengths": [3]}},
            {"name": "seq_cats", "datatype": "INT64", "shape": [3], "data": [1, 2, 3], "parameters": {"lengths": [3]}},
            {"name": "item", "datatype": "INT64", "shape": [2], "data": [1, 2]},
            {"name": "cat", "datatype": "INT64", "shape": [2], "data": [1, 2]},
            {"name": "context", "datatype": "INT64", "shape": [2, 6], "data": list(range(12))}]

    @staticmethod
    def lengths_tensor(lengths, datatype="INT32"):
        return {"name": "seq_items.lengths", "datatype": datatype, "shape": [len(lengths)], "data": lengths}

    def pack(self, i):
        return struct.pack("<%d%s" % (len(i["data"]), self.PACK.get(i["datatype"], "q")), *i["data"])

    def as_json(self, inputs, outputs):
        body = {"inputs": inputs, "outputs": [{"name": o} for o in outputs]}
        status, data, _ = self.server.request("POST", "/v2/models/din/infer", json.dumps(body))
        return status, json.loads(data).get("error", "")

    def post_binary(self, inputs, outputs=()):
        header, blobs = [], b""
        for i in inputs:
            blob = self.pack(i)
            meta = {k: v for k, v in i.items() if k != "data"}
            meta["parameters"] = dict(i.get("parameters", {}), binary_data_size=len(blob))
            header.append(meta)
            blobs += blob
        head = json.dumps({"inputs": header, "outputs": [{"name": o} for o in outputs]}).encode()
        status, data, _ = self.server.request("POST", "/v2/models/din/infer", head + blobs,
                                              {"Inference-Header-Content-Length": str(len(head))})
        return status, data

    def as_binary(self, inputs, outputs):
        status, data = self.post_binary(inputs, outputs)
        return status, json.loads(data).get("error", "") if status != 200 else ""

    def grpc_request(self, inputs, outputs=()):
        req = self.pb.ModelInferRequest(model_name="din")
        for i in inputs:
            t = req.inputs.add(name=i["name"], datatype=i["datatype"])
            t.shape.extend(i["shape"])
            if "parameters" in i:
                t.parameters["lengths"].string_param = ",".join(map(str, i["parameters"]["lengths"]))
            req.raw_input_contents.append(self.pack(i))
        for o in outputs:
            req.outputs.add(name=o)
        return req

    def as_grpc(self, inputs, outputs):
        try:
            self.stub.ModelInfer(self.grpc_request(inputs, outputs), timeout=30)
            return 200, ""
        except self.grpc.RpcError as e:
            return self.HTTP_FOR.get(e.code().name, e.code().name), e.details()

    def test_each_mistake_gets_one_answer_on_every_protocol(self):
        def input_named(name):
            return lambda ins: next(i for i in ins if i["name"] == name)

        item, seq = input_named("item"), input_named("seq_items")
        cases = {
            "unknown input": (lambda ins: ins.append({"name": "bogus", "datatype": "INT64", "shape": [1], "data": [1]}),
                              "unknown input 'bogus'"),
            "missing input": (lambda ins: ins.remove(item(ins)), "input 'item' is missing"),
            "FP32 for INT64": (lambda ins: item(ins).update(datatype="FP32", data=[1.0, 2.0]), "must be INT64, got FP32"),
            "INT32 for INT64": (lambda ins: item(ins).update(datatype="INT32"), "must be INT64, got INT32"),
            "unsupported datatype": (lambda ins: item(ins).update(datatype="FP16", data=[1.0, 2.0]),
                                     "datatype 'FP16' is not supported"),
            "values short of the shape": (lambda ins: item(ins).update(shape=[3]),
                                          "shape [3] of INT64 needs 24 bytes (3 values), the request holds 16 bytes (2 values)"),
            "negative shape entry": (lambda ins: item(ins).update(shape=[-2]), "shape entries must be non-negative"),
            "no batch dimension": (lambda ins: item(ins).update(shape=[], data=[]), "must have a batch dimension"),
            "lengths past the values": (lambda ins: seq(ins)["parameters"].update(lengths=[2]),
                                        "lengths add up to 2 but 3 values were sent"),
            "lengths with a 2-d shape": (lambda ins: seq(ins).update(shape=[3, 1]), "with lengths, shape must be"),
            "a row past max_length": (lambda ins: seq(ins).update(shape=[25], data=list(range(25)),
                                                                  parameters={"lengths": [25]}),
                                      "has a row of length 25"),
            "wrong row width": (lambda ins: input_named("context")(ins).update(shape=[2, 5], data=list(range(10))),
                                "must have shape [rows, 6], got [2, 5]"),
            "rows that disagree": (lambda ins: input_named("cat")(ins).update(shape=[3], data=[1, 2, 3]),
                                   "has 3 rows; other inputs have 2"),
            "an id past its table": (lambda ins: item(ins).update(data=[10 ** 9, 2]), "out of range"),
            "an input twice": (lambda ins: ins.append(dict(item(ins))), "input 'item' is given twice"),
            "lengths twice": (lambda ins: ins.append(self.lengths_tensor([3])),
                              "ragged input 'seq_items' already has lengths"),
            "FP32 lengths tensor": (lambda ins: (seq(ins).pop("parameters"), ins.append(
                self.lengths_tensor([3.0], "FP32"))), "input 'seq_items.lengths' must be INT32 or INT64, got FP32"),
            "lengths tensor past the values": (lambda ins: (seq(ins).pop("parameters"), ins.append(
                self.lengths_tensor([2]))), "lengths add up to 2 but 3 values were sent"),
        }
        for name, (spoil, fragment) in cases.items():
            outputs = []
            inputs = self.good()
            spoil(inputs)
            answers = [self.as_json(inputs, outputs), self.as_binary(inputs, outputs), self.as_grpc(inputs, outputs)]
            with self.subTest(mistake=name):
                self.assertEqual(answers[0][0], 400, answers)
                self.assertIn(fragment, answers[0][1])
                self.assertEqual(answers[1], answers[0])
                self.assertEqual(answers[2], answers[0])
        answers = [f(self.good(), ["nope"]) for f in (self.as_json, self.as_binary, self.as_grpc)]
        self.assertEqual(answers, [(400, "unknown output 'nope' for model 'din'")] * 3)

    def test_lengths_as_a_tensor_score_as_the_lengths_parameter(self):
        """A ragged input's lengths sent as an INT32 tensor NAME.lengths (what tritonclient can send)
        score as with the lengths parameter, over JSON, the binary extension and gRPC raw contents."""
        good = self.good()
        for i in good:
            if i["name"] in ("seq_items", "seq_cats"):
                i.update(shape=[4], data=[4, 2, 9, 7] if i["name"] == "seq_items" else [1, 3, 3, 2])
                i["parameters"]["lengths"] = [4]
        status, data, _ = self.server.request("POST", "/v2/models/din/infer", json.dumps({"inputs": good}))
        self.assertEqual(status, 200, data)
        want = json.loads(data)["outputs"][0]["data"]
        tensors = []
        for i in good:
            lengths = i.pop("parameters", {}).get("lengths")
            tensors.append(i)
            if lengths:
                tensors.append(dict(self.lengths_tensor(lengths), name=i["name"] + ".lengths"))
        status, data, _ = self.server.request("POST", "/v2/models/din/infer", json.dumps({"inputs": tensors}))
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data)["outputs"][0]["data"], want)
        status, data = self.post_binary(tensors)
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data)["outputs"][0]["data"], want)
        reply = self.stub.ModelInfer(self.grpc_request(tensors), timeout=30)
        got = struct.unpack("<%df" % len(want), reply.raw_output_contents[0])
        self.assertEqual(list(got), [struct.unpack("<f", struct.pack("<f", x))[0] for x in want])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
