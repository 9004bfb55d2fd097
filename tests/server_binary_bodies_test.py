"""Binary request bodies read into place (frontend/binary_pieces.h): the server reads a binary
inference request's JSON part, then each input's bytes into a piece of their own, which the parser
views instead of copying. Over real sockets: the scores of W1's zoo model (27 inputs, ragged) and
MMoE sent as Triton's binary extension equal the references however the body arrives (whole, a few
bytes at a time, pipelined behind another, after 100-continue, with a JSON part that misleads the
layout), no input byte is copied on the host when the announcement is right, and framing that
lies or a client that vanishes mid-body fails only its own request.

  /usr/bin/python3 tests/server_binary_bodies_test.py RANKD_BINARY SOURCE_DIR
"""
import json
import os
import shutil
import socket
import struct
import tempfile
import time
import unittest

from serving_harness import Server, flatten, lines, rel_error, scrape, ZOO

COPIED = 'rankd_host_input_copy_bytes_total{stage="request"}'


def binary_body(request, parameters=None):
    """The request as Triton's binary extension: (JSON part, binary part); ragged inputs flat with their lengths."""
    inputs, blobs = [], b""
    for i in request["inputs"]:
        shape, params = i["shape"], dict(i.get("parameters", {}))
        if -1 in shape:
            params["lengths"] = [len(row) for row in i["data"]]
        flat = flatten(i["data"])
        if -1 in shape:
            shape = [len(flat)]
        blob = struct.pack("<%d%s" % (len(flat), "f" if i["datatype"] == "FP32" else "q"), *flat)
        params["binary_data_size"] = len(blob)
        inputs.append({"name": i["name"], "datatype": i["datatype"], "shape": shape, "parameters": params})
        blobs += blob
    head = {"inputs": inputs, "outputs": [{"name": o, "parameters": {"binary_data": True}} for o in request.get("outputs", [])]}
    if parameters is not None:
        head = {"parameters": parameters, **head}
    return json.dumps(head).encode(), blobs


def http_message(model, json_part, binary_part, extra=b""):
    return (b"POST /v2/models/%s/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
            b"Inference-Header-Content-Length: %d\r\n%s\r\n" % (model.encode(), len(json_part) + len(binary_part),
                                                                len(json_part), extra)) + json_part + binary_part


def read_response(sock, pending=b""):
    """One HTTP/1.1 response off `sock`: (status, headers, body, bytes read past it)."""
    data = pending
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response: %r" % data[:200])
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    status_line, *fields = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (f.split(":", 1) for f in fields)}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        rest += chunk
    return int(status_line.split()[1]), headers, rest[:length], rest[length:]


def scores(headers, body):
    """The outputs of a binary response, by name: each a list of floats."""
    n = int(headers["inference-header-content-length"])
    meta, at, out = json.loads(body[:n]), n, {}
    for o in meta["outputs"]:
        size = o["parameters"]["binary_data_size"]
        out[o["name"]] = list(struct.unpack("<%df" % (size // 4), body[at:at + size]))
        at += size
    return out


class BinaryBodiesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        for name in ["dlrm_dcnv2", "mmoe"]:
            shutil.copytree(os.path.join(ZOO, name), os.path.join(cls.repo, name))
        cls.server = Server(cls.repo)
        cls.cases = []  # (model, request with its outputs named, expected outputs by name)
        for model in ["dlrm_dcnv2", "mmoe"]:
            for request, want in list(zip(lines(model, "requests"), lines(model, "expected")))[:4]:
                request = dict(request, outputs=[o["name"] for o in want["outputs"]])
                cls.cases.append((model, request, {o["name"]: flatten(o["data"]) for o in want["outputs"]}))

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.server.http_port), timeout=20)

    def assert_scores(self, want, headers, body):
        got = scores(headers, body)
        for name, values in want.items():
            self.assertLessEqual(rel_error(got[name], values), 1e-5, name)

    def test_scores_equal_the_references_and_no_input_byte_is_copied(self):
        for model, request, want in self.cases:
            json_part, binary_part = binary_body(request)
            before = scrape(self.server)[COPIED]
            status, body, headers = self.server.request("POST", "/v2/models/%s/infer" % model, json_part + binary_part,
                                                        {"Inference-Header-Content-Length": str(len(json_part))})
            self.assertEqual(status, 200, body[:300])
            self.assert_scores(want, {k.lower(): v for k, v in headers.items()}, body)
            self.assertEqual(scrape(self.server)[COPIED] - before, 0, model)

    def test_a_misleading_json_part_costs_a_copy_not_a_score(self):
        model, request, want = self.cases[0]
        # A request parameter of the inputs' key (not one the server reads): the layout takes it for
        # the first input's size and gives every input after it a piece that does not fit its bytes.
        json_part, binary_part = binary_body(request, parameters={"binary_data_size": 12})
        before = scrape(self.server)[COPIED]
        with self.connect() as sock:
            sock.sendall(http_message(model, json_part, binary_part))
            status, headers, body, _ = read_response(sock)
        self.assertEqual(status, 200, body[:300])
        self.assert_scores(want, headers, body)
        self.assertGreater(scrape(self.server)[COPIED] - before, 0)

    def test_a_body_that_arrives_a_few_bytes_at_a_time(self):
        model, request, want = self.cases[4]  # MMoE: a short body
        message = http_message(model, *binary_body(request))
        with self.connect() as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for at in range(0, len(message), 7):
                sock.sendall(message[at:at + 7])
                time.sleep(0.001)
            status, headers, body, _ = read_response(sock)
        self.assertEqual(status, 200, body[:300])
        self.assert_scores(want, headers, body)

    def test_pipelined_requests_in_one_write_each_get_their_answer(self):
        messages = [http_message(model, *binary_body(request)) for model, request, _ in self.cases[:6]]
        with self.connect() as sock:
            sock.sendall(b"".join(messages))
            pending = b""
            for model, request, want in self.cases[:6]:
                status, headers, body, pending = read_response(sock, pending)
                self.assertEqual(status, 200, (model, body[:300]))
                self.assert_scores(want, headers, body)

    def test_after_100_continue(self):
        model, request, want = self.cases[1]
        message = http_message(model, *binary_body(request), extra=b"Expect: 100-continue\r\n")
        head, body_bytes = message.split(b"\r\n\r\n", 1)
        with self.connect() as sock:
            sock.sendall(head + b"\r\n\r\n")
            self.assertTrue(sock.recv(4096).startswith(b"HTTP/1.1 100"))
            sock.sendall(body_bytes)
            status, headers, body, _ = read_response(sock)
        self.assertEqual(status, 200, body[:300])
        self.assert_scores(want, headers, body)

    def test_framing_that_lies_fails_only_its_request(self):
        model, request, want = self.cases[4]
        json_part, binary_part = binary_body(request)
        cases = [
            # the JSON part as long as the body or longer: no binary part to read into place
            (http_message(model, json_part, b"").replace(
                b"Inference-Header-Content-Length: %d" % len(json_part),
                b"Inference-Header-Content-Length: %d" % (len(json_part) + 9)), 400, "exceeds the body"),
            # an input's bytes past the body's end
            (http_message(model, json_part, binary_part[:-4]), 400, "ends before its binary data"),
            # bytes no input takes
            (http_message(model, json_part, binary_part + b"\0" * 8), 400, "8 bytes of binary data are left over"),
            # a JSON part that is not JSON
            (http_message(model, b"{" + json_part[:-2], b"\0" * 64 + binary_part), 400, "not valid JSON"),
        ]
        for message, code, fragment in cases:
            with self.connect() as sock:
                sock.sendall(message)
                status, _, body, _ = read_response(sock)
            self.assertEqual(status, code, body[:300])
            self.assertIn(fragment, json.loads(body)["error"])
        # A client that vanishes after the JSON part and half the tensors, then one that closes mid-JSON.
        message = http_message(model, json_part, binary_part)
        for cut in (len(message) - len(binary_part) // 2, len(message) - len(binary_part) - len(json_part) // 2):
            with self.connect() as sock:
                sock.sendall(message[:cut])
        status, body, headers = self.server.request("POST", "/v2/models/%s/infer" % model, json_part + binary_part,
                                                    {"Inference-Header-Content-Length": str(len(json_part))})
        self.assertEqual(status, 200, body[:300])
        self.assert_scores(want, {k.lower(): v for k, v in headers.items()}, body)


if __name__ == "__main__":
    unittest.main(argv=[__file__])
