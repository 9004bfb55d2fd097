"""Triton's perf_analyzer against rankd: its start-up calls replayed as it makes them, over real sockets.

  /usr/bin/python3 tests/perf_analyzer_test.py RANKD_BINARY SOURCE_DIR

perf_analyzer (github.com/triton-inference-server/perf_analyzer) starts by asking for the model's
metadata and config and parsing them (src/model_parser.cc, ModelParser::InitTriton), asks the
server's extensions whether it keeps statistics (src/inference_profiler.cc), reads the model's
statistics before and after a measurement (src/client_backend/triton/triton_client_backend.cc,
ParseStatistics) and takes their difference (InferenceProfiler::SummarizeServerStatsHelper). Over
HTTP it reads the JSON as the server sends it, with RapidJSON's typed getters (GetUint64 fails on a
string); over gRPC it prints the protobuf answers as JSON (preserve_proto_field_names,
always_print_primitive_fields: 64-bit integers become strings) and reads that. Each check below is
one that program makes; a failed one is a message perf_analyzer would stop with.
"""
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest

from serving_harness import ZOO, Server, grpc_stubs

MODELS = ["mmoe", "dlrm_dcnv2", "din"]
BATCH = 4
PACK = {"INT64": "q", "INT32": "i", "FP32": "f", "FP16": "e", "BOOL": "?"}


def get_int(value):
    """ModelParser::GetInt: an integer, or a string holding one."""
    if isinstance(value, bool):
        raise AssertionError("failed to parse the integer value %r" % value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return int(value)  # std::stoll
    raise AssertionError("failed to parse the integer value %r" % value)


def get_uint64(value):
    """RapidJSON's GetUint64, which asserts on anything but a non-negative integer."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise AssertionError("GetUint64 on %r" % (value,))
    return value


def parse_model(metadata, config):
    """ModelParser::InitTriton and DetermineSchedulerType: the inputs perf_analyzer will send (name
    -> (datatype, shape without the batch dimension)), the outputs, max_batch_size, the scheduler."""
    assert isinstance(metadata["name"], str)
    max_batch_size = get_int(config["max_batch_size"]) if "max_batch_size" in config else 0
    if "model_transaction_policy" in config:
        assert isinstance(config["model_transaction_policy"]["decoupled"], bool)

    def tensors(entries):
        out = {}
        for t in entries:
            assert isinstance(t["name"], str) and isinstance(t["datatype"], str)
            dims = [get_int(d) for d in t["shape"]]
            out[t["name"]] = (t["datatype"], dims[1:] if max_batch_size > 0 else dims)
        return out

    inputs, outputs = tensors(metadata.get("inputs", [])), tensors(metadata.get("outputs", []))
    for kind, known in (("input", inputs), ("output", outputs)):
        for t in config.get(kind, []):
            if t["name"] not in known:
                raise AssertionError("no metadata found for %s tensor %s" % (kind, t["name"]))
            for flag in ("is_shape_tensor", "optional"):
                if flag in t:
                    assert isinstance(t[flag], bool), (flag, t)
    if "response_cache" in config:
        assert isinstance(config["response_cache"]["enable"], bool)
    scheduler = "SEQUENCE" if "sequence_batching" in config else "DYNAMIC" if "dynamic_batching" in config else "NONE"
    return inputs, outputs, max_batch_size, scheduler


def with_shapes(name, inputs, config):
    """The shapes perf_analyzer sends: a -1 needs --shape, which for a ragged input is
    NAME:max_length with the length its config gives (parameters "input.NAME.max_length"; the
    -1-padded form, docs/serving.md)."""
    params = config.get("parameters", {})
    out = {}
    for input_name, (datatype, dims) in inputs.items():
        key = "input.%s.max_length" % input_name
        if -1 in dims and key in params:
            dims = [get_int(params[key]["string_value"])]
        assert all(d >= 0 for d in dims), "%s needs --shape %s" % (name, input_name)
        out[input_name] = (datatype, dims)
    return out


PHASES = ["success", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss"]


def parse_statistics_json(body):
    """ParseStatistics over HTTP: (name, version) -> counters, each read with GetUint64."""
    out = {}
    for s in body["model_stats"]:
        assert isinstance(s["name"], str) and isinstance(s["version"], str)
        counts = {"inference_count": get_uint64(s["inference_count"]),
                  "execution_count": get_uint64(s["execution_count"])}
        for phase in PHASES:
            for field in ("count", "ns"):
                counts[phase + "." + field] = get_uint64(s["inference_stats"][phase][field])
        out[(s["name"], s["version"])] = counts
    return out


def parse_statistics_proto(response):
    out = {}
    for s in response.model_stats:
        counts = {"inference_count": s.inference_count, "execution_count": s.execution_count}
        for phase in PHASES:
            counts[phase + ".count"] = getattr(s.inference_stats, phase).count
            counts[phase + ".ns"] = getattr(s.inference_stats, phase).ns
        out[(s.name, s.version)] = counts
    return out


def stats_version(name, start, end):
    """DetermineStatsModelVersion with the version unspecified: the highest version whose queue
    count grew during the measurement."""
    grown = [int(v) for (n, v), c in end.items()
             if n == name and c["queue.count"] > start.get((n, v), {}).get("queue.count", 0)]
    if not grown:
        raise AssertionError("failed to find the requested model version")
    return str(max(grown))


def zeros(datatype, dims):
    """perf_analyzer's --input-data zero: every element zero (ids 0 are in every table)."""
    count = 1
    for d in dims:
        count *= d
    return struct.pack("<%d%s" % (count, PACK[datatype]), *([0] * count))


class PerfAnalyzerStartup(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        for name in MODELS:
            shutil.copytree(os.path.join(ZOO, name), os.path.join(cls.repo, name))
        cls.server = Server(cls.repo)
        stubs = grpc_stubs()
        cls.stub = None
        if stubs is not None:
            import grpc
            cls.grpc = grpc
            cls.pb, pb_grpc = stubs
            cls.channel = grpc.insecure_channel("127.0.0.1:%d" % cls.server.grpc_port)
            cls.stub = pb_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        if cls.stub is not None:
            cls.channel.close()
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def http_json(self, method, path, body=None):
        status, data = self.server.json(method, path, body)
        self.assertEqual(status, 200, (path, data))
        return data

    def http_infer(self, name, inputs, outputs):
        """perf_analyzer's HTTP request: every input as the binary extension, outputs asked for as binary."""
        header, blobs = [], b""
        for input_name, (datatype, dims) in inputs.items():
            blob = zeros(datatype, [BATCH] + dims)
            header.append({"name": input_name, "datatype": datatype, "shape": [BATCH] + dims,
                           "parameters": {"binary_data_size": len(blob)}})
            blobs += blob
        head = json.dumps({"inputs": header, "outputs": [{"name": o, "parameters": {"binary_data": True}}
                                                         for o in outputs]}).encode()
        status, data, headers = self.server.request("POST", "/v2/models/%s/infer" % name, head + blobs,
                                                    {"Inference-Header-Content-Length": str(len(head))})
        self.assertEqual(status, 200, data[:300])
        length = int(headers.get("Inference-Header-Content-Length", len(data)))
        answer = json.loads(data[:length])
        for o in answer["outputs"]:
            self.assertEqual(o["shape"][0], BATCH)
            self.assertIn("binary_data_size", o["parameters"])

    def grpc_infer(self, name, inputs, outputs):
        req = self.pb.ModelInferRequest(model_name=name)
        for input_name, (datatype, dims) in inputs.items():
            t = req.inputs.add(name=input_name, datatype=datatype)
            t.shape.extend([BATCH] + dims)
            req.raw_input_contents.append(zeros(datatype, [BATCH] + dims))
        for o in outputs:
            req.outputs.add(name=o)
        answer = self.stub.ModelInfer(req, timeout=30)
        for o in answer.outputs:
            self.assertEqual(o.shape[0], BATCH)

    def measure(self, name, start, end, infer, requests=3):
        before = start()
        for _ in range(requests):
            infer()
        after = end()
        version = stats_version(name, before, after)
        was, now = before.get((name, version)), after[(name, version)]
        self.assertIsNotNone(was, "the version's statistics were there before it served")
        self.assertEqual(now["success.count"] - was["success.count"], requests)
        self.assertEqual(now["inference_count"] - was["inference_count"], requests * BATCH)
        self.assertEqual(now["execution_count"] - was["execution_count"], requests)
        for phase in ["queue", "compute_input", "compute_infer", "compute_output"]:
            self.assertEqual(now[phase + ".count"] - was[phase + ".count"], requests, phase)
        self.assertGreater(now["compute_infer.ns"], was["compute_infer.ns"])

    def test_http(self):
        extensions = self.http_json("GET", "/v2")["extensions"]
        self.assertTrue(all(isinstance(e, str) for e in extensions))
        self.assertIn("statistics", extensions)
        for name in MODELS:
            with self.subTest(model=name):
                metadata = self.http_json("GET", "/v2/models/" + name)
                config = self.http_json("GET", "/v2/models/%s/config" % name)
                inputs, outputs, max_batch_size, _ = parse_model(metadata, config)
                self.assertGreaterEqual(max_batch_size, BATCH)  # perf_analyzer's -b needs batching
                inputs = with_shapes(name, inputs, config)

                def stats():
                    return parse_statistics_json(self.http_json("GET", "/v2/models/%s/stats" % name))

                self.measure(name, stats, stats, lambda: self.http_infer(name, inputs, outputs))

    def test_grpc(self):
        if self.stub is None:
            self.skipTest("python3-grpcio / python3-grpc-tools not installed")
        from google.protobuf import json_format
        pb = self.pb

        def as_json(message):  # TritonClientBackend: MessageToJsonString as perf_analyzer prints it
            return json.loads(json_format.MessageToJson(message, preserving_proto_field_name=True,
                                                        including_default_value_fields=True))

        self.assertIn("statistics", self.stub.ServerMetadata(pb.ServerMetadataRequest()).extensions)
        for name in MODELS:
            with self.subTest(model=name):
                metadata = as_json(self.stub.ModelMetadata(pb.ModelMetadataRequest(name=name, version="")))
                config = as_json(self.stub.ModelConfig(pb.ModelConfigRequest(name=name, version="")))["config"]
                inputs, outputs, max_batch_size, _ = parse_model(metadata, config)
                self.assertGreaterEqual(max_batch_size, BATCH)
                inputs = with_shapes(name, inputs, config)

                def stats():
                    return parse_statistics_proto(
                        self.stub.ModelStatistics(pb.ModelStatisticsRequest(name=name, version="")))

                self.measure(name, stats, stats, lambda: self.grpc_infer(name, inputs, outputs))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
