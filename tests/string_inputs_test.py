"""String features over real sockets: W4s (models/zoo/mmoe_strings, six categorical features sent as
strings and hashed by xxhash64) sent as JSON strings, the binary extension's length-prefixed
elements, gRPC bytes_contents and gRPC raw contents scores as mmoe does with the ids that Python's
own xxHash (python3-xxhash, not rankd's code) gives those strings, and DIN with its behaviour
sequences sent as delimited strings scores as DIN does with the ids; every protocol answers the
same mistake alike.

  /usr/bin/python3 tests/string_inputs_test.py RANKD_BINARY SOURCE_DIR
"""
import json
import os
import random
import shutil
import struct
import sys
import tempfile
import unittest

import xxhash

from serving_harness import SRC, ZOO, Server, grpc_stubs

ROWS_PER_TABLE = 100  # the zoo's tiny mmoe


def packed(strings):
    """KServe's binary form of BYTES elements: a 4-byte little-endian length, then the bytes."""
    return b"".join(struct.pack("<I", len(s)) + s for s in strings)


def serve(case):
    """Starts a server on case.repo, and a gRPC stub to it where Debian's grpc packages are installed
    (case.pb None otherwise)."""
    case.server = Server(case.repo)
    stubs = grpc_stubs()
    case.pb = None
    if stubs:
        import grpc
        case.pb, pb_grpc = stubs
        case.channel = grpc.insecure_channel(f"127.0.0.1:{case.server.grpc_port}")
        case.stub = pb_grpc.GRPCInferenceServiceStub(case.channel)


def stop(case):
    if case.pb:
        case.channel.close()
    case.server.stop()
    shutil.rmtree(case.repo)


class StringInputsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        for name in ["mmoe", "mmoe_strings"]:
            shutil.copytree(os.path.join(ZOO, name), os.path.join(cls.repo, name))
        serve(cls)

    @classmethod
    def tearDownClass(cls):
        stop(cls)

    def features(self, n, seed):
        rng = random.Random(seed)
        ids = [[rng.randrange(ROWS_PER_TABLE) for _ in range(14)] for _ in range(n)]
        cats = [["f%d=%s" % (14 + j, rng.choice(["v%d" % rng.randrange(1000), "", "北京", "x" * 200]))
                 for j in range(6)] for _ in range(n)]
        dense = [[rng.random() for _ in range(10)] for _ in range(n)]
        return ids, cats, dense

    def reference(self, ids, cats, dense):
        """mmoe's scores for the ids Python's xxHash gives the strings."""
        n = len(ids)
        hashed = [[xxhash.xxh64_intdigest(s.encode(), 0) % ROWS_PER_TABLE for s in row] for row in cats]
        status, got = self.server.json("POST", "/v2/models/mmoe/infer", {"inputs": [
            {"name": "sparse", "datatype": "INT64", "shape": [n, 20], "data": [a + b for a, b in zip(ids, hashed)]},
            {"name": "dense", "datatype": "FP32", "shape": [n, 10], "data": dense}]})
        self.assertEqual(status, 200, got)
        return {o["name"]: o["data"] for o in got["outputs"]}

    def http(self, ids, cats, dense, binary):
        n = len(ids)
        strings = {"name": "categories", "datatype": "BYTES", "shape": [n, 6]}
        blob = b""
        if binary:
            blob = packed([s.encode() for row in cats for s in row])
            strings["parameters"] = {"binary_data_size": len(blob)}
        else:
            strings["data"] = cats
        header = json.dumps({"inputs": [
            {"name": "ids", "datatype": "INT64", "shape": [n, 14], "data": ids}, strings,
            {"name": "dense", "datatype": "FP32", "shape": [n, 10], "data": dense}]}).encode()
        status, body, _ = self.server.request("POST", "/v2/models/mmoe_strings/infer", header + blob,
                                              {"Inference-Header-Content-Length": str(len(header))})
        got = json.loads(body)
        if status != 200:
            return status, got["error"]
        return status, {o["name"]: o["data"] for o in got["outputs"]}

    def grpc(self, ids, cats, dense, raw):
        import grpc
        n = len(ids)
        pb = self.pb
        r = pb.ModelInferRequest(model_name="mmoe_strings")
        a = r.inputs.add(name="ids", datatype="INT64", shape=[n, 14])
        b = r.inputs.add(name="categories", datatype="BYTES", shape=[n, 6])
        c = r.inputs.add(name="dense", datatype="FP32", shape=[n, 10])
        flat = [s.encode() for row in cats for s in row]
        if raw:
            r.raw_input_contents.extend([struct.pack("<%dq" % (n * 14), *sum(ids, [])), packed(flat),
                                         struct.pack("<%df" % (n * 10), *sum(dense, []))])
        else:
            a.contents.int64_contents.extend(sum(ids, []))
            b.contents.bytes_contents.extend(flat)
            c.contents.fp32_contents.extend(sum(dense, []))
        try:
            got = self.stub.ModelInfer(r, timeout=30)
        except grpc.RpcError as e:
            return e.code(), e.details()
        out = {}
        for i, o in enumerate(got.outputs):
            out[o.name] = list(struct.unpack("<%df" % (len(got.raw_output_contents[i]) // 4),
                                             got.raw_output_contents[i]))
        return 200, out

    def assertScores(self, got, want, what):
        self.assertEqual(sorted(got), sorted(want), what)
        for name in want:
            flat = [x for row in got[name] for x in (row if isinstance(row, list) else [row])]
            self.assertEqual(len(flat), len(want[name]), what)
            for x, y in zip(flat, want[name]):
                self.assertAlmostEqual(x, y, delta=1e-6 * max(1.0, abs(y)), msg=what)

    def test_metadata_says_bytes(self):
        status, meta = self.server.json("GET", "/v2/models/mmoe_strings")
        self.assertEqual(status, 200, meta)
        self.assertEqual({i["name"]: i["datatype"] for i in meta["inputs"]},
                         {"ids": "INT64", "categories": "BYTES", "dense": "FP32"})
        status, config = self.server.json("GET", "/v2/models/mmoe_strings/config")
        self.assertEqual(status, 200, config)
        self.assertEqual([i["data_type"] for i in config["input"]], ["TYPE_INT64", "TYPE_STRING", "TYPE_FP32"])

    def test_every_protocol_scores_as_the_hashed_ids(self):
        for n, seed in [(1, 1), (7, 2), (64, 3)]:
            ids, cats, dense = self.features(n, seed)
            want = self.reference(ids, cats, dense)
            for binary in (False, True):
                status, got = self.http(ids, cats, dense, binary)
                self.assertEqual(status, 200, got)
                self.assertScores(got, want, "HTTP binary=%s n=%d" % (binary, n))
            if self.pb:
                for raw in (False, True):
                    status, got = self.grpc(ids, cats, dense, raw)
                    self.assertEqual(status, 200, got)
                    self.assertScores(got, want, "gRPC raw=%s n=%d" % (raw, n))

    def test_strings_in_system_shared_memory(self):
        from multiprocessing import shared_memory
        ids, cats, dense = self.features(5, 6)
        want = self.reference(ids, cats, dense)
        blob = packed([s.encode() for row in cats for s in row])
        region = shared_memory.SharedMemory(create=True, size=len(blob) + 32)
        self.addCleanup(region.unlink)
        self.addCleanup(region.close)
        region.buf[32:32 + len(blob)] = blob
        status, got = self.server.json("POST", "/v2/systemsharedmemory/region/strings/register",
                                       {"key": "/" + region.name, "offset": 0, "byte_size": len(blob) + 32})
        self.assertEqual(status, 200, got)
        self.addCleanup(self.server.json, "POST", "/v2/systemsharedmemory/region/strings/unregister", {})
        strings = {"name": "categories", "datatype": "BYTES", "shape": [5, 6],
                   "parameters": {"shared_memory_region": "strings", "shared_memory_offset": 32,
                                  "shared_memory_byte_size": len(blob)}}
        body = {"inputs": [{"name": "ids", "datatype": "INT64", "shape": [5, 14], "data": ids}, strings,
                           {"name": "dense", "datatype": "FP32", "shape": [5, 10], "data": dense}]}
        status, got = self.server.json("POST", "/v2/models/mmoe_strings/infer", body)
        self.assertEqual(status, 200, got)
        self.assertScores({o["name"]: o["data"] for o in got["outputs"]}, want, "system shared memory")
        if self.pb:
            pb = self.pb
            r = pb.ModelInferRequest(model_name="mmoe_strings")
            r.inputs.add(name="ids", datatype="INT64", shape=[5, 14]).contents.int64_contents.extend(sum(ids, []))
            c = r.inputs.add(name="categories", datatype="BYTES", shape=[5, 6])
            c.parameters["shared_memory_region"].string_param = "strings"
            c.parameters["shared_memory_offset"].int64_param = 32
            c.parameters["shared_memory_byte_size"].int64_param = len(blob)
            r.inputs.add(name="dense", datatype="FP32", shape=[5, 10]).contents.fp32_contents.extend(sum(dense, []))
            got = self.stub.ModelInfer(r, timeout=30)
            out = {o.name: list(struct.unpack("<5f", got.raw_output_contents[i])) for i, o in enumerate(got.outputs)}
            self.assertScores(out, want, "gRPC, system shared memory")
        # A byte size that cuts the last element short.
        strings["parameters"]["shared_memory_byte_size"] = len(blob) - 1
        status, got = self.server.json("POST", "/v2/models/mmoe_strings/infer", body)
        self.assertEqual(status, 400, got)
        self.assertIn("BYTES element 29 says", got["error"])

    def test_the_same_mistake_gets_the_same_answer(self):
        ids, cats, dense = self.features(3, 4)
        long = [row[:] for row in cats]
        long[2][5] = "y" * 257
        cases = [(long, "input 'categories': element 17 is 257 bytes; the limit is 256 (max_string_bytes)")]
        refused = {400}
        if self.pb:
            import grpc
            refused.add(grpc.StatusCode.INVALID_ARGUMENT)
        for bad, message in cases:
            answers = [self.http(ids, bad, dense, binary) for binary in (False, True)]
            if self.pb:
                answers += [self.grpc(ids, bad, dense, raw) for raw in (False, True)]
            for status, got in answers:
                self.assertIn(status, refused, got)
                self.assertEqual(got, message)
        # Too few strings for the shape: each protocol's own count, the same words.
        status, got = self.http(ids, cats[:2], dense, False)
        self.assertEqual((status, got), (400, "input 'categories': shape [3, 6] of BYTES needs 18 strings, "
                                              "the request holds 12"))
        if self.pb:
            self.assertEqual(self.grpc(ids, cats[:2], dense, False)[1],
                             "input 'categories': shape [3, 6] of BYTES needs 18 strings, the request holds 12")
        # Not strings at all; the wrong datatype for either kind of input.
        header = {"inputs": [{"name": "ids", "datatype": "INT64", "shape": [1, 14], "data": ids[0]},
                             {"name": "categories", "datatype": "BYTES", "shape": [1, 6], "data": [1, 2, 3, 4, 5, 6]},
                             {"name": "dense", "datatype": "FP32", "shape": [1, 10], "data": dense[0]}]}
        status, got = self.server.json("POST", "/v2/models/mmoe_strings/infer", header)
        self.assertEqual((status, got["error"]), (400, "input 'categories': element 0 is not a string"))
        header["inputs"][1] = {"name": "categories", "datatype": "INT64", "shape": [1, 6], "data": [1] * 6}
        status, got = self.server.json("POST", "/v2/models/mmoe_strings/infer", header)
        self.assertEqual((status, got["error"]), (400, "input 'categories' must be BYTES, got INT64"))
        # Broken binary elements: a length past the end, bytes left over.
        for blob, message in [(packed([b"a"] * 5) + struct.pack("<I", 9) + b"abc", "BYTES element 5 says 9 bytes but 3 are left"),
                              (packed([b"a"] * 6) + b"zz", "2 bytes are left after its 6 BYTES elements")]:
            head = json.dumps({"inputs": [
                {"name": "ids", "datatype": "INT64", "shape": [1, 14], "data": ids[0]},
                {"name": "categories", "datatype": "BYTES", "shape": [1, 6],
                 "parameters": {"binary_data_size": len(blob)}},
                {"name": "dense", "datatype": "FP32", "shape": [1, 10], "data": dense[0]}]}).encode()
            status, body, _ = self.server.request("POST", "/v2/models/mmoe_strings/infer", head + blob,
                                                  {"Inference-Header-Content-Length": str(len(head))})
            self.assertEqual(status, 400, body)
            self.assertIn(message, json.loads(body)["error"])
        # The server serves on.
        status, got = self.http(ids, cats, dense, False)
        self.assertEqual(status, 200, got)


class SplitSequencesTest(unittest.TestCase):
    """DIN with its behaviour sequences sent as delimited strings ("12, 7,40"; the same graph under a config
    that splits them) scores as DIN does with the ids, over JSON, the binary extension, gRPC typed and raw
    contents; a piece that is not an id gets the same answer on all four."""

    SEQUENCES = ("seq_items", "seq_cats")

    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "din"), os.path.join(cls.repo, "din"))
        shutil.copytree(os.path.join(ZOO, "din"), os.path.join(cls.repo, "din_split"))
        path = os.path.join(cls.repo, "din_split", "config.yaml")
        with open(path) as f:
            config = f.read().replace("name: din\n", "name: din_split\n", 1)
        for seq in cls.SEQUENCES:
            old = "  - name: %s\n    datatype: INT64\n" % seq
            assert old in config, old
            config = config.replace(old, "  - name: %s\n    datatype: BYTES\n    split: \",\"\n" % seq)
        with open(path, "w") as f:
            f.write(config)
        serve(cls)

    @classmethod
    def tearDownClass(cls):
        stop(cls)

    def as_strings(self, request, rng):
        """The request with each sequence's row as one string, some pieces padded with spaces."""
        out = json.loads(json.dumps(request))
        for i in out["inputs"]:
            if i["name"] in self.SEQUENCES:  # nested [[ids]], or flat ids with lengths: one user's row
                row = i["data"][0] if i["data"] and isinstance(i["data"][0], list) else i["data"]
                i.pop("parameters", None)
                i.update(datatype="BYTES", shape=[1],
                         data=[",".join((" %d " if rng.random() < 0.2 else "%d") % v for v in row)])
        return out

    def send(self, request, wire):
        """(status, scores or error message) of `request` (JSON, strings as data) sent over `wire`."""
        if wire == "json":
            status, got = self.server.json("POST", "/v2/models/din_split/infer", request)
            return status, got["outputs"][0]["data"] if status == 200 else got["error"]
        inputs = request["inputs"]
        if wire == "binary":
            header, blob = {"inputs": []}, b""
            for i in inputs:
                if i["datatype"] == "BYTES":
                    data = packed([v.encode() for v in i["data"]])
                else:
                    flat = [x for row in i["data"] for x in (row if isinstance(row, list) else [row])]
                    data = struct.pack("<%dq" % len(flat), *flat)
                shape = i["shape"] if -1 not in i["shape"] else [1, len(i["data"][0])]
                header["inputs"].append({"name": i["name"], "datatype": i["datatype"], "shape": shape,
                                         "parameters": {"binary_data_size": len(data)}})
                blob += data
            head = json.dumps(header).encode()
            status, body, _ = self.server.request("POST", "/v2/models/din_split/infer", head + blob,
                                                  {"Inference-Header-Content-Length": str(len(head))})
            got = json.loads(body)
            return status, got["outputs"][0]["data"] if status == 200 else got["error"]
        import grpc
        r = self.pb.ModelInferRequest(model_name="din_split")
        for i in inputs:
            flat = [x for row in i["data"] for x in (row if isinstance(row, list) else [row])]
            shape = i["shape"] if -1 not in i["shape"] else [1, len(flat)]
            t = r.inputs.add(name=i["name"], datatype=i["datatype"], shape=shape)
            if wire == "grpc-raw":
                r.raw_input_contents.append(packed([v.encode() for v in flat]) if i["datatype"] == "BYTES"
                                            else struct.pack("<%dq" % len(flat), *flat))
            elif i["datatype"] == "BYTES":
                t.contents.bytes_contents.extend(v.encode() for v in flat)
            else:
                t.contents.int64_contents.extend(flat)
        try:
            got = self.stub.ModelInfer(r, timeout=30)
        except grpc.RpcError as e:
            return e.code(), e.details()
        return 200, list(struct.unpack("<%df" % (len(got.raw_output_contents[0]) // 4), got.raw_output_contents[0]))

    def wires(self):
        return ["json", "binary"] + (["grpc-typed", "grpc-raw"] if self.pb else [])

    def test_every_protocol_scores_as_the_ids(self):
        rng = random.Random(8)
        with open(os.path.join(SRC, "tests", "data", "zoo", "din.requests.jsonl")) as f:
            requests = [json.loads(line) for line in f]
        empty = json.loads(json.dumps(requests[0]))  # a user with no history: empty strings
        for i in empty["inputs"]:
            if i["name"] in self.SEQUENCES:
                i["data"] = [[]]
        for request in requests + [empty]:
            status, want = self.server.json("POST", "/v2/models/din/infer", request)
            self.assertEqual(status, 200, want)
            want = want["outputs"][0]["data"]
            strings = self.as_strings(request, rng)
            for wire in self.wires():
                status, got = self.send(strings, wire)
                self.assertEqual(status, 200, (wire, got))
                flat = [x for row in got for x in (row if isinstance(row, list) else [row])]
                self.assertEqual(len(flat), len(want), wire)
                for x, y in zip(flat, want):
                    self.assertAlmostEqual(x, y, delta=1e-6 * max(1.0, abs(y)), msg=wire)

    def test_a_piece_that_is_not_an_id_gets_the_same_answer(self):
        with open(os.path.join(SRC, "tests", "data", "zoo", "din.requests.jsonl")) as f:
            request = self.as_strings(json.loads(f.readline()), random.Random(1))
        refused = {400}
        if self.pb:
            import grpc
            refused.add(grpc.StatusCode.INVALID_ARGUMENT)
        for text, message in [("3,x7,5", "input 'seq_items': element 0 has the piece 'x7' where an INT64 id belongs"),
                              ("3,,5", "input 'seq_items': element 0 has an empty piece where an INT64 id belongs"),
                              ("3,5,", "input 'seq_items': element 0 has an empty piece where an INT64 id belongs")]:
            bad = json.loads(json.dumps(request))
            next(i for i in bad["inputs"] if i["name"] == "seq_items")["data"] = [text]
            for wire in self.wires():
                status, got = self.send(bad, wire)
                self.assertIn(status, refused, (wire, got))
                self.assertEqual(got, message, wire)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
