"""Triton's CUDA shared memory extension with a real handle: device memory this client allocates
(CuPy) and exports with cudaIpcGetMemHandle, registered over HTTP and gRPC, DLRM-DCNv2's dense input
read from it and its score written into it, equal to the same request sent in JSON. Needs a GPU
and CuPy (the lent GPU machine has both; skipped elsewhere).

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


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
