"""What string features cost (docs/strings.md): W4s (mmoe_strings, six of W4's categorical
features sent as strings) against mmoe with the ids those strings hash to, the same requests
otherwise, in the engine (`rankd bench engine`, in-process) and served (`rankd serve` on
--server-cpus, `rankd bench server` on --client-cpus: HTTP binary, gRPC raw, gRPC typed contents
and HTTP JSON, as --wires lists them), the two models alternated. Prints a markdown table; the issue's target is at most 10% more.

  /usr/bin/python3 bench/string_cost.py --rankd build/rankd --repo REPO --requests DIR
      [--ids-model mmoe] [--strings-model mmoe_strings] [--rows 1,64,512] [--rounds 2]
      [--rates 1:2000,64:1000,512:300] [--seconds 5] [--server-cpus 0-7 --client-cpus 8-15]
      [--backend cpu|cuda] [--engine-only | --served-only]
      [--wires http-binary,grpc-raw,grpc-typed,http-json] [--files mmoe_ids,mmoe_strings]

REPO holds both models; DIR the request files bench/string_requests.py writes
(mmoe_ids_nN.jsonl, mmoe_strings_nN.jsonl). For behaviour sequences sent as delimited strings,
bench/split_requests.py writes a DIN model's split variant and its files: --ids-model din_full
--strings-model din_full_split --files din_full_ids,din_full_split --rows 200 --wires http-binary,grpc-raw.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

from procs import cpu_seconds, free_port


def engine(a, model, path):
    out = subprocess.run(a.rankd.split() + ["bench", "engine", "--model-repo", a.repo, "--model", model,
                                            "--requests", path, "--backend", a.backend],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def served(a, rankd, http, grpc, server_pid, model, path, rate, wire):
    client = (["taskset", "-c", a.client_cpus] if a.client_cpus else []) + rankd
    ports = {"http-binary": ["--port", str(http), "--binary"], "http-json": ["--port", str(http)],
             "grpc-raw": ["--protocol", "grpc", "--port", str(grpc)],
             "grpc-typed": ["--protocol", "grpc", "--port", str(grpc), "--typed"]}[wire]
    subprocess.run(client + ["bench", "server", "--model", model, "--requests", path, "--rates", str(rate),
                             "--seconds", "2", "--warmup", "0", "--json", os.devnull] + ports,
                   check=True, stderr=subprocess.DEVNULL)
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        before = cpu_seconds(server_pid)
        subprocess.run(client + ["bench", "server", "--model", model, "--requests", path, "--rates", str(rate),
                                 "--seconds", str(a.seconds), "--warmup", "1", "--connections", "64",
                                 "--json", tmp.name] + ports, check=True, stderr=subprocess.DEVNULL)
        cpu = cpu_seconds(server_pid) - before
        with open(tmp.name) as f:
            r = json.load(f)["results"][0]
    done = r["ok"] * (a.seconds + 1) / a.seconds  # the warm-up second's requests used the CPU too
    r["server_cpu_ms_per_request"] = 1000 * cpu / max(done, 1)
    if r["errors"] or r["timeouts"]:
        sys.exit(f"{model} {wire}: {r['errors']} errors, {r['timeouts']} timeouts: {r['statuses']}")
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rankd", default="build/rankd")
    p.add_argument("--repo", required=True)
    p.add_argument("--requests", required=True)
    p.add_argument("--ids-model", default="mmoe")
    p.add_argument("--strings-model", default="mmoe_strings")
    p.add_argument("--rows", default="1,64,512")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--rates", default="1:2000,64:1000,512:300", help="ROWS:requests/s for the served runs")
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--server-cpus", default="")
    p.add_argument("--client-cpus", default="")
    p.add_argument("--backend", default="auto")
    p.add_argument("--wires", default="http-binary,grpc-raw,grpc-typed,http-json")
    p.add_argument("--files", default="mmoe_ids,mmoe_strings", help="the request files' prefixes: IDS,STRINGS")
    p.add_argument("--engine-only", action="store_true")
    p.add_argument("--served-only", action="store_true", help="skip the engine's rows")
    a = p.parse_args()
    rows = [int(x) for x in a.rows.split(",")]
    ids_file, strings_file = a.files.split(",")
    pairs = {n: {"ids": (a.ids_model, os.path.join(a.requests, f"{ids_file}_n{n}.jsonl")),
                 "strings": (a.strings_model, os.path.join(a.requests, f"{strings_file}_n{n}.jsonl"))} for n in rows}
    print(f"backend {a.backend}, {a.rounds} rounds alternated, medians of each round\n")
    print("| where | rows | wire | ids median ms | strings median ms | ids p99 ms | strings p99 ms | "
          "ids CPU ms/req | strings CPU ms/req | strings / ids (median) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in [] if a.served_only else rows:
        got = {"ids": [], "strings": []}
        for _ in range(a.rounds):
            for kind in ("ids", "strings"):
                got[kind].append(engine(a, *pairs[n][kind]))
        med = {k: sorted(r["median_ms"] for r in v)[len(v) // 2] for k, v in got.items()}
        p99 = {k: sorted(r["p99_ms"] for r in v)[len(v) // 2] for k, v in got.items()}
        print(f"| engine | {n} | - | {'/'.join('%.4f' % r['median_ms'] for r in got['ids'])} | "
              f"{'/'.join('%.4f' % r['median_ms'] for r in got['strings'])} | {p99['ids']:.4f} | {p99['strings']:.4f} "
              f"| - | - | {med['strings'] / med['ids']:.3f} |", flush=True)
    if a.engine_only:
        return
    rankd = a.rankd.split()
    http, grpc, metrics = free_port(), free_port(), free_port()
    pin = ["taskset", "-c", a.server_cpus] if a.server_cpus else []
    log = tempfile.TemporaryFile()
    server = subprocess.Popen(pin + rankd + ["serve", "--model-repository", a.repo, "--backend", a.backend,
                                             "--http-address", "127.0.0.1", "--http-port", str(http),
                                             "--grpc-port", str(grpc), "--metrics-port", str(metrics),
                                             "--model-control-mode", "explicit", "--load-model", a.ids_model,
                                             "--load-model", a.strings_model], stdout=log, stderr=log)
    try:
        deadline = time.time() + 600
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready", timeout=2).status == 200:
                    break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    log.seek(0)
                    sys.exit("server not ready:\n" + log.read().decode(errors="replace"))
                time.sleep(0.5)
        rates = dict(tuple(int(x) for x in r.split(":")) for r in a.rates.split(","))
        for n in rows:
            for wire in a.wires.split(","):
                got = {"ids": [], "strings": []}
                for _ in range(a.rounds):
                    for kind in ("ids", "strings"):
                        got[kind].append(served(a, rankd, http, grpc, server.pid, *pairs[n][kind], rates[n], wire))
                mid = lambda k, f: sorted(r[f] for r in got[k])[len(got[k]) // 2]  # noqa: E731
                print(f"| served {rates[n]}/s | {n} | {wire} | {'/'.join('%.3f' % r['p50_ms'] for r in got['ids'])} | "
                      f"{'/'.join('%.3f' % r['p50_ms'] for r in got['strings'])} | {mid('ids', 'p99_ms'):.3f} | "
                      f"{mid('strings', 'p99_ms'):.3f} | {mid('ids', 'server_cpu_ms_per_request'):.3f} | "
                      f"{mid('strings', 'server_cpu_ms_per_request'):.3f} | "
                      f"{mid('strings', 'p50_ms') / mid('ids', 'p50_ms'):.3f} |", flush=True)
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    main()
