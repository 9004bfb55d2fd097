"""Serving under load: throughput and p50/p99 latency against offered load, batching and hoisting off and on.

  /usr/bin/python3 bench/load_bench.py [--rankd build/rankd] [--backend cpu] [--size tiny]
      [--w1-rates 50,100,200] [--w2-rates 50,100,200] [--seconds 10] [--din-length 100]
      [--din-candidates 200 | 50-1000] [--hoisting on,off] [--batching off,on] [--protocols http,http-json,grpc,grpc-shm,http-shm]
      [--server-cpus 0-7 --client-cpus 8-15] [--serve-args "--executors 8"]

Exports W1 (dlrm_dcnv2) and W2 (din) from the model zoo and serves them from one `rankd serve`:
with batching off (`batching: {enabled: false}`) and with a `batching` section (cost model
measured at warm-up); W2, whose profile
and history are user inputs, also with `user_hoisting: false` (docs/hoisting.md) when --hoisting
lists off. Request mixes from
WORKLOADS.md: W1 draws N from MLPerf's server sizes {100, 100, 200 x12, 300, 300, 400, 500, 600,
700}; W2 is one user with N candidates (200, or uniform in a range: --din-candidates 50-1000) and
a history uniform in [L/2, L]. For each model and rate, `rankd bench server` sends open-loop
Poisson load over HTTP (binary tensor bodies and binary scores back, as tritonclient asks for them, so neither side prints or parses numbers as text)
or gRPC (raw tensor contents), ragged inputs' lengths as INT32 tensors NAME.lengths (what stock clients can
send; --lengths parameter for the lengths parameter), from --client-threads sending threads, /metrics gives requests per
model execution and the input bytes the server copied on the host per request (by stage), the
server's /proc/PID/stat its CPU time per request (and by thread name its threads' CPU and context switches: gRPC's
transport threads apart from the parsers and the engine), and the client's own CPU per request is shown
beside it (the load generator must not be what limits). The served-load figure (GPU.md, issue "serving core"):
server and client pinned to separate cores with --server-cpus and --client-cpus (taskset), rates
swept upward until p99 breaks. Prints a markdown table; --json keeps every result.
Needs PyTorch for the export (scripts/setup.sh --zoo).
"""
import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
from procs import cpu_seconds, free_port, thread_stats  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "python"))
from rankd_zoo import requests as rq  # noqa: E402
from rankd_zoo.export import export  # noqa: E402

W1_SIZES = [100, 100] + [200] * 12 + [300, 300, 400, 500, 600, 700]




def metrics(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def buckets_to(top):
    """A `buckets` line for the batched variants: 1, 2, 4, 8, 16, then steps of an eighth of an octave from 32
    to TOP (a power of two; 62 sizes to 4,096: docs/log/benchmarks.md), fewer a octave where a config's 64
    sizes would not hold them (a seventh to 8,192), every size captured before ready."""
    octaves = top.bit_length() - 6
    steps = min(8, 58 // octaves)
    sizes = [1, 2, 4, 8, 16] + sorted({int(round(32 * 2 ** (k / steps))) for k in range(steps * octaves + 1)})
    return f"buckets: {{allowed_batch_sizes: {sizes}, warmup_max_batch_size: {top}}}"


def link_graph(repo, model, copy):
    """REPO/COPY/1 made, holding links to MODEL's graph and any external weights."""
    os.makedirs(os.path.join(repo, copy, "1"), exist_ok=True)
    for extra in os.listdir(os.path.join(repo, model, "1")):
        target = os.path.join(repo, copy, "1", extra)
        if not os.path.exists(target):
            os.symlink(os.path.abspath(os.path.join(repo, model, "1", extra)), target)


def bucketed_copy(repo, model, top):
    """A copy of REPO's MODEL (its graph files linked) named MODEL_bTOP, with buckets_to(TOP) in place of any
    buckets line; returns its name."""
    copy = f"{model}_b{top}"
    link_graph(repo, model, copy)
    with open(os.path.join(repo, model, "config.yaml")) as f:
        config = [l for l in f if not l.startswith(("name:", "buckets:"))]
    with open(os.path.join(repo, copy, "config.yaml"), "w") as f:
        f.write(f"name: {copy}\n{''.join(config)}\n{buckets_to(top)}\n")
    return copy


def prepare(name, size, repo, out, din_length, count, din_candidates=(200, 200), hoisting=("on",), precision="",
            queue_delay_us=1000, queue_wait_us=-1, batched_extra="", config_extra=""):
    """Exports NAME at SIZE (once), writes its variants and its request mix; returns
    ([(model, batching, hoisting)], requests path). Hoisting is "n/a" for a model without user inputs.
    A precision is written into every variant's config (the exported one included)."""
    plain = f"{name}_{size}"
    if not os.path.exists(os.path.join(repo, plain, "1", "model.onnx")):
        print(f"exporting {plain} ...", file=sys.stderr, flush=True)
        export(name, size, repo, "", 1, 0, package=plain)
    config = ""
    if os.path.exists(os.path.join(repo, plain, "config.yaml")):
        with open(os.path.join(repo, plain, "config.yaml")) as f:
            config = "".join(l for l in f if not l.startswith(("name:", "precision:", "batching:")))
    if precision:
        config += f"\nprecision: {precision}\n"
    if config_extra:
        config += f"\n{config_extra}\n"
    with open(os.path.join(repo, plain, "config.yaml"), "w") as f:
        f.write(f"name: {plain}\n{config}\nbatching: {{enabled: false}}\n")  # every model batches unless told
    has_users = "scope: user" in config
    variants = []
    for hoist in (hoisting if has_users else ("n/a",)):
        for batching in (False, True):
            model = plain + ("_batched" if batching else "") + ("_unhoisted" if hoist == "off" else "")
            variants.append((model, batching, hoist))
            if model == plain:
                continue
            link_graph(repo, plain, model)
            with open(os.path.join(repo, model, "config.yaml"), "w") as f:
                f.write(f"name: {model}\n{config}\n")
                if batching:
                    wait = f", max_queue_wait_microseconds: {queue_wait_us}" if queue_wait_us >= 0 else ""
                    f.write(f"batching: {{max_queue_delay_microseconds: {queue_delay_us}{wait}}}\n")
                    if batched_extra:
                        f.write(batched_extra + "\n")
                if hoist == "off":
                    f.write("user_hoisting: false\n")
    feats = rq.features_of(name, size)
    rng = np.random.default_rng(2026)
    path = os.path.join(out, f"load_{plain}.jsonl")
    with open(path, "w") as f:
        for i in range(count):
            if name == "dlrm_dcnv2":
                r = rq.make_request(rng, feats, int(rng.choice(W1_SIZES)), vectorised=True)
            else:
                lo, hi = din_candidates
                r = rq.make_request(rng, feats, int(rng.integers(lo, hi + 1)), seq_len=din_length, vectorised=True)
            f.write(json.dumps(rq.to_json(feats, r, str(i), flat_ragged=True)) + "\n")
    return variants, path


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rankd", default=os.path.join(ROOT, "build", "rankd"), help="command that runs rankd")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--size", default="tiny")
    p.add_argument("--w1-rates", default="50,100,200")
    p.add_argument("--w2-rates", default="50,100,200")
    p.add_argument("--din-length", type=int, default=100, help="W2's longest history L (each is uniform in [L/2, L])")
    p.add_argument("--din-candidates", default="200", help="W2's N: a count, or a range LO-HI drawn uniformly "
                   "(WORKLOADS.md: 200 typical, 50-1000)")
    p.add_argument("--hoisting", default="on,off", help="W2 with user-side hoisting on, off or both")
    p.add_argument("--batching", default="off,on", help="each model as exported (off), with a batching section (on), or both")
    p.add_argument("--protocols", default="http",
                   help="http (binary bodies), http-json (JSON bodies: numbers as text), grpc (raw contents), grpc-shm and http-shm (the tensors in system "
                        "shared memory, the calls over gRPC or HTTP JSON: rankd bench server --shared-memory system), "
                        "comma-separated")
    p.add_argument("--lengths", default="tensor",
                   help="how a ragged input's lengths travel (binary and gRPC): tensor (an INT32 input NAME.lengths, "
                        "what stock clients can send), parameter (its \"lengths\" parameter), or both, comma-separated")
    p.add_argument("--precision", default="", help="written into every model's config, e.g. bf16-activations "
                   "(default: the exported config's)")
    p.add_argument("--queue-delay-us", type=int, default=1000, help="the batched variants' max_queue_delay_microseconds")
    p.add_argument("--queue-wait-us", type=int, default=-1, help="the batched variants' max_queue_wait_microseconds "
                   "(0: no bound; default: not written, the automatic bound of a queue that stands)")
    p.add_argument("--batched-extra", default="", help="YAML appended to the batched variants' configs, e.g. "
                   "\"buckets: {allowed_batch_sizes: [...], warmup_max_batch_size: 4096}\"")
    p.add_argument("--w1-buckets-to", type=int, default=0,
                   help="W1's batched variant with buckets to this many rows (a power of two from 64, e.g. 4096: "
                        "its in-process 35,000-40,000/s, docs/log/benchmarks.md); 0: the default ladder")
    p.add_argument("--config-extra", default="", help="YAML appended to every variant's config, e.g. "
                   "\"routing: {cpu: cost, cpu_runs: 2}\" (docs/routing.md)")
    p.add_argument("--serve-args", default="", help="more `rankd serve` flags, e.g. \"--executors 8 --cuda staging_helpers=0\"")
    p.add_argument("--server-cpus", default="", help="cores the server is pinned to (taskset -c), e.g. 0-7")
    p.add_argument("--client-cpus", default="", help="cores the load generator is pinned to, e.g. 8-15")
    p.add_argument("--client-threads", type=int, default=4,
                   help="the load generator's sending threads, each with its share of the rate (one sending "
                        "thread held no more than about 9,000-10,500 W1 requests/s: docs/log/benchmarks.md)")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--ready-s", type=float, default=600, help="seconds the server may take to load the models")
    p.add_argument("--requests", type=int, default=64, help="distinct requests per workload, rotated")
    p.add_argument("--out", default=os.path.join(HERE, "out"))
    p.add_argument("--json", default="")
    a = p.parse_args()
    rankd = a.rankd.split()
    repo = os.path.join(a.out, "load_repo")
    os.makedirs(repo, exist_ok=True)
    plans = []
    for name, rates in (("dlrm_dcnv2", a.w1_rates), ("din", a.w2_rates)):
        if rates:
            lo, _, hi = a.din_candidates.partition("-")
            batched_extra = a.batched_extra
            if name == "dlrm_dcnv2" and a.w1_buckets_to:
                batched_extra = (batched_extra + "\n" if batched_extra else "") + buckets_to(a.w1_buckets_to)
            variants, path = prepare(name, a.size, repo, a.out, a.din_length, a.requests,
                                     (int(lo), int(hi or lo)), tuple(a.hoisting.split(",")), a.precision,
                                     a.queue_delay_us, a.queue_wait_us, batched_extra, a.config_extra)
            plans.append((name, variants, path, [float(r) for r in rates.split(",")]))
    http, mport, grpc = free_port(), free_port(), free_port()
    server_pin = ["taskset", "-c", a.server_cpus] if a.server_cpus else []
    client = (["taskset", "-c", a.client_cpus] if a.client_cpus else []) + rankd
    wanted_batching = {"off": False, "on": True}
    batchings = [wanted_batching[b] for b in a.batching.split(",")]
    log = tempfile.TemporaryFile()
    load = []
    for _, variants, _, _ in plans:
        for model, _, _ in variants:
            load += ["--load-model", model]
    server = subprocess.Popen(server_pin + rankd + ["serve", "--model-repository", repo, "--backend", a.backend,
                                       "--http-address", "127.0.0.1", "--http-port", str(http), "--metrics-port",
                                       str(mport), "--grpc-port", str(grpc), "--model-control-mode", "explicit"]
                              + a.serve_args.split() + load,
                              stdout=log, stderr=log)
    rows = []
    try:
        print(f"waiting for the server to load {len(load) // 2} models ...", file=sys.stderr, flush=True)
        began = time.time()
        while time.time() < began + a.ready_s:
            if server.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"the server stopped ({server.returncode}): "
                                   + log.read().decode(errors="replace")[-2000:])
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(0.5)
        else:
            log.seek(0)
            raise RuntimeError(f"server not ready in {a.ready_s} s: " + log.read().decode(errors="replace")[-2000:])
        print(f"ready after {time.time() - began:.1f} s", file=sys.stderr, flush=True)
        for name, variants, path, rates in plans:
            for (model, batching, hoisting), protocol, lengths in itertools.product(
                    variants, a.protocols.split(","), a.lengths.split(",")):
                if batching not in batchings:
                    continue
                wire = {"http": ["--port", str(http), "--binary"],
                        "grpc": ["--protocol", "grpc", "--port", str(grpc)],
                        "grpc-shm": ["--protocol", "grpc", "--port", str(grpc), "--shared-memory", "system"],
                        "http-shm": ["--port", str(http), "--shared-memory", "system"],
                        "http-json": ["--port", str(http)]}[protocol]
                wire += ["--lengths", lengths]
                # One unrecorded pass over every request first: plans for their shapes are built then.
                subprocess.run(client + ["bench", "server", "--model", model, "--requests", path, "--rates", "50",
                                         "--seconds", str(2 * a.requests / 50), "--warmup", "0", "--json", os.devnull] + wire,
                               check=True, stderr=subprocess.DEVNULL)
                # And 3 s at the first rate: with batching, merged batches' shapes get their
                # buckets captured now, not inside the first measured rate.
                subprocess.run(client + ["bench", "server", "--model", model, "--requests", path, "--rates",
                                         str(rates[0]), "--seconds", "3", "--warmup", "0", "--json", os.devnull] + wire,
                               check=True, stderr=subprocess.DEVNULL)
                for rate in rates:
                    before = metrics(mport)
                    cpu_before = cpu_seconds(server.pid)
                    threads_before = thread_stats(server.pid)
                    tmp = os.path.join(a.out, f"load_{model}.json")
                    cmd = client + ["bench", "server", "--model", model, "--requests", path, "--rates", str(rate),
                                    "--seconds", str(a.seconds), "--warmup", "1", "--connections", "128",
                                    "--client-threads", str(a.client_threads), "--json", tmp] + wire
                    client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    subprocess.run(cmd, check=True)
                    client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = cpu_seconds(server.pid) - cpu_before
                    threads = {name: {key: value - threads_before.get(name, {}).get(key, 0) for key, value in stats.items()}
                               for name, stats in thread_stats(server.pid).items()}
                    switches = {name: stats["switches"] for name, stats in threads.items()}
                    after = metrics(mport)
                    label = f'{{model="{model}",version="1"}}'
                    reqs = after.get("nv_inference_request_success" + label, 0) - before.get("nv_inference_request_success" + label, 0)
                    execs = after.get("nv_inference_exec_count" + label, 0) - before.get("nv_inference_exec_count" + label, 0)
                    with open(tmp) as f:
                        r = json.load(f)["results"][0]
                    # Where a request's server time went (µs per request): queue, parse, score, answer.
                    for part in ("queue", "compute_input", "compute_infer", "compute_output"):
                        key = f"nv_inference_{part}_duration_us" + label
                        r[part + "_us"] = (after.get(key, 0) - before.get(key, 0)) / max(reqs, 1)
                    r["server_cpu_ms_per_request"] = 1000 * cpu / max(reqs, 1)  # warm-up included: an upper bound
                    r["server_switches_per_request"] = sum(switches.values()) / max(reqs, 1)  # likewise
                    r["server_switches_by_thread"] = {k: v / max(reqs, 1) for k, v in sorted(
                        switches.items(), key=lambda kv: -kv[1]) if v > 0}
                    # The CPU by thread (µs a request): the transport's threads apart from the workers and the engine.
                    r["server_cpu_us_by_thread"] = {k: 1e6 * v["cpu"] / max(reqs, 1) for k, v in sorted(
                        threads.items(), key=lambda kv: -kv[1]["cpu"]) if v["cpu"] > 0}
                    # The load generator's own CPU (warm-up included), to show it is not what limits.
                    client_cpu = sum(getattr(client_after, f) - getattr(client_before, f) for f in ("ru_utime", "ru_stime"))
                    r["client_cpu_ms_per_request"] = 1000 * client_cpu / max(reqs, 1)
                    # Input bytes the server copied on the host per request (all models: this one alone runs).
                    for stage in ("request", "merge", "pad", "staging"):
                        key = f'rankd_host_input_copy_bytes_total{{stage="{stage}"}}'
                        r[f"copied_kb_{stage}"] = (after.get(key, 0) - before.get(key, 0)) / 1024 / max(reqs, 1)
                    # A GPU server's request tensor pool (its size after the rate), the tensors it could
                    # not serve, and the runs that found no captured graph, with the captures made.
                    r["request_tensor_pool_mb"] = after.get("rankd_request_tensor_pool_bytes", 0) / 2 ** 20
                    r["request_tensors_on_heap"] = (after.get("rankd_request_tensors_on_heap_total", 0)
                                                    - before.get("rankd_request_tensors_on_heap_total", 0))
                    for key in ("graph_misses", "graph_captures"):
                        r[key] = after.get(f"rankd_{key}" + label, 0) - before.get(f"rankd_{key}" + label, 0)
                    # With CPU routing (docs/routing.md): the share of rows the CPU scored.
                    routed = {side: after.get(f'rankd_route_rows{{model="{model}",version="1",route="{side}"}}', 0)
                              - before.get(f'rankd_route_rows{{model="{model}",version="1",route="{side}"}}', 0)
                              for side in ("cpu", "device")}
                    if routed["cpu"] + routed["device"] > 0:
                        r["cpu_route_share"] = routed["cpu"] / (routed["cpu"] + routed["device"])
                    rows.append({"workload": "W1" if name == "dlrm_dcnv2" else "W2", "model": model, "protocol": protocol,
                                 "lengths": lengths,
                                 "batching": batching, "hoisting": hoisting, "requests_per_execution": reqs / max(execs, 1),
                                 "command": " ".join(cmd), **r})
                    share = f", CPU's share of rows {r['cpu_route_share']:.1%}" if "cpu_route_share" in r else ""
                    print(f"{model} {protocol} (lengths as {lengths}) {rate:g}/s: achieved {r.get('achieved_rate', 0):.0f}/s, "
                          f"p99 {r.get('p99_ms', 0):.2f} ms{share}; graph misses {r['graph_misses']:.0f}, captures "
                          f"{r['graph_captures']:.0f}, request tensors on the heap {r['request_tensors_on_heap']:.0f}, "
                          f"pool {r['request_tensor_pool_mb']:.0f} MiB; context switches per request by thread: "
                          + ", ".join(f"{k} {v:.2f}" for k, v in r["server_switches_by_thread"].items())
                          + "; CPU µs per request by thread: "
                          + ", ".join(f"{k} {v:.0f}" for k, v in r["server_cpu_us_by_thread"].items()),
                          file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(60)
    log.seek(0)
    print("\n".join(l for l in log.read().decode(errors="replace").splitlines()
                    if "batching" in l or "backend" in l or "hoisting" in l), file=sys.stderr)
    cores = (f"server on cores {a.server_cpus}, client on {a.client_cpus} ({a.client_threads} sending threads)"
             if a.server_cpus
             else f"{os.cpu_count()} cores shared by server and client")
    extra = (f", serve flags: {a.serve_args}" if a.serve_args else "") + (f", {a.precision}" if a.precision else "")
    extra += f", batched variants' queue delay {a.queue_delay_us} µs"
    if a.batched_extra:
        extra += f", batched variants' config adds: {a.batched_extra}"
    if a.config_extra:
        extra += f", every config adds: {a.config_extra}"
    if a.queue_wait_us >= 0:
        extra += f", queue wait bound {a.queue_wait_us} µs" if a.queue_wait_us else ", no queue wait bound"
    print(f"backend {a.backend}, size {a.size}, {a.seconds:g} s per rate, W2 L={a.din_length}, {cores}{extra}\n")
    print("| workload | protocol (lengths) | batching | hoisting | offered /s | achieved /s | p50 ms | p99 ms | p99.9 ms | errors "
          "| requests per execution | server CPU ms per request | server context switches per request | server µs per request: queue / parse / score / answer "
          "| host KB copied per request: request / merge / pad / staging | client CPU ms per request |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['workload']} | {r['protocol']} ({r['lengths']}) | {'on' if r['batching'] else 'off'} | {r['hoisting']} | {r['offered_rate']:g} | "
              f"{r['achieved_rate']:.1f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['p999_ms']:.2f} | {r['errors'] + r['timeouts']} | "
              f"{r['requests_per_execution']:.2f} | {r['server_cpu_ms_per_request']:.2f} | "
              f"{r['server_switches_per_request']:.1f} | {r['queue_us']:.0f} / "
              f"{r['compute_input_us']:.0f} / {r['compute_infer_us']:.0f} / {r['compute_output_us']:.0f} | "
              f"{r['copied_kb_request']:.0f} / {r['copied_kb_merge']:.0f} / {r['copied_kb_pad']:.0f} / "
              f"{r['copied_kb_staging']:.0f} | {r['client_cpu_ms_per_request']:.2f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
