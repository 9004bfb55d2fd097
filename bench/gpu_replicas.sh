#!/usr/bin/env bash
# Replicas on two GPUs (docs/replicas.md), for an nvidia-h200-x2 lease: the replica tests, the
# failing-GPU test, then W1 and W2 at full size served over gRPC (bench/load_bench.py, batching
# BATCHING: off, on or off,on) on one GPU (server on cores 0-7, client on 8-15) and on two (--gpus
# all: server on 0-15, client on 16-31), and in-process through the batcher (rankd bench load, on
# the batched models, exported here when no served step did) likewise.
#   bench/gpu_replicas.sh OUT_DIR      (after tar -xJf .bundle/rankd.tar.xz; scripts/gpu_bundle.sh all)
# Then, with SPLIT_S, tables split over the two GPUs against resident ones (engine throughput).
# Step limits in seconds: TESTS_S, FAULTS_S, SERVED_S (per GPU count), LOAD_S (per GPU count),
# SPLIT_S; 0 skips a step. SETUPS: the GPU counts measured ("1 2"); PROTOCOLS: served ones (grpc). W1_RATES_1 (and _2, LOAD_W1_RATES_1...)
# give one GPU count its own rates (set empty: that workload is skipped). SERVE_EXTRA: more `rankd serve` flags; LOAD_EXTRA: more
# `rankd bench load` flags. Rates: W1_RATES, W2_RATES (served), LOAD_W1_RATES, LOAD_W2_RATES (in-process).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/gpu_replicas.sh OUT_DIR}
mkdir -p "$out"
[[ -x .bundle/run ]] || tar -xJf .bundle/rankd.tar.xz
export PYTHONUNBUFFERED=1 RANKD_SOURCE_DIR=$PWD
log=$out/steps.log
step() { echo "== $1 ($(date -u +%T))" | tee -a "$log"; }
{ nvidia-smi -L; echo "cores: $(nproc)"; cat .bundle/COMMIT; } 2>&1 | tee -a "$log"

if ((${TESTS_S:-240})); then
  step "tests"
  timeout "${TESTS_S:-240}" .bundle/run rankd_tests \
    --gtest_filter="${TESTS:-Replicas*:Zoo/ReplicatedZooTest*:CudaDevices*:Zoo/CudaDevicesZooTest*:ExecutorPool*}" \
    >"$out/tests.log" 2>&1
  echo "tests exit $?" | tee -a "$log"
  grep -E '^\[  (PASSED|SKIPPED|FAILED) +\]' "$out/tests.log" | tee -a "$log"
fi
if ((${FAULTS_S:-240})); then
  step "faults"
  wrapper=$(mktemp)
  printf '#!/bin/sh\nexec %s/.bundle/run rankd "$@"\n' "$PWD" >"$wrapper"
  chmod +x "$wrapper"
  (cd tests && timeout "${FAULTS_S:-240}" python3 gpu_faults_test.py "$wrapper" ..) >"$out/faults.log" 2>&1
  echo "faults exit $?" | tee -a "$log"
  grep -E '^test_|^(OK|FAILED)|^Ran ' "$out/faults.log" | tee -a "$log"
fi
for setup in "1 --gpus=0 0-7 8-15" "2 --gpus=all 0-15 16-31"; do
  read -r count gpus server client <<<"$setup"
  [[ " ${SETUPS:-1 2} " == *" $count "* ]] || continue
  w1=W1_RATES_$count w2=W2_RATES_$count l1=LOAD_W1_RATES_$count l2=LOAD_W2_RATES_$count
  if ((${SERVED_S:-240})); then
    step "served on $count GPU(s): server on cores $server, client on $client"
    timeout "${SERVED_S:-240}" python3 bench/load_bench.py --rankd ".bundle/run rankd" --backend cuda --size full \
      --server-cpus "$server" --client-cpus "$client" --hoisting on --din-length 1000 --protocols "${PROTOCOLS:-grpc}" \
      --precision bf16-activations --batching "${BATCHING:-off}" --serve-args="$gpus ${SERVE_EXTRA:-}" --seconds 5 \
      --w1-rates "${!w1-${W1_RATES-4000,8000,12000,16000}}" \
      --w2-rates "${!w2-${W2_RATES-10000,20000,30000,40000}}" \
      2>"$out/served_$count.log" | tee -a "$log"
  fi
  if ((${LOAD_S:-120})) && [[ ! -f bench/out/load_repo/din_full_batched/config.yaml ]]; then
    (cd bench && python3 -c "import load_bench as b
for name in ('dlrm_dcnv2', 'din'):
    b.prepare(name, 'full', 'out/load_repo', 'out', 1000, 64, precision='bf16-activations')") 2>&1 | tail -3
  fi
  if ((${LOAD_S:-120})); then
    step "in-process on $count GPU(s), cores $server"
    deadline=$((SECONDS + ${LOAD_S:-120}))
    for w in "dlrm_dcnv2 10 ${!l1-${LOAD_W1_RATES-20000,40000,60000}}" \
      "din 5 ${!l2-${LOAD_W2_RATES-20000,40000}}"; do
      read -r name target rates <<<"$w"
      [[ -n $rates ]] || continue
      taskset -c "$server" timeout $((deadline - SECONDS)) .bundle/run rankd bench load --backend cuda "$gpus" ${LOAD_EXTRA:-} \
        --model-repo bench/out/load_repo --model "${name}_full_batched" --requests "bench/out/load_${name}_full.jsonl" \
        --rates "$rates" --seconds 5 --p99-target-ms "$target" 2>&1 | grep -E "^rate|highest|warning|rankd" |
        tee -a "$log"
    done
  fi
done
# Tables split across the GPUs (tables.tiers gpu:0 / gpu:1 alternating, largest first; then every
# table's rows split over both, gpu:0,1) against all on each replica's GPU: engine throughput (rankd bench engine, W1's mix, SPLIT_IN_FLIGHT requests
# at a time), one GPU and two.
if ((${SPLIT_S:-0})); then
  step "tables split over the GPUs"
  deadline=$((SECONDS + SPLIT_S))
  repo=bench/out/load_repo
  mkdir -p "$repo"
  [[ -f $repo/dlrm_dcnv2_full/config.yaml ]] || (cd bench && python3 -c "import load_bench as b
b.prepare('dlrm_dcnv2', 'full', 'out/load_repo', 'out', 1000, 64, precision='bf16-activations')")
  .bundle/run rankd inspect --backend cpu --model-repository "$repo" --model dlrm_dcnv2_full >"$out/inspect.txt" 2>&1
  python3 - "$repo" "$out/inspect.txt" <<'PY'
import os, re, sys
repo, inspect = sys.argv[1], open(sys.argv[2]).read()
tables = re.findall(r"^  (\S+)\s+gpu\s+\[.*?\] \S+\s+([\d.]+) (\w+)", inspect.split("\ntables:", 1)[1], re.M)
scale = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
tables.sort(key=lambda t: -float(t[1]) * scale.get(t[2], 1))
for variant, place in (("split", lambda k: "gpu:%d" % (k % 2)), ("rows", lambda k: "gpu:0,1")):
    name = "dlrm_dcnv2_full_" + variant
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    for f in os.listdir(os.path.join(repo, "dlrm_dcnv2_full", "1")):
        target = os.path.join(repo, name, "1", f)
        if not os.path.exists(target):
            os.symlink(os.path.abspath(os.path.join(repo, "dlrm_dcnv2_full", "1", f)), target)
    config = open(os.path.join(repo, "dlrm_dcnv2_full", "config.yaml")).read().replace(
        "name: dlrm_dcnv2_full", "name: " + name)
    tiers = ", ".join("'%s': '%s'" % (t, place(k)) for k, (t, _, _) in enumerate(tables))
    open(os.path.join(repo, name, "config.yaml"), "w").write(config + "\ntables: {tiers: {%s}}\n" % tiers)
print("placed %d tables" % len(tables))
PY
  for setup in "--gpus=0 0-7" "--gpus=all 0-15"; do
    read -r gpus cores <<<"$setup"
    for model in dlrm_dcnv2_full dlrm_dcnv2_full_split dlrm_dcnv2_full_rows; do
      echo "$model $gpus" | tee -a "$log"
      taskset -c "$cores" timeout $((deadline - SECONDS)) .bundle/run rankd bench engine --backend cuda "$gpus" \
        --model-repo "$repo" --model "$model" --requests bench/out/load_dlrm_dcnv2_full.jsonl --warmup 500 \
        --iters "${SPLIT_ITERS:-20000}" --in-flight "${SPLIT_IN_FLIGHT:-16}" 2>&1 |
        grep -E "throughput|pairs|rankd bench|error" | tee -a "$log"
    done
  done
fi
step "done"
