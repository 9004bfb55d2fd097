"""Soak: minutes of mixed good and bad traffic against `rankd serve`, with versions appearing and
disappearing under it, checking that no good request fails, every bad one is refused with a 4xx,
and that resident memory and open descriptors stay flat.

  /usr/bin/python3 bench/soak.py build/rankd [--seconds 300] [--clients 8] [--json out.json]

The server runs in poll mode (1 s) over a temporary copy of the zoo's MMoE and DIN. Clients send, at
random: good JSON and binary requests (checked against each other), malformed JSON, wrong shapes and
dtypes, ids out of range, huge declared shapes, bodies that are not UTF-8, bad framing, clients that
vanish mid-body, idle connections, and (when python3-grpcio is present) good and bad gRPC calls.
Every few seconds a copy of MMoE appears as version 2 or is removed again. Descriptors are read from
/proc after a warm-up and at the end, RSS every quarter second: its peak in the run's second half,
and its value at the end, may not both exceed its peak in the warm-up and the first half by
--max-rss-growth-mb or more (a leak keeps growing, and raises both; memory glibc's per-thread arenas
keep once the batchers and reloads have run does not, and each reload moves RSS by tens of MB
either way: on a loaded 2-core machine the warm-up may not reach them, and a reload in the second
half then lifted its peak 74 MB over the first's while the end stayed below it). Exit 1 when any check fails. tests/CMakeLists.txt
runs it for 20 seconds in CI; docs/serving.md has the figures of a long run.
"""
import argparse
import http.client
import json
import os
import random
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))


def proc_status(pid):
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.violations = []

    def add(self, kind, ok, detail=""):
        with self.lock:
            c = self.counts.setdefault(kind, [0, 0])
            c[0] += 1
            if not ok:
                c[1] += 1
                if len(self.violations) < 20:
                    self.violations.append(f"{kind}: {detail}"[:300])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rankd")
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--json")
    ap.add_argument("--max-rss-growth-mb", type=float, default=64,
                    help="allowed growth of the RSS peak from the warm-up and the run's first half to its second half: a leak grows it, "
                         "memory the allocator keeps once the first loads and batches have run does not "
                         "(sanitizer builds need more)")
    args = ap.parse_args()
    sys.argv = [sys.argv[0], args.rankd, os.path.join(HERE, "..")]
    import serving_harness
    from serving_harness import ZOO, Server, lines

    repo = tempfile.mkdtemp()
    for name in ["mmoe", "din"]:
        shutil.copytree(os.path.join(ZOO, name), os.path.join(repo, name))
    server = Server(repo, "--model-control-mode", "poll", "--repository-poll-secs", "1", "--http-header-timeout-secs", "3",
                    "--http-max-queue-ms", "600000", "--grpc-max-queue-ms", "600000")  # soaks, not overload: 503s would count
    stubs = serving_harness.grpc_stubs()
    mmoe = lines("mmoe", "requests")
    din = lines("din", "requests")
    tally = Tally()
    deadline = [0.0]  # clients run until then

    def post(path, body, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
        try:
            conn.request("POST", path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def raw(payload, close_early=False):
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as s:
            s.sendall(payload)
            if close_early:
                return b""
            return s.recv(4096)

    def binary_body(body):
        header = {"inputs": []}
        blobs = b""
        for i in body["inputs"]:
            flat = serving_harness.flatten(i["data"])
            blob = struct.pack("<%d%s" % (len(flat), "f" if i["datatype"] == "FP32" else "q"), *flat)
            entry = {k: v for k, v in i.items() if k != "data"}
            entry.setdefault("parameters", {})["binary_data_size"] = len(blob)
            header["inputs"].append(entry)
            blobs += blob
        text = json.dumps(header).encode()
        return text + blobs, {"Inference-Header-Content-Length": str(len(text))}

    def bad_request(rng):
        good = json.loads(json.dumps(rng.choice(mmoe)))
        kind = rng.randrange(7)
        if kind == 0:
            return "bad json", json.dumps(good)[: rng.randrange(1, 60)]
        if kind == 1:
            good["inputs"][0]["shape"] = [1, 9999]
            return "wrong shape", json.dumps(good)
        if kind == 2:
            good["inputs"][1]["datatype"] = "INT64"
            return "wrong dtype", json.dumps(good)
        if kind == 3:
            good["inputs"][0]["data"][0] = 10**12
            return "id out of range", json.dumps(good)
        if kind == 4:
            good["inputs"][0]["shape"] = [10**6, 10**6]
            return "huge shape", json.dumps(good)
        if kind == 5:
            return "not utf-8", b'{"inputs": [{"name": "\xff\xfe", "datatype": "FP32", "shape": [1], "data": [1]}]}'
        good["inputs"][1]["data"] = [float("nan")] * len(good["inputs"][1]["data"])
        return "nan literal", json.dumps(good)

    def client(seed):
        rng = random.Random(seed)
        channel = stub = None
        if stubs:
            import grpc
            channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
            stub = stubs[1].GRPCInferenceServiceStub(channel)
        while time.time() < deadline[0]:
            roll = rng.random()
            try:
                if roll < 0.35:
                    model, body = ("mmoe", rng.choice(mmoe)) if rng.random() < 0.6 else ("din", rng.choice(din))
                    status, data = post(f"/v2/models/{model}/infer", json.dumps(body))
                    tally.add("good json", status == 200, f"{status} {data[:200]}")
                elif roll < 0.5:
                    body, headers = binary_body(rng.choice(mmoe))
                    status, data = post("/v2/models/mmoe/infer", body, headers)
                    tally.add("good binary", status == 200, f"{status} {data[:200]}")
                elif roll < 0.7:
                    kind, body = bad_request(rng)
                    status, data = post("/v2/models/mmoe/infer", body)
                    tally.add("bad: " + kind, 400 <= status < 500, f"{status} {data[:200]}")
                elif roll < 0.76:
                    reply = raw(b"GET /v2/models/\xff\xfe/ready HTTP/1.1\r\nHost: x\r\n\r\n")
                    tally.add("bad: target not utf-8", reply.startswith(b"HTTP/1.1 4"), reply[:100])
                elif roll < 0.82:
                    reply = raw(b"POST /v2/models/mmoe/infer HTTP/1.1\r\nContent-Length: 1x\r\n\r\n")
                    tally.add("bad: framing", reply.startswith(b"HTTP/1.1 400"), reply[:100])
                elif roll < 0.87:
                    raw(b"POST /v2/models/mmoe/infer HTTP/1.1\r\nContent-Length: 100000\r\n\r\n{\"inputs\"", close_early=True)
                    tally.add("vanishing client", True)
                elif roll < 0.89:
                    with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as s:
                        time.sleep(rng.uniform(0.1, 1.0))  # idle; the server may close it later
                    tally.add("idle connection", True)
                elif stub is not None and roll < 0.96:
                    pb = stubs[0]
                    body = rng.choice(mmoe)
                    req = pb.ModelInferRequest(model_name="mmoe")
                    for i in body["inputs"]:
                        t = req.inputs.add(name=i["name"], datatype=i["datatype"], shape=i["shape"])
                        flat = [x for row in i["data"] for x in (row if isinstance(row, list) else [row])]
                        (t.contents.fp32_contents if i["datatype"] == "FP32" else t.contents.int64_contents).extend(flat)
                    stub.ModelInfer(req, timeout=30)
                    tally.add("good grpc", True)
                elif stub is not None:
                    import grpc
                    pb = stubs[0]
                    req = pb.ModelInferRequest(model_name="mmoe")
                    req.inputs.add(name="dense", datatype="FP32", shape=[1 << 20, 64])
                    try:
                        stub.ModelInfer(req, timeout=30)
                        tally.add("bad: grpc shape", False, "accepted")
                    except grpc.RpcError as e:
                        tally.add("bad: grpc shape", e.code() == grpc.StatusCode.INVALID_ARGUMENT, str(e.code()))
            except Exception as e:  # a good request's transport failing is a failure; bad ones may be cut off
                tally.add("transport", False, repr(e))
        if channel:
            channel.close()

    def versions():
        v2 = os.path.join(repo, "mmoe", "2")
        while time.time() < deadline[0]:
            time.sleep(3)
            if os.path.isdir(v2):
                shutil.rmtree(v2)
            else:
                os.makedirs(v2 + ".tmp")
                shutil.copy(os.path.join(repo, "mmoe", "1", "model.onnx"), v2 + ".tmp")
                os.rename(v2 + ".tmp", v2)  # appears whole
            tally.add("version swap", True)

    # Warm-up: pools and caches fill, and a version is loaded beside the first (a load measures the
    # batching cost model with batches of up to thousands of rows, whose memory the allocator keeps).
    warm = [threading.Thread(target=client, args=(1000 + i,)) for i in range(args.clients)]
    warm.append(threading.Thread(target=versions))
    deadline[0] = time.time() + min(10.0, args.seconds / 4)
    warm_peak = [0]  # the warm-up's RSS peak: a version's load lifts RSS for a while, whichever half it falls in

    def sample_warm():
        while time.time() < deadline[0]:
            warm_peak[0] = max(warm_peak[0], proc_status(server.proc.pid)[0])
            time.sleep(0.25)

    warm.append(threading.Thread(target=sample_warm))
    for t in warm:
        t.start()
    for t in warm:
        t.join()
    time.sleep(4)  # idle connections of the warm-up time out
    rss0, fds0 = proc_status(server.proc.pid)
    start = time.time()
    deadline[0] = start + args.seconds
    samples = []  # (seconds into the run, RSS), every quarter second

    def sample():
        while time.time() < deadline[0]:
            samples.append((time.time() - start, proc_status(server.proc.pid)[0]))
            time.sleep(0.25)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    threads.append(threading.Thread(target=versions))
    threads.append(threading.Thread(target=sample))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    peak_first = max([r for s, r in samples if s < args.seconds / 2] + [rss0, warm_peak[0]])
    peak_second = max((r for s, r in samples if s >= args.seconds / 2), default=rss0)
    time.sleep(4)  # idle connections time out
    rss1, fds1 = proc_status(server.proc.pid)
    alive = server.proc.poll() is None
    code = server.stop()
    shutil.rmtree(repo)
    total = sum(c[0] for c in tally.counts.values())
    failed = sum(c[1] for c in tally.counts.values())
    bad = sum(c[0] for k, c in tally.counts.items() if k.startswith("bad"))
    report = {
        "seconds": args.seconds, "clients": args.clients, "requests": total, "bad_inputs": bad,
        "failures": failed, "rss_mb_after_warmup": round(rss0 / 2**20, 1), "rss_mb_end": round(rss1 / 2**20, 1),
        "rss_mb_peak_warmup_and_first_half": round(peak_first / 2**20, 1), "rss_mb_peak_second_half": round(peak_second / 2**20, 1),
        "fds_after_warmup": fds0, "fds_end": fds1, "server_alive": alive, "exit_code": code,
        "by_kind": {k: {"sent": c[0], "failed": c[1]} for k, c in sorted(tally.counts.items())},
        "violations": tally.violations,
    }
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    grown = min(peak_second, rss1) - peak_first
    ok = alive and code == 0 and failed == 0 and grown < args.max_rss_growth_mb * 2**20 and fds1 - fds0 <= 8
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
