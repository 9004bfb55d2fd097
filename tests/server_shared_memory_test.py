"""Triton's system and CUDA shared-memory extensions over HTTP: regions registered, read and written, and
the bad cases refused.

  /usr/bin/python3 tests/server_shared_memory_test.py RANKD_BINARY SOURCE_DIR
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

from serving_harness import Server, lines, ZOO


class SharedMemoryTest(unittest.TestCase):
    """Triton's system shared memory extension over HTTP: DLRM's dense input read from a registered
    region and its score written into another answer what the same request in JSON answers; every
    mistake is a clear 400 or 404 and the server serves on."""

    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "dlrm_dcnv2"), os.path.join(cls.repo, "dlrm_dcnv2"))
        cls.server = Server(cls.repo)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def post(self, path, body):
        status, data, _ = self.server.request("POST", path, json.dumps(body))
        return status, json.loads(data) if data else None

    def test_inputs_and_outputs_in_shared_memory(self):
        from multiprocessing import shared_memory
        s = self.server
        inputs = shared_memory.SharedMemory(create=True, size=1024)
        outputs = shared_memory.SharedMemory(create=True, size=64)
        self.addCleanup(inputs.unlink)
        self.addCleanup(outputs.unlink)
        self.addCleanup(inputs.close)
        self.addCleanup(outputs.close)
        request = copy.deepcopy(lines("dlrm_dcnv2", "requests")[0])
        dense = next(i for i in request["inputs"] if i["name"] == "dense")
        struct.pack_into("<13f", inputs.buf, 64, *dense["data"])
        status, want = s.json("POST", "/v2/models/dlrm_dcnv2/infer", request)
        self.assertEqual(status, 200, want)

        self.assertEqual(self.post("/v2/systemsharedmemory/region/in/register",
                                   {"key": "/" + inputs.name, "offset": 0, "byte_size": 1024})[0], 200)
        self.assertEqual(self.post("/v2/systemsharedmemory/region/out/register",
                                   {"key": "/" + outputs.name, "offset": 16, "byte_size": 48})[0], 200)
        status, regions = s.json("GET", "/v2/systemsharedmemory/status")
        self.assertEqual(status, 200)
        self.assertEqual(sorted((r["name"], r["offset"], r["byte_size"]) for r in regions),
                         [("in", 0, 1024), ("out", 16, 48)])
        self.assertIn("system_shared_memory", s.json("GET", "/v2")[1]["extensions"])

        dense.pop("data")
        dense["parameters"] = {"shared_memory_region": "in", "shared_memory_offset": 64, "shared_memory_byte_size": 52}
        request["outputs"] = [{"name": "score", "parameters": {"shared_memory_region": "out",
                                                               "shared_memory_offset": 8, "shared_memory_byte_size": 16}}]
        status, got = self.post("/v2/models/dlrm_dcnv2/infer", request)
        self.assertEqual(status, 200, got)
        self.assertNotIn("data", got["outputs"][0])
        self.assertEqual(got["outputs"][0]["parameters"], {"shared_memory_region": "out", "shared_memory_byte_size": 4})
        self.assertEqual(struct.unpack_from("<f", outputs.buf, 16 + 8)[0],
                         struct.unpack("<f", struct.pack("<f", want["outputs"][0]["data"][0]))[0])

        # Mistakes: each answered, none harming the server.
        def infer_status(mutate):
            r = copy.deepcopy(request)
            mutate(r)
            return self.post("/v2/models/dlrm_dcnv2/infer", r)

        def dense_params(r):
            return next(i for i in r["inputs"] if i["name"] == "dense")["parameters"]

        cases = [
            (lambda r: dense_params(r).update(shared_memory_byte_size=48), 400, "52"),
            (lambda r: dense_params(r).update(shared_memory_offset=1000), 400, "reach past"),
            (lambda r: dense_params(r).update(shared_memory_region="nowhere"), 404, "not registered"),
            (lambda r: r["outputs"][0]["parameters"].update(shared_memory_byte_size=2), 400, "takes 4 bytes"),
            (lambda r: r["outputs"][0]["parameters"].update(shared_memory_offset=47), 400, "reach past"),
        ]
        for mutate, code, message in cases:
            status, body = infer_status(mutate)
            self.assertEqual(status, code, body)
            self.assertIn(message, body["error"])
        for name, body, code in [("in", {"key": "/" + inputs.name, "offset": 0, "byte_size": 8}, 400),  # taken
                                 ("other", {"key": "/rankd-no-such-object", "offset": 0, "byte_size": 8}, 404),
                                 ("other", {"key": "/" + inputs.name, "offset": 1000, "byte_size": 100}, 400),
                                 ("other", {"key": "/" + inputs.name}, 400)]:
            self.assertEqual(self.post("/v2/systemsharedmemory/region/%s/register" % name, body)[0], code, body)
        self.assertEqual(self.post("/v2/systemsharedmemory/region/in/unregister", {})[0], 200)
        self.assertEqual(s.json("GET", "/v2/systemsharedmemory/region/in/status")[0], 404)
        self.assertEqual(infer_status(lambda r: None)[0], 404)  # its input region is gone
        self.assertEqual(self.post("/v2/systemsharedmemory/unregister", {})[0], 200)
        self.assertEqual(s.json("GET", "/v2/systemsharedmemory/status"), (200, []))
        self.assertEqual(s.request("GET", "/v2/health/live")[0], 200)

    def test_objects_truncated_or_unlinked_after_registering(self):
        """A client that truncates its object under a registered region gets a clear 400 (the server
        used to die of SIGBUS); one that unlinks it keeps using the memory both still map."""
        from multiprocessing import shared_memory
        s = self.server
        request = copy.deepcopy(lines("dlrm_dcnv2", "requests")[0])
        status, want = s.json("POST", "/v2/models/dlrm_dcnv2/infer", request)
        self.assertEqual(status, 200, want)
        dense = next(i for i in request["inputs"] if i["name"] == "dense")
        values = dense.pop("data")
        dense["parameters"] = {"shared_memory_region": "x", "shared_memory_offset": 8192, "shared_memory_byte_size": 52}
        for fate in ["truncated", "unlinked"]:
            with self.subTest(fate=fate):
                region = shared_memory.SharedMemory(create=True, size=1 << 16)
                struct.pack_into("<13f", region.buf, 8192, *values)
                self.assertEqual(self.post("/v2/systemsharedmemory/region/x/register",
                                           {"key": "/" + region.name, "offset": 0, "byte_size": 1 << 16})[0], 200)
                self.assertEqual(self.post("/v2/models/dlrm_dcnv2/infer", request)[0], 200)
                if fate == "truncated":
                    os.ftruncate(region._fd, 0)
                    for _ in range(2):
                        status, body = self.post("/v2/models/dlrm_dcnv2/infer", request)
                        self.assertEqual(status, 400, body)
                        self.assertIn("was truncated after it was registered", body["error"])
                    region.close()
                    region.unlink()
                else:
                    region.unlink()
                    status, got = self.post("/v2/models/dlrm_dcnv2/infer", request)
                    self.assertEqual(status, 200, got)
                    self.assertEqual(got["outputs"], want["outputs"])
                    region.close()
                self.assertEqual(s.request("GET", "/v2/health/live")[0], 200)
                self.assertEqual(self.post("/v2/systemsharedmemory/region/x/unregister", {})[0], 200)

    def test_cuda_shared_memory_refusals(self):
        """CUDA regions (a real one: tests/cuda_shared_memory_test.py on a GPU): malformed registrations
        are 400, a handle no driver can open (or no GPU) a clear error, and none is listed after."""
        s = self.server
        self.assertIn("cuda_shared_memory", s.json("GET", "/v2")[1]["extensions"])
        self.assertEqual(s.json("GET", "/v2/cudasharedmemory/status"), (200, []))
        handle = base64.b64encode(b"\x01" * 64).decode()
        for body in [{}, {"raw_handle": handle, "byte_size": 64}, {"raw_handle": {"b64": "not base64!"}, "byte_size": 64},
                     {"raw_handle": {"b64": handle}}, {"raw_handle": {"b64": handle}, "byte_size": 64, "device_id": "0"}]:
            status, answer = self.post("/v2/cudasharedmemory/region/c/register", body)
            self.assertEqual(status, 400, body)
            self.assertIn("CUDA shared memory registration", answer["error"])
        status, answer = self.post("/v2/cudasharedmemory/region/c/register",
                                   {"raw_handle": {"b64": handle}, "device_id": 0, "byte_size": 64})
        self.assertIn(status, (400, 404, 503), answer)
        self.assertIn("CUDA shared memory region 'c'", answer["error"])
        self.assertEqual(s.json("GET", "/v2/cudasharedmemory/region/c/status")[0], 404)
        self.assertEqual(self.post("/v2/cudasharedmemory/region/c/unregister", {})[0], 404)
        self.assertEqual(self.post("/v2/cudasharedmemory/unregister", {})[0], 200)
        self.assertEqual(s.request("GET", "/v2/health/live")[0], 200)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
