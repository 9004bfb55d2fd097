"""What reading a request body costs the HTTP server, by body size.

  /usr/bin/python3 bench/http_body_cost.py [--rankd build/rankd] [--sizes 1000,100000,1000000,10000000]
      [--requests 200] [--server-cpus 0 --client-cpus 1]

Starts `rankd serve` on the zoo, then over one keep-alive connection POSTs each size's body
(`{"inputs":[]}` and spaces) to a model that does not exist: the server reads the whole body,
then answers 404, so what it spends is reading. Prints the server's CPU time per request (from
/proc/PID/stat) and the client's time per request. Server and client may be pinned apart.
"""
import argparse
import http.client
import os
import subprocess
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
from procs import cpu_seconds, free_port  # noqa: E402




def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rankd", default=os.path.join(ROOT, "build", "rankd"))
    p.add_argument("--sizes", default="1000,100000,1000000,10000000")
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--server-cpus", default="")
    p.add_argument("--client-cpus", default="")
    a = p.parse_args()
    if a.client_cpus:
        os.sched_setaffinity(0, {int(c) for c in a.client_cpus.split(",")})
    http_port, metrics_port = free_port(), free_port()
    pin = ["taskset", "-c", a.server_cpus] if a.server_cpus else []
    log = tempfile.TemporaryFile()
    server = subprocess.Popen(pin + a.rankd.split() + ["serve", "--model-repository", os.path.join(ROOT, "models", "zoo"),
                                                        "--backend", "cpu", "--http-address", "127.0.0.1", "--http-port",
                                                        str(http_port), "--metrics-port", str(metrics_port),
                                                        "--grpc-port", "-1", "--model-control-mode", "explicit"],
                              stdout=log, stderr=log)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v2/health/live", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        print("| body bytes | requests | server CPU µs per request | client ms per request |")
        print("| --- | --- | --- | --- |")
        for size in (int(s) for s in a.sizes.split(",")):
            body = b'{"inputs":[]}' + b" " * (size - 13)
            conn = http.client.HTTPConnection("127.0.0.1", http_port)
            cpu, start = cpu_seconds(server.pid), time.perf_counter()
            for _ in range(a.requests):
                conn.request("POST", "/v2/models/absent/infer", body=body, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                assert r.status == 404, r.status
            elapsed, cpu = time.perf_counter() - start, cpu_seconds(server.pid) - cpu
            conn.close()
            print(f"| {size:,} | {a.requests} | {cpu / a.requests * 1e6:.0f} | {elapsed / a.requests * 1e3:.2f} |")
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
