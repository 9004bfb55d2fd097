#!/usr/bin/env bash
# W1 `mlperf` (MLPerf's row counts, 49 GiB of BF16 tables: bench/mlperf_model.py) on the GPU machine,
# one question per call, since the machine goes back, with what it wrote, soon after a call:
#
#   bench/gpu_mlperf.sh tiers OUT   the model written into /dev/shm, then `rankd bench engine` with
#                                   every table on the GPU and with table budgets (TIERS, percent of
#                                   the tables' bytes, every byte of a cache and its index counted;
#                                   the rest in page-locked host memory): 512 pairs one at a time
#                                   (median and p99) and 32,768 pairs four in flight (pairs/s)
#   bench/gpu_mlperf.sh sharded OUT the model written into /dev/shm, on two GPUs: its largest tables
#                                   split over both against every table on one GPU (below)
#   bench/gpu_mlperf.sh disk OUT    the model written onto the disk: the disk's random-read ceiling,
#                                   `rankd serve` from start to ready from a cold page cache, and the
#                                   tables on disk with a host cache of half their bytes (DISK_PAIRS:
#                                   512; bench engine's warm-up reads each request's rows first; with
#                                   FRESH_IDS the timed runs' ids are drawn anew, as live traffic's,
#                                   and CACHE_WARMUP_S seconds of such requests fill the host cache
#                                   first; READY_S=0 leaves out the start to ready)
#   bench/gpu_mlperf.sh restart OUT the model written onto the disk, its tables on disk with a host
#                                   cache of half their bytes, 512 pairs of fresh ids: a first run
#                                   (CACHE_WARMUP_S, 60, of traffic first) that saves its host caches'
#                                   hotness snapshot, then restarts from it and without it, each
#                                   drawing ids the others did not, the page cache dropped before each
#
# Carrying .bundle (scripts/gpu_bundle.sh rankd); OUT gets each run's JSON (raw/) and summary.txt.
# SCALE=0.01 runs the same steps on a hundredth of the rows (a check of the steps); SKIP_RESIDENT=1
# leaves out the all-on-the-GPU runs. FRESH_IDS=N times N variants of each request with ids drawn
# anew (`bench engine --fresh-ids`), and warms the caches on a new variant every run, instead of
# replaying the file's few requests, whose rows a cache soon holds. ENGINE_ARGS: more flags for
# every `bench engine` of `tiers` (e.g. "--cuda placed_ids_from=-1"), SIZES the pairs a request
# (default "512 32768"), IN_FLIGHT the 32,768-pair runs in flight (default 4), RANKD_BINARY the
# program `tiers` runs (default rankd; rankd_base for scripts/gpu_bundle.sh's BASE_RANKD); a model
# already in REPO is used as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
question=${1:?tiers}
out=${2:?OUT}
mkdir -p "$out/raw"
[[ -x .bundle/run ]] || tar -xJf .bundle/rankd.tar.xz
export RANKD_SOURCE_DIR=$PWD
log() { echo "[$(date +%T)] $*" | tee -a "$out/summary.txt"; }
name=dlrm_dcnv2_mlperf

write_once() { # REPO: the model and its request files, written unless there
  if [[ -f $1/$name/1/tables.bin && -f bench/out/${name}_n512_l0.jsonl ]]; then
    log "the model already in $1"
  else
    log "writing the model into $1 (scale ${SCALE:-1})"
    python3 bench/mlperf_model.py --repo "$1" --requests bench/out --pairs 512,32768 --scale "${SCALE:-1}" \
      | tee -a "$out/summary.txt"
  fi
}
summary() { # JSON of bench engine: one line
  python3 - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"  load {r['load_s']:.1f} s, median {r['median_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms, "
      f"{r['throughput_pairs_per_s'] / 1e6:.2f} M pairs/s ({r['in_flight']} in flight)")
EOF
}

case $question in
  tiers)
    repo=${REPO:-/dev/shm/repo}
    write_once "$repo"
    table_mib=$(($(stat -c %s "$repo/$name/1/tables.bin") >> 20))
    resident=gpu
    [[ ${SKIP_RESIDENT:-0} == 1 ]] && resident=
    for tier in $resident ${TIERS:-5 10 25}; do
      budget=() warm=()
      ((${FRESH_IDS:-0} > 0)) && warm+=(--fresh-ids "$FRESH_IDS")
      if [[ $tier != gpu ]]; then
        budget=(--table-gpu-budget-mb $((table_mib * tier / 100)))
        warm+=(--cache-warmup-s "${CACHE_WARMUP_S:-5}")
      fi
      for n in ${SIZES:-512 32768}; do
        flags=(--buckets on --iters "${ITERS_512:-300}" --warmup 20)
        ((n == 512)) || flags=(--buckets off --iters "${ITERS_32768:-40}" --warmup 8 --in-flight "${IN_FLIGHT:-4}")
        log "tables $tier${budget:+ (${budget[1]} MiB)}, $n pairs"
        timeout "${RUN_S:-150}" .bundle/run "${RANKD_BINARY:-rankd}" bench engine --backend cuda --precision bf16 \
          --model-repo "$repo" --model $name --requests "bench/out/${name}_n${n}_l0.jsonl" "${budget[@]}" "${warm[@]}" "${flags[@]}" \
          ${ENGINE_ARGS:-} --label "$tier $n" --json "$out/raw/${tier}_$n.json" >/dev/null 2>>"$out/raw/engine.log" \
          || log "failed: $(tail -2 "$out/raw/engine.log")"
        [[ -f $out/raw/${tier}_$n.json ]] && python3 - "$out/raw/${tier}_$n.json" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"  load {r['load_s']:.1f} s, median {r['median_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms, "
      f"{r['throughput_pairs_per_s'] / 1e6:.2f} M pairs/s ({r['in_flight']} in flight), "
      f"caches {r['table_cache_bytes'] / 2**20:.0f} MiB, host {r['table_bytes_on_host'] / 2**30:.1f} GiB, "
      f"hit ratio {r['cache_hit_ratio']}")
c = r.get("table_caches")
if c:
    print(f"  caches: {c['filled']:,} of {c['slots']:,} slots filled, {c['inserted']:,} rows inserted, "
          f"{c['evicted']:,} evicted, {c['sampled_lookups']:,} sampled lookups, {c['dropped_offers']:,} offers dropped")
EOF
      done
    done
    ;;
  sharded)
    # Two GPUs (nvidia-h200-x2): the SHARD_LARGEST (default 5: the 40 M-row ones) largest tables'
    # rows split over both GPUs (tables.tiers gpu:0,1; the rest on each replica's GPU), against
    # every table on one GPU, on two replicated, and one GPU reading the split tables' other half
    # over NVLink. One GPU: cores 0-7, IN_FLIGHT (4) requests of 32,768 pairs; two: cores 0-15,
    # twice as many. 512 pairs one at a time. ROUNDS (2) alternating rounds.
    repo=${REPO:-/dev/shm/repo}
    write_once "$repo"
    python3 - "$repo" "$name" "${SHARD_LARGEST:-5}" <<'EOF' | tee -a "$out/summary.txt"
import os, sys
import onnx
repo, name, largest = sys.argv[1], sys.argv[2], int(sys.argv[3])
graph = onnx.load(os.path.join(repo, name, "1", "model.onnx"), load_external_data=False)
tables = sorted((t for t in graph.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL),
                key=lambda t: -t.dims[0])[:largest]
sharded = name + "_sharded"
os.makedirs(os.path.join(repo, sharded, "1"), exist_ok=True)
for f in ("model.onnx", "tables.bin"):
    target = os.path.join(repo, sharded, "1", f)
    if not os.path.exists(target):
        os.symlink(os.path.join(repo, name, "1", f), target)
config = open(os.path.join(repo, name, "config.yaml")).read().replace("name: " + name, "name: " + sharded)
tiers = ", ".join(f"'{t.name}': 'gpu:0,1'" for t in tables)
open(os.path.join(repo, sharded, "config.yaml"), "w").write(config + f"\ntables: {{tiers: {{{tiers}}}}}\n")
print(f"{sharded}: {len(tables)} tables split over GPUs 0 and 1, {sum(t.dims[0] for t in tables):,} rows")
EOF
    in_flight=${IN_FLIGHT:-4}
    for round in $(seq "${ROUNDS:-2}"); do
      for setup in "one_resident 0 $name 0-7 1" "two_sharded all ${name}_sharded 0-15 2" \
        "two_resident all $name 0-15 2" "one_sharded 0 ${name}_sharded 0-7 1"; do
        read -r label gpus model cores count <<<"$setup"
        for n in ${SIZES:-32768 512}; do
          flags=(--buckets on --iters "${ITERS_512:-300}" --warmup 20)
          ((n == 512)) || flags=(--buckets off --iters "$((${ITERS_32768:-200} * count))" --warmup 8
            --in-flight $((in_flight * count)))
          log "round $round: $label (--gpus $gpus, cores $cores), $n pairs"
          json=$out/raw/${label}_${n}_$round.json
          taskset -c "$cores" timeout "${RUN_S:-150}" .bundle/run rankd bench engine --backend cuda --precision bf16 \
            --gpus "$gpus" --model-repo "$repo" --model "$model" --requests "bench/out/${name}_n${n}_l0.jsonl" \
            "${flags[@]}" --label "$label $n" --json "$json" >/dev/null 2>>"$out/raw/engine.log" \
            || log "failed: $(tail -2 "$out/raw/engine.log")"
          [[ -f $json ]] && summary "$json" | tee -a "$out/summary.txt"
        done
      done
    done
    ;;
  disk)
    # The model written onto the disk, its page cache dropped before each step: the disk's own
    # random-read ceiling (rankd bench disk); `rankd serve` from start to ready with every table
    # on the GPU; then the tables on disk (tables.tiers: disk) with a host cache of half their bytes,
    # 512 and 32,768 pairs, with the bytes the disk read (/proc/diskstats).
    repo=${REPO:-$PWD/bench/out/disk_repo}
    log "writing the model onto the disk ($repo, scale ${SCALE:-1})"
    python3 bench/mlperf_model.py --repo "$repo" --requests bench/out --pairs 512,32768 --scale "${SCALE:-1}" \
      | tee -a "$out/summary.txt"
    tables=$repo/$name/1/tables.bin
    table_mib=$(($(stat -c %s "$tables") >> 20))
    drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
    disk_read_mb() { awk -v d="$(basename "$(df --output=source "$tables" | tail -1)")" '$3 == d {print int($6 / 2048)}' /proc/diskstats; }
    drop
    log "the disk's ceiling"
    .bundle/run rankd bench disk --file "$tables" --row-bytes 256 --seconds 3 --json "$out/raw/disk.json" 2>&1 | tail -4 \
      | tee -a "$out/summary.txt"
    if ((${READY_S:-300} > 0)); then
      drop
      log "rankd serve, every table on the GPU: start to ready (read $(disk_read_mb) MB so far)"
      began=$(date +%s.%N)
      .bundle/run rankd serve --model-repository "$repo" --backend cuda --http-port 18000 --grpc-port -1 \
        >"$out/raw/serve.log" 2>&1 &
      server=$!
      ready() { python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:18000/v2/health/ready', timeout=2)" 2>/dev/null; }
      until ready; do
        kill -0 $server 2>/dev/null || { log "the server stopped: $(tail -3 "$out/raw/serve.log")"; break; }
        (($(date +%s) - ${began%.*} < ${READY_S:-300})) || { log "not ready in ${READY_S:-300} s"; break; }
        sleep 0.2
      done
      log "ready after $(python3 -c "import time; print(round(time.time() - $began, 1))") s (read $(disk_read_mb) MB so far)"
      kill $server; wait $server || true
    fi
    mkdir -p bench/out/disk_rows
    warm=()
    ((${FRESH_IDS:-0} > 0)) && warm+=(--fresh-ids "$FRESH_IDS")
    ((${CACHE_WARMUP_S:-0} > 0)) && warm+=(--cache-warmup-s "$CACHE_WARMUP_S")
    for n in ${DISK_PAIRS:-512}; do
      drop
      before=$(disk_read_mb)
      flags=(--buckets on --iters "${ITERS_512:-300}" --warmup 20)
      ((n == 512)) || flags=(--buckets off --iters "${ITERS_32768:-40}" --warmup 8 --in-flight 4)
      log "tables on disk, host cache $((table_mib / 2)) MiB, $n pairs"
      timeout "${RUN_S:-150}" .bundle/run rankd bench engine --backend cuda --precision bf16 --model-repo "$repo" \
        --model $name --requests "bench/out/${name}_n${n}_l0.jsonl" --tables-on-disk bench/out/disk_rows \
        --table-disk-cache-mb $((table_mib / 2)) "${warm[@]}" "${flags[@]}" --label "disk $n" --json "$out/raw/disk_$n.json" \
        >/dev/null 2>>"$out/raw/engine.log" || log "failed: $(tail -2 "$out/raw/engine.log")"
      log "  the disk read $(($(disk_read_mb) - before)) MB"
      [[ -f $out/raw/disk_$n.json ]] && python3 - "$out/raw/disk_$n.json" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
r = json.load(open(sys.argv[1]))
d = r["disk_tables"] or {}
t = d.get("timed") or {}
print(f"  load {r['load_s']:.1f} s, median {r['median_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms, "
      f"{r['throughput_pairs_per_s'] / 1e6:.3f} M pairs/s ({r['in_flight']} in flight, {r['timed_s']:.1f} s timed), "
      f"host hit ratio {d.get('host_hit_ratio')}, rows read {d.get('rows_read')}, bytes read {d.get('bytes_read')}, "
      f"host cache {d.get('host_cached_rows')} of {d.get('host_cache_rows')} rows; the timed runs: "
      f"hit ratio {t.get('host_hit_ratio')}, rows read {t.get('rows_read')}, bytes read {t.get('bytes_read')}")
EOF
    done
    ;;
  restart)
    repo=${REPO:-$PWD/bench/out/disk_repo}
    log "writing the model onto the disk ($repo, scale ${SCALE:-1})"
    python3 bench/mlperf_model.py --repo "$repo" --requests bench/out --pairs 512 --scale "${SCALE:-1}" \
      | tee -a "$out/summary.txt"
    tables=$repo/$name/1/tables.bin
    table_mib=$(($(stat -c %s "$tables") >> 20))
    device=$(basename "$(df --output=source "$tables" | tail -1)")
    disk_read_mb() { awk -v d="$device" '$3 == d {print int($6 / 2048)}' /proc/diskstats; }
    snapshot=$PWD/bench/out/w1.hot
    rm -f "$snapshot.disk"
    mkdir -p bench/out/disk_rows
    for setup in "first 1 ${CACHE_WARMUP_S:-60} yes" "restart_warm 2 0 yes" "restart_cold 3 0 no"; do
      read -r label seed warmup_s with_snapshot <<<"$setup"
      sync
      echo 3 >/proc/sys/vm/drop_caches
      before=$(disk_read_mb)
      hot=()
      [[ $with_snapshot == yes ]] && hot=(--hotness-snapshot "$snapshot")
      log "$label: snapshot $with_snapshot, $warmup_s s of traffic first, seed $seed"
      timeout "${RUN_S:-250}" .bundle/run rankd bench engine --backend cuda --precision bf16 --model-repo "$repo" \
        --model $name --requests "bench/out/${name}_n512_l0.jsonl" --tables-on-disk bench/out/disk_rows \
        --table-disk-cache-mb $((table_mib / 2)) "${hot[@]}" --fresh-ids 64 --fresh-ids-seed "$seed" \
        --cache-warmup-s "$warmup_s" --buckets on --iters "${ITERS_512:-300}" --warmup 20 --label "$label" \
        --json "$out/raw/$label.json" >/dev/null 2>>"$out/raw/engine.log" || log "failed: $(tail -2 "$out/raw/engine.log")"
      log "  the disk read $(($(disk_read_mb) - before)) MB; snapshot $(stat -c %s "$snapshot.disk" 2>/dev/null) bytes"
      [[ -f $out/raw/$label.json ]] && python3 - "$out/raw/$label.json" <<'EOF2' | tee -a "$out/summary.txt"
import json, sys
r = json.load(open(sys.argv[1]))
d = r["disk_tables"]
t = d["timed"]
print(f"  load {r['load_s']:.1f} s, warm start {d['warm_start_s']:.1f} s ({d['warmed_rows']:,} rows), "
      f"median {r['median_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, {r['throughput_pairs_per_s']:.0f} pairs/s; "
      f"the timed runs: host hit ratio {t['host_hit_ratio']:.3f}, rows read {t['rows_read']:,}; "
      f"host cache {d['host_cached_rows']:,} of {d['host_cache_rows']:,} rows")
EOF2
    done
    ;;
  *)
    echo "unknown question $question" >&2
    exit 2
    ;;
esac
