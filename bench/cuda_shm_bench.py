#!/usr/bin/python3
"""Requests whose every input lies in CUDA shared memory (Triton's cuda_shared_memory extension), as a
co-located caller that made its features on the GPU sends them: the server's CPU a request and the
latency, against the same requests with their tensors in the HTTP body (binary extension).

The client allocates one device buffer with CuPy, writes every request's inputs into it (64-byte
aligned), exports it with cudaIpcGetMemHandle and registers it over HTTP; each request's JSON body
then names its inputs' places (the ragged ids flat, their lengths as a parameter) and a place of
its own sending thread for the scores. `--threads` threads each keep one request in flight over
their own connection (closed loop) for `--seconds`; the server's CPU time is read from
/proc/PID/stat around the timed window. Needs a GPU and CuPy (the lent GPU machine).

  /usr/bin/python3 bench/cuda_shm_bench.py --rankd ".bundle/run rankd" --repo bench/out/load_repo \\
      --model dlrm_dcnv2_full --requests bench/out/load_dlrm_dcnv2_full.jsonl --server-cpus 0-7 --client-cpus 8-15
"""
import argparse
import base64
import http.client
import json
import os
import struct
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import cpu_seconds, free_port  # noqa: E402


def call(conn, method, path, body=None, headers=None):
    conn.request(method, path, body, headers or {})
    r = conn.getresponse()
    return r.status, r.read()


def binary_body(request):
    """The request in the binary extension: a JSON header naming each input's bytes, then the bytes."""
    header, blobs = {"id": request.get("id", ""), "inputs": [], "outputs": [{"name": "score",
                                                                            "parameters": {"binary_data": True}}]}, []
    for i in request["inputs"]:
        fmt = "<%df" if i["datatype"] == "FP32" else "<%dq"
        blob = struct.pack(fmt % len(i["data"]), *i["data"])
        params = dict(i.get("parameters", {}), binary_data_size=len(blob))
        header["inputs"].append({"name": i["name"], "datatype": i["datatype"], "shape": i["shape"],
                                 "parameters": params})
        blobs.append(blob)
    text = json.dumps(header).encode()
    return text + b"".join(blobs), {"Inference-Header-Content-Length": str(len(text)),
                                    "Content-Type": "application/octet-stream"}


def register_region(conn, places, size):
    """The requests' inputs written into a device buffer of `size` bytes, registered as region "bench"
    (the buffer is kept alive with the module: the server reads it until the run ends)."""
    import cupy
    global MEMORY
    cupy.cuda.set_allocator(None)  # a cudaMalloc of its own: the handle's base is the buffer's
    MEMORY = cupy.zeros(size, dtype=cupy.uint8)
    for place in places:
        for _, offset, data in place:
            if data:
                MEMORY[offset:offset + len(data)] = cupy.asarray(np.frombuffer(data, dtype=np.uint8))
    cupy.cuda.runtime.deviceSynchronize()
    handle = bytes(cupy.cuda.runtime.ipcGetMemHandle(MEMORY.data.ptr))
    status, text = call(conn, "POST", "/v2/cudasharedmemory/region/bench/register", json.dumps(
        {"raw_handle": {"b64": base64.b64encode(handle).decode()}, "device_id": 0, "byte_size": size}))
    assert status == 200, text


MEMORY = None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rankd", required=True, help="command that runs rankd")
    p.add_argument("--repo", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--requests", required=True, help="JSON lines, ragged inputs flat with a lengths parameter")
    p.add_argument("--modes", default="cuda-shm,binary", help="cuda-shm (inputs in device memory), binary (in the body)")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--server-cpus", default="")
    p.add_argument("--client-cpus", default="")
    p.add_argument("--serve-args", default="")
    p.add_argument("--backend", default="cuda", help="the server's (cpu runs the binary mode alone, a check of the script)")
    a = p.parse_args()
    if a.client_cpus:
        os.sched_setaffinity(0, {int(c) for part in a.client_cpus.split(",") for c in
                                 (range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1))})
    with open(a.requests) as f:
        requests = [json.loads(l) for l in f]
    http_port, grpc_port, metrics_port = free_port(), free_port(), free_port()
    cmd = a.rankd.split() + ["serve", "--model-repository", a.repo, "--backend", a.backend, "--http-address", "127.0.0.1",
                             "--http-port", str(http_port), "--grpc-port", str(grpc_port), "--metrics-port",
                             str(metrics_port), "--model-control-mode", "explicit", "--load-model", a.model]
    cmd += a.serve_args.split()
    if a.server_cpus:
        cmd = ["taskset", "-c", a.server_cpus] + cmd
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        conn = None
        for _ in range(1200):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=30)
                if call(conn, "GET", "/v2/health/ready")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        # The inputs of every request in one device buffer, and a place for each thread's scores.
        at, bodies = 0, {"binary": [binary_body(r) for r in requests]}
        places = []
        for r in requests:
            place = []
            for i in r["inputs"]:
                data = np.asarray(i["data"], dtype=np.float32 if i["datatype"] == "FP32" else np.int64).tobytes()
                place.append((i, at, data))
                at += (len(data) + 63) // 64 * 64
            places.append(place)
        rows = max(r["inputs"][0]["shape"][0] for r in requests)
        out_at = at
        size = out_at + a.threads * ((4 * rows + 63) // 64 * 64)
        modes = a.modes.split(",")
        if "cuda-shm" in modes:
            register_region(conn, places, size)

        def region(offset, nbytes):
            return {"shared_memory_region": "bench", "shared_memory_offset": offset, "shared_memory_byte_size": nbytes}
        bodies["cuda-shm"] = [[] for _ in range(a.threads)]
        for t in range(a.threads):
            out = out_at + t * ((4 * rows + 63) // 64 * 64)
            for r, place in zip(requests, places):
                inputs = [{"name": i["name"], "datatype": i["datatype"], "shape": i["shape"],
                           "parameters": dict(i.get("parameters", {}), **region(offset, len(data)))}
                          for i, offset, data in place]
                outputs = [{"name": "score", "parameters": region(out, 4 * r["inputs"][0]["shape"][0])}]
                bodies["cuda-shm"][t].append((json.dumps({"id": r.get("id", ""), "inputs": inputs,
                                                          "outputs": outputs}), {}))
        target = f"/v2/models/{a.model}/infer"
        results = []
        for mode in modes:
            latencies, errors, stop = [], [0], threading.Event()

            def send(t, measured):
                c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=30)
                mine = bodies[mode][t] if mode == "cuda-shm" else bodies[mode]
                k = t
                while not stop.is_set():
                    body, headers = mine[k % len(mine)]
                    k += 1
                    start = time.perf_counter()
                    status, text = call(c, "POST", target, body, headers)
                    if status != 200:
                        errors[0] += 1
                    elif measured.is_set():
                        latencies.append(time.perf_counter() - start)
                c.close()

            measured = threading.Event()
            threads = [threading.Thread(target=send, args=(t, measured)) for t in range(a.threads)]
            for th in threads:
                th.start()
            time.sleep(2)  # warm-up
            cpu0, t0 = cpu_seconds(server.pid), time.perf_counter()
            measured.set()
            time.sleep(a.seconds)
            measured.clear()
            cpu1, t1 = cpu_seconds(server.pid), time.perf_counter()
            stop.set()
            for th in threads:
                th.join()
            n = len(latencies)
            lat = np.sort(np.asarray(latencies)) * 1e3 if n else np.zeros(1)
            results.append({"mode": mode, "requests": n, "rate": n / (t1 - t0), "errors": errors[0],
                            "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
                            "server_cpu_ms_per_request": 1e3 * (cpu1 - cpu0) / max(n, 1)})
        if "cuda-shm" in modes:
            call(conn, "POST", "/v2/cudasharedmemory/region/bench/unregister", "{}")
        print("| inputs | requests | achieved /s | p50 / p99 ms | errors | server CPU ms a request |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in results:
            print("| %s | %d | %.0f | %.3f / %.3f | %d | %.3f |" % (r["mode"], r["requests"], r["rate"], r["p50_ms"],
                                                                 r["p99_ms"], r["errors"],
                                                                 r["server_cpu_ms_per_request"]))
        print(json.dumps(results))
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
