"""Per-request overhead of rankd serve over HTTP and gRPC, open loop at a fixed rate.

  /usr/bin/python3 bench/serve_overhead.py [--rankd build/rankd] [--rates 100,500] [--seconds 10]

Starts `rankd serve` on the tiny zoo models, then for each protocol and rate sends one small
request (mmoe, 1 row) on a fixed schedule (request i at i/rate seconds, not waiting for answers:
open loop) from several client threads with persistent connections. Latency is measured from the
scheduled send time to the answer, so client-side queueing counts against us, never for us.
Prints p50/p90/p99 and the achieved rate. The client is Python: its own cost (tens of
microseconds) is inside every figure.
"""
import argparse
import http.client
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
from procs import free_port  # noqa: E402



def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def run_open_loop(send_factory, rate, seconds, threads=8):
    """send_factory() -> send(); each send() performs one request and raises on failure."""
    jobs = queue.Queue()
    lat, errors, lock = [], [0], threading.Lock()

    def worker():
        send = send_factory()
        while True:
            t = jobs.get()
            if t is None:
                return
            delay = t - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            try:
                send()
                with lock:
                    lat.append((time.perf_counter() - t) * 1e6)
            except Exception:  # noqa: BLE001 - counted, reported
                with lock:
                    errors[0] += 1

    ws = [threading.Thread(target=worker) for _ in range(threads)]
    for w in ws:
        w.start()
    start = time.perf_counter() + 0.2
    n = int(rate * seconds)
    for i in range(n):
        jobs.put(start + i / rate)
    for _ in ws:
        jobs.put(None)
    for w in ws:
        w.join()
    elapsed = time.perf_counter() - start
    return lat, errors[0], len(lat) / elapsed


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rankd", default=os.path.join(ROOT, "build", "rankd"))
    p.add_argument("--rates", default="100,500")
    p.add_argument("--seconds", type=float, default=10)
    a = p.parse_args()
    http_port, grpc_port, metrics_port = free_port(), free_port(), free_port()
    log = tempfile.TemporaryFile()
    server = subprocess.Popen([a.rankd, "serve", "--model-repository", os.path.join(ROOT, "models", "zoo"),
                               "--http-address", "127.0.0.1", "--http-port", str(http_port), "--grpc-port",
                               str(grpc_port), "--metrics-port", str(metrics_port)], stdout=log, stderr=log)
    try:
        for _ in range(200):
            try:
                c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=1)
                c.request("GET", "/v2/health/ready")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.05)
        with open(os.path.join(ROOT, "tests", "data", "zoo", "mmoe.requests.jsonl")) as f:
            body_json = json.loads(f.readline())  # one row
        body = json.dumps(body_json)

        def http_factory():
            conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)

            def send():
                conn.request("POST", "/v2/models/mmoe/infer", body=body)
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    raise RuntimeError(r.status)
            return send

        factories = {"HTTP/JSON": http_factory}
        try:
            import grpc
            from grpc_tools import protoc
            out = tempfile.mkdtemp()
            protoc.main(["protoc", "-I" + os.path.join(ROOT, "proto"), "--python_out=" + out, "--grpc_python_out=" + out,
                         os.path.join(ROOT, "proto", "grpc_service.proto"), os.path.join(ROOT, "proto", "model_config.proto")])
            sys.path.insert(0, out)
            import grpc_service_pb2 as pb
            import grpc_service_pb2_grpc as svc
            req = pb.ModelInferRequest(model_name="mmoe")
            for i in body_json["inputs"]:
                t = req.inputs.add(name=i["name"], datatype=i["datatype"], shape=i["shape"])
                (t.contents.fp32_contents if i["datatype"] == "FP32" else t.contents.int64_contents).extend(i["data"])

            def grpc_factory():
                stub = svc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{grpc_port}"))
                return lambda: stub.ModelInfer(req)
            factories["gRPC"] = grpc_factory
        except ImportError:
            print("gRPC client not installed: HTTP only", file=sys.stderr)

        print("| protocol | offered req/s | achieved req/s | p50 µs | p90 µs | p99 µs | errors |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for name, factory in factories.items():
            run_open_loop(factory, 200, 1)  # warm-up
            for rate in [float(r) for r in a.rates.split(",")]:
                lat, errors, achieved = run_open_loop(factory, rate, a.seconds)
                print(f"| {name} | {rate:.0f} | {achieved:.0f} | {percentile(lat, 0.5):.0f} | {percentile(lat, 0.9):.0f} | "
                      f"{percentile(lat, 0.99):.0f} | {errors} |")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


if __name__ == "__main__":
    main()
