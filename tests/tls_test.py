"""TLS on both ports, with a self-signed certificate openssl makes: HTTPS (--http-use-ssl) and gRPC
over TLS (--grpc-use-ssl). Clients trusting the certificate are served, plain-text ones are not, and
a missing certificate or key stops the start with the flag named.

  /usr/bin/python3 tests/tls_test.py RANKD_BINARY SOURCE_DIR
"""
import http.client
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import unittest

from serving_harness import RANKD, ZOO, Server, grpc_stubs, lines, rel_error


def make_certificate(folder):
    """A self-signed certificate for localhost and 127.0.0.1, and its key: (cert path, key path)."""
    cert, key = os.path.join(folder, "server.pem"), os.path.join(folder, "server.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@unittest.skipIf(shutil.which("openssl") is None, "openssl not installed")
class HttpsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "mmoe"), os.path.join(cls.repo, "mmoe"))
        cls.cert, cls.key = make_certificate(cls.repo)
        cls.server = Server(cls.repo, "--http-use-ssl", "true", "--http-server-cert", cls.cert,
                            "--http-server-key", cls.key, https_ca=cls.cert)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def test_https_clients_are_served_and_plain_ones_are_not(self):
        s = self.server
        for req, want in zip(lines("mmoe", "requests")[:3], lines("mmoe", "expected")[:3]):
            status, got = s.json("POST", "/v2/models/mmoe/infer", req)
            self.assertEqual(status, 200, got)
            for o, w in zip(got["outputs"], want["outputs"]):
                self.assertLessEqual(rel_error(o["data"], w["data"]), 1e-5)
        # Plain HTTP on the HTTPS port is not answered as HTTP: the handshake fails and it closes.
        conn = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10)
        with self.assertRaises((http.client.HTTPException, OSError)):
            conn.request("GET", "/v2/health/live")
            conn.getresponse().read()
        conn.close()
        # A client that does not trust the certificate refuses the server.
        untrusting = http.client.HTTPSConnection("127.0.0.1", s.http_port, timeout=10,
                                                 context=ssl.create_default_context())
        with self.assertRaises(ssl.SSLError):
            untrusting.request("GET", "/v2/health/live")
        untrusting.close()
        # A client that connects and says nothing holds no request; the server serves on.
        with socket.create_connection(("127.0.0.1", s.http_port), timeout=10):
            self.assertEqual(s.request("GET", "/v2/health/live")[0], 200)
        self.assertEqual(s.request("GET", "/v2/models/mmoe")[0], 200)

    def test_a_missing_certificate_or_key_stops_the_start(self):
        base = [RANKD, "serve", "--model-repository", self.repo, "--http-port", "0", "--grpc-port", "0",
                "--metrics-port", "0", "--http-use-ssl", "true"]
        for extra, flag in [(["--http-server-cert", self.cert, "--http-server-key", os.path.join(self.repo, "absent")],
                             "--http-server-key"),
                            (["--http-server-cert", os.path.join(self.repo, "absent"), "--http-server-key", self.key],
                             "--http-server-cert"),
                            (["--http-server-cert", self.cert], "--http-server-key")]:
            proc = subprocess.run(base + extra, capture_output=True, text=True, timeout=120)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn(flag, proc.stderr)


class GrpcTlsTest(unittest.TestCase):
    """gRPC over TLS (--grpc-use-ssl with a self-signed certificate openssl makes): a client trusting
    the certificate is served, a plain-text client is not; a missing key file stops the start."""

    @classmethod
    def setUpClass(cls):
        stubs = grpc_stubs()
        if stubs is None or shutil.which("openssl") is None:
            raise unittest.SkipTest("python3-grpcio / python3-grpc-tools or openssl not installed")
        import grpc
        cls.grpc = grpc
        cls.pb, cls.pb_grpc = stubs
        cls.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "mmoe"), os.path.join(cls.repo, "mmoe"))
        cls.cert, cls.key = make_certificate(cls.repo)
        cls.server = Server(cls.repo, "--grpc-use-ssl", "true", "--grpc-server-cert", cls.cert,
                            "--grpc-server-key", cls.key)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def test_tls_clients_are_served_and_plain_ones_are_not(self):
        grpc, pb = self.grpc, self.pb
        with open(self.cert, "rb") as f:
            trusted = grpc.ssl_channel_credentials(root_certificates=f.read())
        address = f"localhost:{self.server.grpc_port}"
        with grpc.secure_channel(address, trusted) as channel:
            stub = self.pb_grpc.GRPCInferenceServiceStub(channel)
            self.assertTrue(stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live)
        with grpc.insecure_channel(address) as channel:
            with self.assertRaises(grpc.RpcError) as e:
                self.pb_grpc.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest(), timeout=10)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_a_missing_key_stops_the_start(self):
        proc = subprocess.run([RANKD, "serve", "--model-repository", self.repo, "--http-port", "0", "--grpc-port", "0",
                               "--metrics-port", "0", "--grpc-use-ssl", "true", "--grpc-server-cert", self.cert,
                               "--grpc-server-key", os.path.join(self.repo, "absent.key")],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--grpc-server-key", proc.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
