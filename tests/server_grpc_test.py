"""KServe v2 over gRPC with stubs generated from rankd's .proto: inference typed and raw, metadata,
the repository, statistics and health, and large requests.

  /usr/bin/python3 tests/server_grpc_test.py RANKD_BINARY SOURCE_DIR
"""
import json
import os
import struct
import subprocess
import sys
import unittest

from serving_harness import flatten, lines, rel_error, scrape, GrpcServerCase, RANKD


class GrpcTest(GrpcServerCase):
    MODELS = ["din", "mmoe"]
    SERVER_ARGS = ("--model-control-mode", "explicit", "--load-model", "mmoe", "--load-model", "din")

    def to_proto(self, body, raw):
        pb = self.pb
        req = pb.ModelInferRequest(model_name="", id=body.get("id", ""))
        for i in body["inputs"]:
            t = req.inputs.add(name=i["name"], datatype=i["datatype"])
            data = i["data"]
            if i["shape"][-1] == -1:  # nested ragged rows -> flat values + lengths
                t.parameters["lengths"].string_param = ",".join(str(len(row)) for row in data)
                data = [x for row in data for x in row]
                t.shape.extend([len(data)])
            else:
                t.shape.extend(i["shape"])
                if "parameters" in i:
                    t.parameters["lengths"].string_param = ",".join(map(str, i["parameters"]["lengths"]))
            flat = flatten(data)
            if raw:
                req.raw_input_contents.append(struct.pack("<%d%s" % (len(flat), "f" if i["datatype"] == "FP32" else "q"), *flat))
            elif i["datatype"] == "FP32":
                t.contents.fp32_contents.extend(flat)
            else:
                t.contents.int64_contents.extend(flat)
        return req

    def test_shared_memory(self):
        """Triton's system shared memory over gRPC: the first input read from a registered region (no
        raw_input_contents entry for it), the first output written into another, as plain raw contents
        answer; register, status and unregister; a region's mistakes answered."""
        from multiprocessing import shared_memory
        pb, grpc = self.pb, self.grpc
        body = lines("din", "requests")[0]
        plain = self.to_proto(body, raw=True)
        plain.model_name = "din"
        copied = 'rankd_host_input_copy_bytes_total{stage="request"}'
        before = scrape(self.server)[copied]
        want = self.stub.ModelInfer(plain, timeout=30)
        # Raw contents are copied once into request tensors, and counted so.
        self.assertEqual(scrape(self.server)[copied] - before, sum(len(c) for c in plain.raw_input_contents))
        region_in = shared_memory.SharedMemory(create=True, size=len(plain.raw_input_contents[0]) + 32)
        region_out = shared_memory.SharedMemory(create=True, size=64)
        for r in (region_in, region_out):
            self.addCleanup(r.unlink)
            self.addCleanup(r.close)
        region_in.buf[32:32 + len(plain.raw_input_contents[0])] = plain.raw_input_contents[0]
        self.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
            name="in", key="/" + region_in.name, offset=0, byte_size=region_in.size))
        self.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
            name="out", key="/" + region_out.name, offset=0, byte_size=64))
        status = self.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest())
        self.assertEqual(sorted(status.regions), ["in", "out"])
        self.assertEqual(status.regions["out"].byte_size, 64)
        self.assertIn("system_shared_memory", self.stub.ServerMetadata(pb.ServerMetadataRequest()).extensions)

        req = self.to_proto(body, raw=True)
        req.model_name = "din"
        first = req.inputs[0]
        first.parameters["shared_memory_region"].string_param = "in"
        first.parameters["shared_memory_offset"].int64_param = 32
        first.parameters["shared_memory_byte_size"].int64_param = len(plain.raw_input_contents[0])
        del req.raw_input_contents[0]
        out = req.outputs.add(name=want.outputs[0].name)
        out.parameters["shared_memory_region"].string_param = "out"
        out.parameters["shared_memory_byte_size"].int64_param = 64
        got = self.stub.ModelInfer(req, timeout=30)
        size = len(want.raw_output_contents[0])
        self.assertEqual(got.outputs[0].parameters["shared_memory_byte_size"].int64_param, size)
        self.assertEqual(got.outputs[0].parameters["shared_memory_region"].string_param, "out")
        self.assertEqual(len(got.raw_output_contents), 0)
        self.assertEqual(bytes(region_out.buf[:size]), want.raw_output_contents[0])

        def code_of(call, *args):
            try:
                call(*args, timeout=30)
                return "OK"
            except grpc.RpcError as e:
                return e.code().name

        bad = pb.ModelInferRequest()
        bad.CopyFrom(req)
        bad.inputs[0].parameters["shared_memory_byte_size"].int64_param += 4
        self.assertEqual(code_of(self.stub.ModelInfer, bad), "INVALID_ARGUMENT")
        bad.CopyFrom(req)
        bad.outputs[0].parameters["shared_memory_byte_size"].int64_param = 1
        self.assertEqual(code_of(self.stub.ModelInfer, bad), "INVALID_ARGUMENT")
        self.assertEqual(code_of(self.stub.SystemSharedMemoryRegister, pb.SystemSharedMemoryRegisterRequest(
            name="in", key="/" + region_in.name, byte_size=8)), "INVALID_ARGUMENT")
        self.assertEqual(code_of(self.stub.SystemSharedMemoryRegister, pb.SystemSharedMemoryRegisterRequest(
            name="x", key="/rankd-no-such-object", byte_size=8)), "NOT_FOUND")
        # 64-byte aligned with room after it: read in place, then found truncated after the run.
        n = len(plain.raw_input_contents[0])
        region_aligned = shared_memory.SharedMemory(create=True, size=n + 8192)
        self.addCleanup(region_aligned.unlink)
        self.addCleanup(region_aligned.close)
        region_aligned.buf[64:64 + n] = plain.raw_input_contents[0]
        self.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
            name="aligned", key="/" + region_aligned.name, offset=0, byte_size=region_aligned.size))
        in_place = pb.ModelInferRequest()
        in_place.CopyFrom(req)
        in_place.inputs[0].parameters["shared_memory_region"].string_param = "aligned"
        in_place.inputs[0].parameters["shared_memory_offset"].int64_param = 64
        del in_place.outputs[:]
        got = self.stub.ModelInfer(in_place, timeout=30)
        self.assertEqual(got.raw_output_contents[0], want.raw_output_contents[0])
        os.ftruncate(region_aligned._fd, 0)
        with self.assertRaises(grpc.RpcError) as failed:
            self.stub.ModelInfer(in_place, timeout=30)
        self.assertEqual(failed.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("was truncated after it was registered", failed.exception.details())
        self.assertEqual(self.stub.ModelInfer(plain, timeout=30).raw_output_contents[0], want.raw_output_contents[0])
        self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name="aligned"))

        self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name="in"))
        self.assertEqual(code_of(self.stub.ModelInfer, req), "NOT_FOUND")
        self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())
        self.assertEqual(len(self.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest()).regions), 0)

    def test_health_metadata_index(self):
        pb = self.pb
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest()).live)
        self.assertTrue(self.stub.ServerReady(pb.ServerReadyRequest()).ready)
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="din")).ready)
        meta = self.stub.ModelMetadata(pb.ModelMetadataRequest(name="din", version="1"))
        self.assertEqual(meta.versions, ["1"])
        self.assertEqual(list(meta.inputs[0].shape), [-1, 8])
        self.assertEqual(self.stub.ServerMetadata(pb.ServerMetadataRequest()).name, "rankd")
        index = self.stub.RepositoryIndex(pb.RepositoryIndexRequest())
        self.assertEqual(sorted(m.name for m in index.models), ["din", "mmoe"])
        self.assertIn("model_configuration", self.stub.ServerMetadata(pb.ServerMetadataRequest()).extensions)

    def test_model_config(self):
        pb, grpc = self.pb, self.grpc
        config = self.stub.ModelConfig(pb.ModelConfigRequest(name="din")).config
        self.assertEqual(config.name, "din")
        self.assertEqual([i.name for i in config.input], ["profile", "seq_items", "seq_cats", "item", "cat", "context"])
        self.assertEqual(list(config.input[0].dims), [8])
        import model_config_pb2  # generated beside grpc_service_pb2
        self.assertEqual(config.input[0].data_type, model_config_pb2.TYPE_INT64)
        self.assertTrue(config.input[1].allow_ragged_batch)
        self.assertEqual(config.parameters["input.seq_items.max_length"].string_value, "20")
        self.assertEqual(config.version_policy.latest.num_versions, 1)
        self.assertGreater(config.max_batch_size, 0)
        with self.assertRaises(grpc.RpcError) as e:
            self.stub.ModelConfig(pb.ModelConfigRequest(name="nope"))
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_unimplemented_methods_are_named(self):
        grpc = self.grpc
        for method in ["/inference.GRPCInferenceService/ModelStreamInfer", "/no.such.Service/Call"]:
            call = self.channel.unary_unary(method)
            with self.assertRaises(grpc.RpcError) as e:
                call(b"", timeout=10)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
            self.assertIn(method, e.exception.details())
        self.assertTrue(self.stub.ServerLive(self.pb.ServerLiveRequest()).live)  # and the server serves on

    def test_model_statistics(self):
        pb, grpc = self.pb, self.grpc
        before = self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="mmoe")).model_stats[0]
        body = lines("mmoe", "requests")[0]
        req = self.to_proto(body, raw=True)
        req.model_name = "mmoe"
        self.stub.ModelInfer(req)
        after = self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="mmoe", version="1")).model_stats[0]
        self.assertEqual(after.inference_stats.success.count - before.inference_stats.success.count, 1)
        self.assertEqual(after.inference_count - before.inference_count, body["inputs"][0]["shape"][0])
        self.assertGreater(after.inference_stats.compute_infer.ns, before.inference_stats.compute_infer.ns)
        rows = body["inputs"][0]["shape"][0]
        count = {b.batch_size: b.compute_infer.count for b in after.batch_stats}
        was = {b.batch_size: b.compute_infer.count for b in before.batch_stats}
        self.assertEqual(count[rows] - was.get(rows, 0), 1)
        everything = self.stub.ModelStatistics(pb.ModelStatisticsRequest())
        self.assertEqual(sorted(m.name for m in everything.model_stats), ["din", "mmoe"])
        with self.assertRaises(grpc.RpcError) as e:
            self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="nope"))
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_priority_and_timeout_as_tritons_clients_send_them(self):
        grpc = self.grpc
        body, want = lines("mmoe", "requests")[0], lines("mmoe", "expected")[0]
        req = self.to_proto(body, raw=True)
        req.model_name = "mmoe"
        req.parameters["priority"].uint64_param = 1  # tritonclient's form
        req.parameters["timeout"].uint64_param = 10_000_000
        req.parameters["custom"].double_param = 0.5  # a parameter rankd does not read: ignored
        resp = self.stub.ModelInfer(req)
        got = struct.unpack("<%df" % (len(resp.raw_output_contents[0]) // 4), resp.raw_output_contents[0])
        self.assertLessEqual(rel_error(got, want["outputs"][0]["data"]), 1e-5)
        req.parameters["priority"].double_param = 1.0  # not an integer
        with self.assertRaises(grpc.RpcError) as e:
            self.stub.ModelInfer(req)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("priority", e.exception.details())

    def test_infer_typed_and_raw_match_pytorch(self):
        for name in ["din", "mmoe"]:
            for k, (body, want) in enumerate(zip(lines(name, "requests"), lines(name, "expected"))):
                req = self.to_proto(body, raw=k % 2 == 1)
                req.model_name = name
                resp = self.stub.ModelInfer(req)
                self.assertEqual(resp.id, body["id"])
                self.assertEqual(len(resp.raw_output_contents), len(want["outputs"]))
                for out, raw, w in zip(resp.outputs, resp.raw_output_contents, want["outputs"]):
                    self.assertEqual(out.name, w["name"])
                    self.assertEqual(list(out.shape), w["shape"])
                    got = struct.unpack("<%df" % (len(raw) // 4), raw)
                    self.assertLessEqual(rel_error(got, w["data"]), 1e-5)

    def test_errors(self):
        pb, grpc = self.pb, self.grpc
        body = lines("mmoe", "requests")[0]

        def code_of(req):
            with self.assertRaises(grpc.RpcError) as e:
                self.stub.ModelInfer(req)
            return e.exception.code(), e.exception.details()

        req = self.to_proto(body, raw=False)
        req.model_name = "nope"
        self.assertEqual(code_of(req)[0], grpc.StatusCode.NOT_FOUND)
        req.model_name = "mmoe"
        req.inputs[0].datatype = "FP32"
        code, details = code_of(req)
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("the request holds 0 bytes", details)
        req = self.to_proto(body, raw=True)
        req.model_name = "mmoe"
        req.raw_input_contents[0] = b"123"
        self.assertEqual(code_of(req)[0], grpc.StatusCode.INVALID_ARGUMENT)
        req = self.to_proto(body, raw=False)
        req.model_name = "mmoe"
        for bad in (10**6, 2**32 + 1, -(2**40)):  # ids narrowed to 32 bits stay out of range, never wrapped
            req.inputs[0].contents.int64_contents[0] = bad
            code, details = code_of(req)
            self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, bad)
            self.assertIn("out of range", details)
        raw = self.to_proto(body, raw=True)
        raw.model_name = "mmoe"
        raw.raw_input_contents[0] = struct.pack("<q", 2**32 + 1) + raw.raw_input_contents[0][8:]
        code, details = code_of(raw)
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("out of range", details)
        req.inputs[0].contents.int64_contents[0] = 10**6
        req.inputs[0].shape[0] = 10**9
        self.assertIn(code_of(req)[0], (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED))
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest()).live)

    def test_load_unload(self):
        pb, grpc = self.pb, self.grpc
        self.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="din"))
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="din")).ready)
        self.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="din"))
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="din")).ready)
        with self.assertRaises(grpc.RpcError) as e:
            self.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="nosuch"))
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        # A config override (tritonclient sends it as string_param "config").
        req = pb.RepositoryModelLoadRequest(model_name="din")
        req.parameters["config"].string_param = json.dumps({"max_batch_size": 16})
        self.stub.RepositoryModelLoad(req)
        self.assertEqual(self.stub.ModelConfig(pb.ModelConfigRequest(name="din")).config.max_batch_size, 16)
        req.parameters["config"].string_param = "{broken"
        with self.assertRaises(grpc.RpcError) as e:
            self.stub.RepositoryModelLoad(req)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="din"))
        self.assertGreater(self.stub.ModelConfig(pb.ModelConfigRequest(name="din")).config.max_batch_size, 16)


class GrpcLargeRequestTest(GrpcServerCase):
    """A request of megabytes in raw contents arrives in many gRPC slices and is read from them in place
    (frontend/infer_request_wire.h): its scores equal the same rows' over HTTP. --grpc-channel-arg sets
    a gRPC core argument; a malformed one stops the start."""
    MODELS = ["dlrm_dcnv2"]
    SERVER_ARGS = ("--grpc-channel-arg", "grpc.http2.max_frame_size=1048576")
    to_proto = GrpcTest.to_proto

    def test_a_request_in_many_slices_scores_as_over_http(self):
        def ragged_rows(tensor):  # nested rows, or flat values with their lengths
            if tensor["shape"][-1] == -1:
                return tensor["data"]
            it = iter(tensor["data"])
            return [[next(it) for _ in range(n)] for n in tensor["parameters"]["lengths"]]

        requests = lines("dlrm_dcnv2", "requests")
        body = {"id": "large", "inputs": []}
        for k, first in enumerate(requests[0]["inputs"]):
            picks = [requests[r % len(requests)]["inputs"][k] for r in range(800)]
            if first["datatype"] == "FP32":
                data = [x for p in picks for x in p["data"]]
                body["inputs"].append({"name": first["name"], "datatype": "FP32", "shape": [len(data) // 13, 13],
                                       "data": data})
            else:
                data = [row for p in picks for row in ragged_rows(p)]
                body["inputs"].append({"name": first["name"], "datatype": "INT64", "shape": [len(data), -1],
                                       "data": data})
        req = self.to_proto(body, raw=True)
        req.model_name = "dlrm_dcnv2"
        self.assertGreater(req.ByteSize(), 1 << 20)
        got = self.stub.ModelInfer(req, timeout=60)
        status, answer = self.server.json("POST", "/v2/models/dlrm_dcnv2/infer", body)
        self.assertEqual(status, 200, answer)
        want = answer["outputs"][0]["data"]
        scores = struct.unpack("<%df" % len(want), got.raw_output_contents[0])
        for a, b in zip(scores, want):
            self.assertAlmostEqual(a, b, places=5)
        # Cut short: refused as malformed, and the server serves on.
        stub = self.channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        with self.assertRaises(self.grpc.RpcError) as e:
            stub(req.SerializeToString()[:-100], timeout=30)
        self.assertEqual(e.exception.code(), self.grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("not a ModelInferRequest", e.exception.details())
        self.assertEqual(len(self.stub.ModelInfer(req, timeout=60).raw_output_contents[0]), 4 * len(want))

    def test_a_malformed_channel_arg_stops_the_start(self):
        for bad in ("grpc.http2.max_frame_size", "=5", "grpc.http2.max_frame_size=big", "x=99999999999"):
            proc = subprocess.run([RANKD, "serve", "--model-repository", self.repo, "--http-port", "0",
                                   "--grpc-port", "0", "--metrics-port", "0", "--grpc-channel-arg", bad],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 2, bad)
            self.assertIn("--grpc-channel-arg", proc.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
