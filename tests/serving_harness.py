"""The served tests' harness: `rankd serve` on ports of its own over real sockets, with Python's standard
library (and, where Debian has them, gRPC stubs generated from rankd's .proto) as independent clients.

Test scripts take the rankd binary and the source directory as their arguments:

  /usr/bin/python3 tests/SCRIPT.py RANKD_BINARY SOURCE_DIR
"""
import http.client
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

RANKD = sys.argv[1] if len(sys.argv) > 1 else "build/rankd"
SRC = sys.argv[2] if len(sys.argv) > 2 else "."
ZOO = os.path.join(SRC, "models", "zoo")
DATA = os.path.join(SRC, "tests", "data", "zoo")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A `rankd serve` on ports it picks itself (port 0), read back from its "serving HTTP on" line, so that
    no other process can take a port between choosing and binding it."""

    LISTENING = re.compile(r"serving HTTP on [^:]+:(\d+), gRPC on [^:]+:(-?\d+), metrics on [^:]+:(\d+)")

    # How long a call may wait for a frontend worker before it is refused as overload: unbounded unless a
    # test sets it. CI's 2 cores running tests side by side delay a worker past the served 20 ms (51 ms
    # seen), and a refusal there is not what a test that is not about overload checks (OverloadTest and
    # async_core_test's shedding tests set their own bounds).
    QUEUE_BOUNDS = {"--http-max-queue-ms": "600000", "--grpc-max-queue-ms": "600000"}

    def __init__(self, repo, *extra, https_ca=None, **popen):
        self.https_ca = https_ca  # with --http-use-ssl: the certificate the HTTP port presents, trusted
        self.log = tempfile.TemporaryFile()
        bounds = [arg for flag, value in self.QUEUE_BOUNDS.items() if flag not in extra for arg in (flag, value)]
        self.proc = subprocess.Popen([RANKD, "serve", "--model-repository", repo, "--http-address", "127.0.0.1",
                                      "--http-port", "0", "--metrics-port", "0", "--grpc-port", "0", *bounds,
                                      *extra],
                                     stdout=self.log, stderr=self.log, **popen)
        deadline = time.time() + 30
        while time.time() < deadline and self.proc.poll() is None:
            found = self.LISTENING.search(self.output())
            if found:
                self.http_port, self.grpc_port, self.metrics_port = (int(g) for g in found.groups())
                try:
                    if self.request("GET", "/v2/health/live")[0] == 200:
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("server did not start: " + self.output())

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def request(self, method, path, body=None, headers=None, port=None, timeout=30):
        if self.https_ca and not port:
            import ssl
            conn = http.client.HTTPSConnection("127.0.0.1", self.http_port, timeout=timeout,
                                               context=ssl.create_default_context(cafile=self.https_ca))
        else:
            conn = http.client.HTTPConnection("127.0.0.1", port or self.http_port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.read(), dict(r.getheaders())
        finally:
            conn.close()

    def json(self, method, path, body=None):
        status, data, _ = self.request(method, path, None if body is None else json.dumps(body))
        return status, json.loads(data) if data else None

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __del__(self):
        self.log.close()


def flatten(data):
    """Nested lists' values in row-major order."""
    flat, stack = [], [data]
    while stack:
        x = stack.pop(0)
        if isinstance(x, list):
            stack = x + stack
        else:
            flat.append(x)
    return flat


def lines(name, kind):
    with open(os.path.join(DATA, f"{name}.{kind}.jsonl")) as f:
        return [json.loads(l) for l in f]


def rel_error(got, want):
    num = math.sqrt(sum((a - b) ** 2 for a, b in zip(got, want)))
    return num / max(math.sqrt(sum(b * b for b in want)), 1e-30)


def enable_batching(model_dir, knobs="max_queue_delay_microseconds: 2000"):
    """Appends a batching section to the model's config (creating the config when absent)."""
    with open(os.path.join(model_dir, "config.yaml"), "a") as f:
        f.write("\nbatching: {%s}\n" % knobs)


def random_din_request(rng, rows, length):
    ids = lambda n: [rng.randrange(40) for _ in range(n)]
    return {"inputs": [
        {"name": "profile", "datatype": "INT64", "shape": [1, 8], "data": ids(8)},
        {"name": "seq_items", "datatype": "INT64", "shape": [length], "data": ids(length), "parameters": {"lengths": [length]}},
        {"name": "seq_cats", "datatype": "INT64", "shape": [length], "data": ids(length), "parameters": {"lengths": [length]}},
        {"name": "item", "datatype": "INT64", "shape": [rows], "data": ids(rows)},
        {"name": "cat", "datatype": "INT64", "shape": [rows], "data": ids(rows)},
        {"name": "context", "datatype": "INT64", "shape": [rows, 6], "data": ids(rows * 6)}]}


def scrape(server):
    status, text, _ = server.request("GET", "/metrics", port=server.metrics_port)
    assert status == 200
    metrics = {}
    for line in text.decode().splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            metrics[key] = float(value)
    return metrics


def grpc_stubs():
    """Python client stubs generated from rankd's .proto by Debian's grpc_tools, or None."""
    try:
        import grpc  # noqa: F401
        from grpc_tools import protoc
    except ImportError:
        return None
    out = tempfile.mkdtemp()
    proto_dir = os.path.join(SRC, "proto")
    if protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + out, "--grpc_python_out=" + out,
                    os.path.join(proto_dir, "grpc_service.proto"), os.path.join(proto_dir, "model_config.proto")]) != 0:
        raise RuntimeError("grpc_tools.protoc failed")
    sys.path.insert(0, out)
    import grpc_service_pb2
    import grpc_service_pb2_grpc
    return grpc_service_pb2, grpc_service_pb2_grpc


class GrpcServerCase(unittest.TestCase):
    """A server over a copy of MODELS (started with SERVER_ARGS) and a gRPC stub to it."""
    MODELS = ["din"]
    SERVER_ARGS = ()

    @classmethod
    def setUpClass(cls):
        stubs = grpc_stubs()
        if stubs is None:
            raise unittest.SkipTest("python3-grpcio / python3-grpc-tools not installed")
        import grpc
        cls.grpc = grpc
        cls.pb, pb_grpc = stubs
        cls.repo = tempfile.mkdtemp()
        for name in cls.MODELS:
            shutil.copytree(os.path.join(ZOO, name), os.path.join(cls.repo, name))
        cls.server = Server(cls.repo, *cls.SERVER_ARGS)
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.server.grpc_port}")
        cls.stub = pb_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        shutil.rmtree(cls.repo)
