"""Triton's CUDA shared memory extension with a real handle: device memory this client allocates
(CuPy) and exports with cudaIpcGetMemHandle, registered over HTTP and gRPC, DLRM-DCNv2's dense input
read from it and its score written into it, then every input of a request, equal to the same
request sent in JSON. Needs a GPU and CuPy (the lent GPU machine has both; skipped elsewhere).

  /usr/bin/python3 tests/cuda_shared_memory_test.py RANKD_BINARY SOURCE_DIR
"""
import base64
import copy
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest

from serving_harness import ZOO, Server, grpc_stubs, lines

try:
    import cupy
    cupy.cuda.runtime.getDeviceCount()
except Exception:  # no CuPy or no GPU
    cupy = None


@unittest.skipIf(cupy is None, "needs CuPy and a GPU")
class CudaSharedMemoryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "dlrm_dcnv2"), os.path.join(cls.repo, "dlrm_dcnv2"))
        cls.server = Server(cls.repo, "--backend", "cuda")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def post(self, path, body):
        status, data, _ = self.server.request("POST", path, json.dumps(body))
        return status, json.loads(data) if data else None

    def test_inputs_and_outputs_in_device_memory(self):
        s = self.server
        request = copy.deepcopy(lines("dlrm_dcnv2", "requests")[0])
        status, want = s.json("POST", "/v2/models/dlrm_dcnv2/infer", request)
        self.assertEqual(status, 200, want)
        dense = next(i for i in request["inputs"] if i["name"] == "dense")
        rows = dense["shape"][0]
        memory = cupy.zeros(4096, dtype=cupy.uint8)
        memory[128:128 + 52 * rows] = cupy.asarray(
            bytearray(struct.pack("<%df" % (13 * rows), *dense["data"])), dtype=cupy.uint8)
        handle = bytes(cupy.cuda.runtime.ipcGetMemHandle(memory.data.ptr))
        body = {"raw_handle": {"b64": base64.b64encode(handle).decode()}, "device_id": 0, "byte_size": 4096}
        self.assertEqual(self.post("/v2/cudasharedmemory/region/dev/register", body), (200, {}))
        self.assertEqual(s.json("GET", "/v2/cudasharedmemory/status"),
                         (200, [{"name": "dev", "device_id": 0, "byte_size": 4096}]))

        dense.pop("data")
        dense["parameters"] = {"shared_memory_region": "dev", "shared_memory_offset": 128,
                               "shared_memory_byte_size": 52 * rows}
        request["outputs"] = [{"name": "score", "parameters": {"shared_memory_region": "dev",
                                                               "shared_memory_offset": 2048,
                                                               "shared_memory_byte_size": 4 * rows}}]
        status, got = self.post("/v2/models/dlrm_dcnv2/infer", request)
        self.assertEqual(status, 200, got)
        self.assertNotIn("data", got["outputs"][0])
        scores = struct.unpack("<%df" % rows, memory[2048:2048 + 4 * rows].get().tobytes())
        for a, b in zip(scores, want["outputs"][0]["data"]):
            self.assertAlmostEqual(a, b, delta=1e-5 * max(1.0, abs(b)))

        stubs = grpc_stubs()
        if stubs is not None:  # the same over gRPC: status, then an inference, then unregister
            import grpc
            pb, pb_grpc = stubs
            with grpc.insecure_channel("127.0.0.1:%d" % s.grpc_port) as channel:
                stub = pb_grpc.GRPCInferenceServiceStub(channel)
                regions = stub.CudaSharedMemoryStatus(pb.CudaSharedMemoryStatusRequest()).regions
                self.assertEqual(regions["dev"].byte_size, 4096)
                memory[2048:2048 + 4 * rows] = 0
                req = pb.ModelInferRequest(model_name="dlrm_dcnv2")
                for i in request["inputs"]:
                    t = req.inputs.add(name=i["name"], datatype=i["datatype"])
                    if i["name"] != "dense" and i["data"] and isinstance(i["data"][0], list):  # ragged: flat + lengths
                        t.shape.append(sum(len(x) for x in i["data"]))
                        t.parameters["lengths"].string_param = ",".join(str(len(x)) for x in i["data"])
                        t.contents.int64_contents.extend(v for x in i["data"] for v in x)
                        continue
                    t.shape.extend(i["shape"])
                    if i["name"] == "dense":
                        t.parameters["shared_memory_region"].string_param = "dev"
                        t.parameters["shared_memory_offset"].int64_param = 128
                        t.parameters["shared_memory_byte_size"].int64_param = 52 * rows
                    else:
                        t.contents.int64_contents.extend(i["data"])
                o = req.outputs.add(name="score")
                o.parameters["shared_memory_region"].string_param = "dev"
                o.parameters["shared_memory_offset"].int64_param = 2048
                o.parameters["shared_memory_byte_size"].int64_param = 4 * rows
                stub.ModelInfer(req, timeout=30)
                again = struct.unpack("<%df" % rows, memory[2048:2048 + 4 * rows].get().tobytes())
                self.assertEqual(again, scores)
                stub.CudaSharedMemoryUnregister(pb.CudaSharedMemoryUnregisterRequest(name="dev"))
        else:
            self.assertEqual(self.post("/v2/cudasharedmemory/region/dev/unregister", {}), (200, {}))
        self.assertEqual(s.json("GET", "/v2/cudasharedmemory/status"), (200, []))
        self.assertEqual(self.post("/v2/models/dlrm_dcnv2/infer", request)[0], 404)  # its region is gone
        self.assertEqual(s.request("GET", "/v2/health/live")[0], 200)

    def test_every_input_in_device_memory(self):
        """All 27 inputs of a request in one CUDA region (the ragged ids flat, their lengths as a
        parameter): the server copies them out together, and the scores are JSON's, over HTTP and gRPC."""
        s = self.server
        request = copy.deepcopy(lines("dlrm_dcnv2", "requests")[1])
        status, want = s.json("POST", "/v2/models/dlrm_dcnv2/infer", request)
        self.assertEqual(status, 200, want)
        rows = request["inputs"][0]["shape"][0]
        cupy.cuda.set_allocator(None)  # a cudaMalloc of its own: the handle's base is the buffer's
        memory = cupy.zeros(1 << 16, dtype=cupy.uint8)
        at, places = 0, []  # (input, shape, datatype, offset, bytes, lengths)
        for i in request["inputs"]:
            if i["datatype"] == "FP32":
                data = struct.pack("<%df" % (13 * rows), *i["data"])
                shape, lengths = i["shape"], None
            elif i["data"] and isinstance(i["data"][0], list):  # ragged rows: flat, with their lengths
                flat = [v for row in i["data"] for v in row]
                data = struct.pack("<%dq" % len(flat), *flat)
                shape, lengths = [len(flat)], [len(row) for row in i["data"]]
            else:  # already flat, its lengths a parameter
                data = struct.pack("<%dq" % len(i["data"]), *i["data"])
                shape, lengths = i["shape"], i.get("parameters", {}).get("lengths")
            if data:
                memory[at:at + len(data)] = cupy.asarray(bytearray(data), dtype=cupy.uint8)
            places.append((i["name"], shape, i["datatype"], at, len(data), lengths))
            at += (len(data) + 63) // 64 * 64
        out_at = at
        handle = bytes(cupy.cuda.runtime.ipcGetMemHandle(memory.data.ptr))
        body = {"raw_handle": {"b64": base64.b64encode(handle).decode()}, "device_id": 0, "byte_size": 1 << 16}
        self.assertEqual(self.post("/v2/cudasharedmemory/region/all/register", body), (200, {}))

        def region(offset, size):
            return {"shared_memory_region": "all", "shared_memory_offset": offset, "shared_memory_byte_size": size}
        inputs = []
        for name, shape, datatype, offset, size, lengths in places:
            params = region(offset, size)
            if lengths is not None:
                params["lengths"] = lengths
            inputs.append({"name": name, "datatype": datatype, "shape": shape, "parameters": params})
        status, got = self.post("/v2/models/dlrm_dcnv2/infer", {
            "inputs": inputs, "outputs": [{"name": "score", "parameters": region(out_at, 4 * rows)}]})
        self.assertEqual(status, 200, got)
        scores = struct.unpack("<%df" % rows, memory[out_at:out_at + 4 * rows].get().tobytes())
        for a, b in zip(scores, want["outputs"][0]["data"]):
            self.assertAlmostEqual(a, b, delta=1e-5 * max(1.0, abs(b)))

        stubs = grpc_stubs()
        if stubs is not None:
            import grpc
            pb, pb_grpc = stubs
            memory[out_at:out_at + 4 * rows] = 0
            req = pb.ModelInferRequest(model_name="dlrm_dcnv2")
            for name, shape, datatype, offset, size, lengths in places:
                t = req.inputs.add(name=name, datatype=datatype)
                t.shape.extend(shape)
                if lengths is not None:
                    t.parameters["lengths"].string_param = ",".join(str(n) for n in lengths)
                t.parameters["shared_memory_region"].string_param = "all"
                t.parameters["shared_memory_offset"].int64_param = offset
                t.parameters["shared_memory_byte_size"].int64_param = size
            o = req.outputs.add(name="score")
            o.parameters["shared_memory_region"].string_param = "all"
            o.parameters["shared_memory_offset"].int64_param = out_at
            o.parameters["shared_memory_byte_size"].int64_param = 4 * rows
            with grpc.insecure_channel("127.0.0.1:%d" % s.grpc_port) as channel:
                pb_grpc.GRPCInferenceServiceStub(channel).ModelInfer(req, timeout=30)
            again = struct.unpack("<%df" % rows, memory[out_at:out_at + 4 * rows].get().tobytes())
            self.assertEqual(again, scores)
        self.assertEqual(self.post("/v2/cudasharedmemory/region/all/unregister", {}), (200, {}))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
