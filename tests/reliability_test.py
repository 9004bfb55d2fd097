"""rankd serve against what attackers and unlucky operators do, over real sockets: bytes that are not
UTF-8, HTTP/1.1 framing (100-continue, chunked, pipelined, bad headers), connection and descriptor
exhaustion, idle connections, model files replaced under a serving version, ports taken twice,
loads of names that do not exist, broken versions in poll mode, and gRPC messages that declare more
than they carry. Each case checks the answer and that the server goes on serving.

  /usr/bin/python3 tests/reliability_test.py RANKD_BINARY SOURCE_DIR
"""
import importlib.util
import json
import os
import resource
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import serving_harness
from serving_harness import ZOO, Server, lines, scrape

SRC = serving_harness.SRC


def onnx_pb2():
    """ONNX's protobuf classes, generated from the onnx.proto that libonnx-dev installs, or None."""
    try:
        from grpc_tools import protoc
    except ImportError:
        return None
    out = tempfile.mkdtemp()
    if protoc.main(["protoc", "-I/usr/include", "--python_out=" + out, "/usr/include/onnx/onnx.proto"]) != 0:
        return None
    # Loaded by its path: where python3-onnx is installed, its package would shadow `onnx` here.
    spec = importlib.util.spec_from_file_location("rankd_onnx_pb2", os.path.join(out, "onnx", "onnx_pb2.py"))
    pb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pb)
    return pb


def externalize(model_path, min_bytes=4096):
    """Moves model_path's initializers of at least min_bytes to model.onnx.data beside it, as
    torch.onnx.export does for models over 2 GB."""
    pb = onnx_pb2()
    model = pb.ModelProto()
    with open(model_path, "rb") as f:
        model.ParseFromString(f.read())
    data = bytearray()
    for t in model.graph.initializer:
        if len(t.raw_data) < min_bytes:
            continue
        data += b"\0" * (-len(data) % 64)
        offset = len(data)
        data += t.raw_data
        t.ClearField("raw_data")
        t.data_location = pb.TensorProto.EXTERNAL
        for key, value in (("location", "model.onnx.data"), ("offset", str(offset)), ("length", str(len(t.raw_data) or len(data) - offset))):
            t.external_data.add(key=key, value=value)
    with open(model_path + ".data", "wb") as f:
        f.write(data)
    with open(model_path, "wb") as f:
        f.write(model.SerializeToString())
    return len(data)


def raw_exchange(port, payload, read_until=b"", timeout=10, pause=None):
    """Sends payload on a fresh connection and reads until read_until appears or the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        got = b""
        while read_until not in got or not read_until:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            got += chunk
            if read_until and read_until in got:
                break
        return got


def http_request_bytes(path, body, extra=b""):
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n"
            % (path.encode(), extra, len(body)) + body)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class HttpEdgesTest(unittest.TestCase):
    """One server; each test leaves it serving."""

    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        for name in ["din", "mmoe"]:
            shutil.copytree(os.path.join(ZOO, name), os.path.join(cls.repo, name))
        cls.server = Server(cls.repo, "--http-header-timeout-secs", "2", "--http-max-connections", "48")
        cls.good = json.dumps(lines("mmoe", "requests")[0]).encode()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def assert_serving(self):
        status, _, _ = self.server.request("POST", "/v2/models/mmoe/infer", self.good)
        self.assertEqual(status, 200)

    def test_target_bytes_that_are_not_utf8(self):
        for target in [b"/v2/models/\xff\xfe/ready", b"/v2/models/\xc3\x28/infer", b"/\xff", b"/v2/repository/models/\xfe/load"]:
            method = b"POST" if target.endswith((b"infer", b"load")) else b"GET"
            reply = raw_exchange(self.server.http_port, method + b" " + target + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
                                 read_until=b"}")
            head, _, body = reply.partition(b"\r\n\r\n")
            self.assertTrue(head.startswith((b"HTTP/1.1 404", b"HTTP/1.1 400", b"HTTP/1.1 503")), reply)
            self.assertIn("error", json.loads(body))
            self.assert_serving()

    def test_expect_100_continue_is_answered(self):
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5) as sock:
            sock.sendall(b"POST /v2/models/mmoe/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(self.good))
            start = time.time()
            interim = sock.recv(4096)
            self.assertTrue(interim.startswith(b"HTTP/1.1 100 Continue"), interim)
            self.assertLess(time.time() - start, 0.5)
            sock.sendall(self.good)
            reply = b""
            while b"outputs" not in reply or not reply.rstrip().endswith(b"}"):
                reply += sock.recv(65536)
        self.assertTrue(reply.startswith(b"HTTP/1.1 200"), reply[:200])
        # Over the limit with Expect: refused at once, the body never sent.
        reply = raw_exchange(self.server.http_port, b"POST /v2/models/mmoe/infer HTTP/1.1\r\nHost: x\r\n"
                             b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (1 << 40), read_until=b"}")
        self.assertTrue(reply.startswith(b"HTTP/1.1 413"), reply)

    def test_chunked_and_pipelined_requests(self):
        half = len(self.good) // 2
        chunked = (b"POST /v2/models/mmoe/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                   b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, self.good[:half], len(self.good) - half, self.good[half:]))
        pipelined = chunked + http_request_bytes("/v2/models/mmoe/infer", self.good) + b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
        reply = raw_exchange(self.server.http_port, pipelined, read_until=b"HTTP/1.1 200 OK\r\nServer: rankd\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        self.assertEqual(reply.count(b"HTTP/1.1 200"), 3, reply[:400])
        self.assertEqual(reply.count(b'"model_name":"mmoe"'), 2)

    def test_a_body_in_pieces_and_a_body_cut_short(self):
        # A Content-Length body is read straight into the request: its first bytes arrive with the
        # header, the rest in pieces, the last piece in one write with the next request.
        whole = http_request_bytes("/v2/models/mmoe/infer", self.good)
        body_at = whole.index(b"\r\n\r\n") + 4
        half = body_at + len(self.good) // 2
        pieces = [whole[:body_at + 7], whole[body_at + 7:half],
                  whole[half:] + b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"]
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10) as sock:
            for piece in pieces:
                sock.sendall(piece)
                time.sleep(0.05)
            reply = b""
            while reply.count(b"HTTP/1.1 200") < 2 or not reply.endswith(b"{}"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
        self.assertEqual(reply.count(b"HTTP/1.1 200"), 2, reply[:400])
        self.assertEqual(reply.count(b'"model_name":"mmoe"'), 1)
        # A client that sends half its body and leaves: the server serves on.
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10) as sock:
            sock.sendall(whole[:half])
        self.assert_serving()

    def test_malformed_header_length_is_refused_and_counted(self):
        label = '{model="mmoe",version="1"}'
        before = scrape(self.server).get("nv_inference_request_failure" + label, 0)
        for value in ["225abc", "-1", "", "99999999999999999999999", "0x10"]:
            status, data, _ = self.server.request("POST", "/v2/models/mmoe/infer", self.good,
                                                  headers={"Inference-Header-Content-Length": value})
            self.assertEqual(status, 400, value)
            self.assertIn("Inference-Header-Content-Length", json.loads(data)["error"])
        self.assertEqual(scrape(self.server)["nv_inference_request_failure" + label], before + 5)
        status, _, _ = self.server.request("POST", "/v2/models/mmoe/infer", self.good,
                                           headers={"Inference-Header-Content-Length": str(len(self.good))})
        self.assertEqual(status, 200)

    def test_bad_framing_gets_400(self):
        for bad in [b"GARBAGE\r\n\r\n", b"POST /v2/models/mmoe/infer HTTP/1.1\r\nContent-Length: 12x\r\n\r\n",
                    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", b"GET / HTTP/1.1\r\nBad Header\r\n\r\n"]:
            reply = raw_exchange(self.server.http_port, bad, read_until=b"}")
            self.assertTrue(reply.startswith(b"HTTP/1.1 400"), (bad, reply))
        reply = raw_exchange(self.server.http_port, b"GET / HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", read_until=b"}")
        self.assertTrue(reply.startswith(b"HTTP/1.1 431"), reply[:100])
        self.assert_serving()

    def test_idle_and_slow_connections_are_closed(self):
        idle = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10)
        slow = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10)
        slow.sendall(b"GET /v2/health/live HTTP/1.1\r\nHo")
        start = time.time()
        self.assertEqual(idle.recv(100), b"")  # closed by the server
        self.assertEqual(slow.recv(100), b"")
        self.assertLess(time.time() - start, 6)
        idle.close()
        slow.close()
        self.assert_serving()

    def test_connections_over_the_cap_are_refused_cleanly(self):
        held = [socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5) for _ in range(48)]
        try:
            # The server accepts the 48 one at a time; on a slow machine (AddressSanitizer on 2
            # cores) it may still be counting them when the next arrives, which it then serves as
            # an ordinary connection (idle, it says nothing). Ask again until the cap is in force.
            deadline = time.time() + 10
            while True:
                extra = raw_exchange(self.server.http_port, b"", read_until=b"}", timeout=0.5)
                if extra or time.time() > deadline:
                    break
                time.sleep(0.1)
            self.assertTrue(extra.startswith(b"HTTP/1.1 503"), extra)
            self.assertIn(b"too many connections", extra)
        finally:
            for s in held:
                s.close()
        time.sleep(0.2)
        self.assert_serving()


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


class LargeBodyTest(unittest.TestCase):
    @unittest.skipIf(os.environ.get("RANKD_SANITIZED"), "memory is not measured under AddressSanitizer")
    def test_memory_for_a_large_json_body_is_a_small_multiple_of_it(self):
        repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "mmoe"), os.path.join(repo, "mmoe"))
        server = Server(repo, "--max-body-mb", "256")
        try:
            status, _ = server.json("POST", "/v2/models/mmoe/infer", lines("mmoe", "requests")[4])
            self.assertEqual(status, 200)
            before = peak_rss(server.proc.pid)
            rows = 300000  # 6 M ids: past the rows a request may have, so it is refused after parsing
            body = json.dumps({"inputs": [
                {"name": "sparse", "datatype": "INT64", "shape": [rows, 20], "data": [17] * (rows * 20)},
                {"name": "dense", "datatype": "FP32", "shape": [rows, 10], "data": [0.5] * (rows * 10)}]}).encode()
            start = time.time()
            status, data, _ = server.request("POST", "/v2/models/mmoe/infer", body, timeout=120)
            took = time.time() - start
            self.assertEqual(status, 400, data[:300])
            growth = peak_rss(server.proc.pid) - before
            # A DOM of the body took 18 times its size (a 57 MB body peaked at 1.26 GB).
            self.assertLess(growth, 6 * len(body), f"peak grew {growth >> 20} MB for a {len(body) >> 20} MB body")
            self.assertLess(took, 10)
            status, _ = server.json("POST", "/v2/models/mmoe/infer", lines("mmoe", "requests")[4])
            self.assertEqual(status, 200)
        finally:
            server.stop()
            shutil.rmtree(repo)


class DescriptorExhaustionTest(unittest.TestCase):
    def test_out_of_descriptors_refuses_without_spinning(self):
        repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "mmoe"), os.path.join(repo, "mmoe"))
        limit = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))
        server = Server(repo, preexec_fn=limit)
        held = []
        try:
            for _ in range(220):
                held.append(socket.create_connection(("127.0.0.1", server.http_port), timeout=5))
            time.sleep(0.5)
            cpu = cpu_seconds(server.proc.pid)
            time.sleep(2)
            self.assertLess(cpu_seconds(server.proc.pid) - cpu, 0.5, "the accept loop spins")
            # The connections past the limit are refused one each 20 ms, oldest first: wait up to
            # 10 s for any of them to answer, and count the 503s.
            refused, waiting, deadline = 0, list(held), time.time() + 10
            while waiting and time.time() < deadline and refused < 40:
                readable, _, _ = select.select(waiting, [], [], 0.5)
                for s in readable:
                    waiting.remove(s)
                    try:
                        if s.recv(200).startswith(b"HTTP/1.1 503"):
                            refused += 1
                    except OSError:
                        pass
            self.assertGreater(refused, 0)
        finally:
            for s in held:
                s.close()
        time.sleep(0.5)
        try:
            status, _ = server.json("POST", "/v2/models/mmoe/infer", lines("mmoe", "requests")[0])
        except OSError as e:  # once seen under ASan on a loaded machine: say whether the server lived
            state = "is running" if server.proc.poll() is None else f"exited with {server.proc.returncode}"
            self.fail(f"{e}; the server {state}; its log ends:\n{server.output()[-3000:]}")
        self.assertEqual(status, 200)
        self.assertEqual(server.stop(), 0)
        shutil.rmtree(repo)


class ModelFilesTest(unittest.TestCase):
    """A model whose tables are external data, served while its files are truncated, rewritten and
    replaced on disk."""

    def setUp(self):
        if onnx_pb2() is None:
            self.skipTest("python3-grpc-tools not installed")
        self.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "mmoe"), os.path.join(self.repo, "mmoe"))
        self.onnx = os.path.join(self.repo, "mmoe", "1", "model.onnx")
        self.data = self.onnx + ".data"
        self.assertGreater(externalize(self.onnx), 40000)
        with open(self.data, "rb") as f:
            self.original = f.read()
        self.server = Server(self.repo, "--model-control-mode", "explicit", "--load-model", "mmoe")
        self.body = lines("mmoe", "requests")[4]
        self.expected = self.infer()[1]

    def tearDown(self):
        self.server.stop()
        shutil.rmtree(self.repo)

    def infer(self):
        status, got = self.server.json("POST", "/v2/models/mmoe/infer", self.body)
        return status, got

    def test_truncated_file_fails_requests_and_never_crashes(self):
        with open(self.data, "r+b") as f:
            f.truncate(0)
        for _ in range(3):
            status, got = self.infer()
            self.assertEqual(status, 503, got)
            self.assertIn("model.onnx.data", got["error"])
        self.assertIsNone(self.server.proc.poll())
        # Readiness says so, for the model and the server (an orchestrator can act on it).
        self.assertEqual(self.server.request("GET", "/v2/models/mmoe/ready")[0], 503)
        self.assertEqual(self.server.request("GET", "/v2/health/ready")[0], 503)
        _, index = self.server.json("POST", "/v2/repository/index")
        self.assertEqual(index[0]["state"], "UNAVAILABLE")
        self.assertIn("model.onnx.data", index[0]["reason"])
        with open(self.data, "r+b") as f:  # written back: a reload serves again
            f.write(self.original)
        self.assertEqual(self.server.request("POST", "/v2/repository/models/mmoe/load")[0], 200)
        self.assertEqual(self.infer(), (200, self.expected))
        self.assertEqual(self.server.request("GET", "/v2/health/ready")[0], 200)

    def test_rewritten_in_place_never_changes_scores_silently(self):
        time.sleep(0.02)
        with open(self.data, "r+b") as f:
            f.write(bytes(len(self.original)))  # same size, other bytes
        status, got = self.infer()
        self.assertEqual(status, 503, got)
        self.assertIn("changed on disk", got["error"])

    def test_replaced_by_rename_serves_the_loaded_version(self):
        with open(self.data + ".new", "wb") as f:
            f.write(bytes(len(self.original)))
        os.rename(self.data + ".new", self.data)
        self.assertEqual(self.infer(), (200, self.expected))


class StartupAndRepositoryTest(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "mmoe"), os.path.join(self.repo, "mmoe"))

    def tearDown(self):
        shutil.rmtree(self.repo)

    def test_ports_are_exclusive(self):
        first = Server(self.repo)
        try:
            for flag, port in (("--grpc-port", first.grpc_port), ("--http-port", first.http_port)):
                args = {"--http-port": "0", "--grpc-port": "0", "--metrics-port": "0", flag: str(port)}
                second = subprocess.run([serving_harness.RANKD, "serve", "--model-repository", self.repo, "--http-address", "127.0.0.1",
                                         *[x for kv in args.items() for x in kv]], capture_output=True, timeout=60)
                self.assertEqual(second.returncode, 2, second.stderr)
                self.assertIn(b"listen", second.stderr)
        finally:
            first.stop()

    def test_loading_an_absent_name_keeps_the_server_ready(self):
        s = Server(self.repo, "--model-control-mode", "explicit", "--load-model", "mmoe")
        try:
            self.assertEqual(s.request("GET", "/v2/health/ready")[0], 200)
            self.assertEqual(s.request("POST", "/v2/repository/models/nosuch/load")[0], 404)
            self.assertEqual(s.request("POST", "/v2/repository/models/%2e%2e/load")[0] // 100, 4)
            self.assertEqual(s.request("GET", "/v2/health/ready")[0], 200)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_strict_readiness_off_is_ready_with_a_failed_model(self):
        os.makedirs(os.path.join(self.repo, "broken", "1"))
        with open(os.path.join(self.repo, "broken", "1", "model.onnx"), "wb") as f:
            f.write(b"garbage")
        strict = Server(self.repo)
        try:
            self.assertEqual(strict.request("GET", "/v2/health/ready")[0], 503)
            self.assertEqual(strict.request("GET", "/v2/models/mmoe/ready")[0], 200)
        finally:
            strict.stop()
        lenient = Server(self.repo, "--strict-readiness", "false")
        try:
            self.assertEqual(lenient.request("GET", "/v2/health/ready")[0], 200)
        finally:
            lenient.stop()

    def test_grpc_health_service_follows_readiness(self):
        # grpc.health.v1.Health/Check, called with hand-encoded messages (an independent client: the
        # request {service} is field 1, the answer's status field 1: 1 SERVING, 2 NOT_SERVING).
        try:
            import grpc
        except ImportError:
            self.skipTest("python3-grpcio not installed")
        os.makedirs(os.path.join(self.repo, "broken", "1"))
        with open(os.path.join(self.repo, "broken", "1", "model.onnx"), "wb") as f:
            f.write(b"garbage")
        s = Server(self.repo, "--model-control-mode", "poll", "--repository-poll-secs", "1")
        channel = grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}")
        try:
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            named = b"\x0a\x1einference.GRPCInferenceService"
            self.assertEqual(s.request("GET", "/v2/health/ready")[0], 503)
            self.assertEqual(check(b"", timeout=10), b"\x08\x02")
            self.assertEqual(check(named, timeout=10), b"\x08\x02")
            with self.assertRaises(grpc.RpcError) as e:
                check(b"\x0a\x04nope", timeout=10)
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
            shutil.rmtree(os.path.join(self.repo, "broken"))  # the next poll drops it: ready again
            deadline = time.time() + 20
            while s.request("GET", "/v2/health/ready")[0] != 200 and time.time() < deadline:
                time.sleep(0.1)
            self.assertEqual(s.request("GET", "/v2/health/ready")[0], 200)
            while check(b"", timeout=10) != b"\x08\x01" and time.time() < deadline:
                time.sleep(0.05)
            self.assertEqual(check(b"", timeout=10), b"\x08\x01")
            self.assertEqual(check(named, timeout=10), b"\x08\x01")
        finally:
            channel.close()
            self.assertEqual(s.stop(), 0)

    def test_poll_mode_reports_a_broken_version(self):
        s = Server(self.repo, "--model-control-mode", "poll", "--repository-poll-secs", "1")
        try:
            os.makedirs(os.path.join(self.repo, "mmoe", "2"))
            with open(os.path.join(self.repo, "mmoe", "2", "model.onnx"), "wb") as f:
                f.write(b"garbage")
            deadline = time.time() + 15
            entry = None
            while time.time() < deadline and entry is None:
                time.sleep(0.3)
                _, index = s.json("POST", "/v2/repository/index")
                entry = next((e for e in index if e.get("version") == "2"), None)
            self.assertIsNotNone(entry, index)
            self.assertEqual(entry["state"], "UNAVAILABLE")
            self.assertIn("protobuf", entry["reason"])
            self.assertIn("mmoe version 2 failed to load", s.output())
            self.assertEqual(scrape(s)['rankd_model_load_failures{model="mmoe"}'], 1)
            status, got = s.json("POST", "/v2/models/mmoe/infer", lines("mmoe", "requests")[0])
            self.assertEqual((status, got["model_version"]), (200, "1"))
            time.sleep(2.5)  # later polls do not retry or report the unchanged version
            self.assertEqual(scrape(s)['rankd_model_load_failures{model="mmoe"}'], 1)
        finally:
            self.assertEqual(s.stop(), 0)


class GrpcLimitsTest(unittest.TestCase):
    def setUp(self):
        stubs = serving_harness.grpc_stubs()
        if stubs is None:
            self.skipTest("python3-grpcio / python3-grpc-tools not installed")
        import grpc
        self.grpc = grpc
        self.pb, self.pb_grpc = stubs
        self.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "mmoe"), os.path.join(self.repo, "mmoe"))

    def tearDown(self):
        shutil.rmtree(self.repo)

    def stub(self, server):
        channel = self.grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        return channel, self.pb_grpc.GRPCInferenceServiceStub(channel)

    def test_declared_shape_is_checked_before_allocating(self):
        server = Server(self.repo)
        channel, stub = self.stub(server)
        try:
            pb = self.pb
            req = pb.ModelInferRequest(model_name="mmoe")
            req.inputs.add(name="dense", datatype="FP32", shape=[1 << 20, 64])  # 67 M values, none sent
            self.assertLess(req.ByteSize(), 64)
            start = time.time()
            for _ in range(20):
                with self.assertRaises(self.grpc.RpcError) as e:
                    stub.ModelInfer(req, timeout=10)
                self.assertEqual(e.exception.code(), self.grpc.StatusCode.INVALID_ARGUMENT)
            self.assertLess(time.time() - start, 2.0)  # 268 MB zero-filled per call took 1.3 s each
            req.raw_input_contents.append(b"\0" * 16)
            with self.assertRaises(self.grpc.RpcError) as e:
                stub.ModelInfer(req, timeout=10)
            self.assertIn("the request holds 16 bytes", e.exception.details())
        finally:
            channel.close()
            server.stop()

    def test_large_max_body_mb_keeps_grpc_working(self):
        server = Server(self.repo, "--max-body-mb", "4096")
        channel, stub = self.stub(server)
        try:
            self.assertTrue(stub.ServerLive(self.pb.ServerLiveRequest()).live)
            self.assertTrue(stub.ModelReady(self.pb.ModelReadyRequest(name="mmoe")).ready)
        finally:
            channel.close()
            server.stop()

    def test_int8_values_out_of_range_are_refused_as_in_json(self):
        server = Server(self.repo)
        channel, stub = self.stub(server)
        try:
            req = self.pb.ModelInferRequest(model_name="mmoe")
            t = req.inputs.add(name="dense", datatype="INT8", shape=[1])
            t.contents.int_contents.append(300)
            with self.assertRaises(self.grpc.RpcError) as e:
                stub.ModelInfer(req, timeout=10)
            self.assertEqual(e.exception.code(), self.grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("out of range", e.exception.details())
        finally:
            channel.close()
            server.stop()


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
