#!/usr/bin/env bash
# A short GPU lease in one command, the most needed step first, each bounded in time, so that
# whatever finished is under OUT when the lease ends (docs/cuda.md, docs/log/benchmarks.md):
#   1. the whole test binary (the GPU tests run there instead of skipping), into tests.log;
#   2. compute-sanitizer memcheck on the tests MEMCHECK_FILTER names, into memcheck.log;
#   3. the small requests of issue 6 against the best PyTorch peer (bench/gpu_bench.py on
#      WORKLOADS at ROWS; by default W1 at 1, 64 and 512 pairs and W2 at 1 user x 200), into
#      peers.log and peers.md (PEERS: the PyTorch peers, CUDA graphs in fp32 and bf16 by default,
#      empty for rankd alone; PEER_ARGS: more gpu_bench.py flags, e.g. "--bf16-tables --in-flight 2"; PRECISIONS: rankd's, "bf16" by default);
#   4. with AB="CUDA=a,b" (settings of `rankd --cuda`, e.g. CUDA=split_k=on,split_k=off),
#      `rankd bench engine` on W1 at AB_ROWS pairs ("64 512", requests step 3 wrote) for each
#      value, alternating, AB_ROUNDS rounds, into ab.csv (AB_REQUESTS: other request files step 3
#      wrote instead, by name, e.g. "din_full_n200_l1000 dlrm_dcnv2_full_n512_l0");
#      AB=RANKD_BINARY=rankd_base,rankd alternates two builds instead (scripts/gpu_bundle.sh's
#      BASE_RANKD); AB="FLAGS=,--table-gpu-budget-mb=0" alternates `bench engine` flags (one
#      word each; an empty value adds none); AB_PRECISIONS (e.g. "bf16 bf16-activations") times each precision too, with
#      or without AB; AB="MODEL=,_keyed" alternates the model with its copy of that suffix (KEYED=1
#      makes MODEL_keyed first: bench/keyed_model.py, every table keyed);
#   5. with RATE_S (30 by default), the GPU's measured bf16 matrix rate (bench/matrix_rate.py),
#      what W1's large batches are a share of, into rate.log;
#   6. with NCU_S, ncu's time for every kernel of one W1 batch at NCU_ROWS pairs, into ncu.csv
#      (NCU_ARGS: rankd flags for that run, "--cuda gemm_tuning=off" by default; NCU_PRECISION, bf16;
#      NCU_KERNEL: a regex, only the kernels it names), the last NCU_LAST (24) into steps.log.
#   7. with TRACE_S, one `rankd bench engine` run of W1 at TRACE_ROWS pairs (32,768; requests step 3
#      wrote) with TRACE_IN_FLIGHT (4) requests in flight and TRACE_ITERS (150) timed runs, every
#      kernel, copy and memset traced by the bundle's bench/kernel_trace.cc into trace.csv, and
#      bench/trace_summary.py over the timed runs' kernels into steps.log (TRACE_PRECISION, bf16).
#   8. with SERVED_S (300 by default), the served-load benchmark (bench/load_bench.py: full W1 and
#      W2, server on cores 0-7 and client on 8-15, gRPC raw contents and HTTP binary bodies, in
#      SERVED_PRECISION, bf16-activations by default) for each build SERVED_BINARIES names ("rankd";
#      "rankd_base rankd" for an A/B; an entry PROGRAM:FLAGS runs PROGRAM's server with FLAGS more,
#      commas for spaces: "rankd rankd:--shared-memory-pin-limit-mb,0" compares one flag),
#      SERVED_ARGS its rates and batching ("--batching off,on --w1-rates 3000 --w2-rates 3000
#      --seconds 5" by default), SERVE_FLAGS more `rankd serve` flags for all, into
#      served_N_PROGRAM.md (N: the entry's place in the list);
#   9. with LOAD_S, `rankd bench load` (in-process, through the batcher, on cores 0-7) of the
#      batched W1 and W2 of step 8 at LOAD_W1_RATES and LOAD_W2_RATES, p99 targets 10 and 5 ms
#      (LOAD_W1_BUCKETS_TO=4096: W1's with the ladder its 35,000 to 40,000/s in-process were
#      measured with, bench/load_bench.py's buckets_to, instead of the default ladder); LOAD_ARGS: more
#      `bench load` flags, e.g. "--cuda attention_strips=2"; LOAD_BATCHING: `bench load --batching`
#      values, each workload run with each in turn ("config,off": merged, then one request an
#      execution, what merging pays at saturation; "config" by default).
#  10. with SPLIT_S, W2 with its behaviour sequences sent as delimited strings against the same requests
#      as ids (bench/split_requests.py, then bench/string_cost.py: the engine and served over HTTP
#      binary, gRPC raw and typed at SPLIT_RATE requests/s, server on cores 0-7), into steps.log.
# RANKD_ARGS: more `rankd bench engine` flags for steps 4, 6 and 7, e.g. "--table-dtype BF16".
# The logs come back packed in OUT/logs.tgz, the summary in OUT/steps.log.
# Here: `scripts/build.sh && scripts/gpu_bundle.sh all`; there, carrying .bundle:
#   bench/gpu_quick.sh $OUT
# Step limits in seconds: TESTS_S, MEMCHECK_S, PEERS_S, AB_S, RATE_S, NCU_S, TRACE_S, SERVED_S, LOAD_S, SPLIT_S
# (0 skips a step).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/gpu_quick.sh OUT_DIR}
mkdir -p "$out"
[[ -x .bundle/run ]] || tar -xJf .bundle/rankd.tar.xz
export PYTHONUNBUFFERED=1 RANKD_SOURCE_DIR=$PWD
# A device run returns at most 8 files: OUT keeps steps.log (the summary) and gpu.csv, the logs
# go to $raw and are packed into OUT/logs.tgz before each step (and at the end).
raw=$(mktemp -d)
step() {
  tar -czf "$out/logs.tgz" -C "$raw" .
  echo "== $1 ($(date -u +%T))" | tee -a "$out/steps.log"
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >"$out/gpu.csv" 2>&1
cat .bundle/COMMIT >>"$out/gpu.csv" 2>/dev/null

if ((${TESTS_S:-150})); then
  step "tests"
  timeout "${TESTS_S:-150}" .bundle/run rankd_tests >"$raw/tests.log" 2>&1
  echo "tests exit $?" | tee -a "$out/steps.log"
  { grep -E '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?' "$raw/tests.log"
    grep -E '^\[  FAILED  \] [A-Za-z]' "$raw/tests.log" | sort -u | head -30; tail -2 "$raw/tests.log"; } | tee -a "$out/steps.log"
fi

if ((${MEMCHECK_S:-60})); then
  step "memcheck"
  LD_LIBRARY_PATH=.bundle/lib timeout "${MEMCHECK_S:-60}" compute-sanitizer --tool memcheck --error-exitcode 9 \
    .bundle/bin/rankd_tests --gtest_filter="${MEMCHECK_FILTER:-Ops/CudaOpTest*:CudaBackend.FewRow*}" >"$raw/memcheck.log" 2>&1
  echo "memcheck exit $?" | tee -a "$out/steps.log"
  tail -3 "$raw/memcheck.log" | tee -a "$out/steps.log"
fi

if ((${PEERS_S:-240})); then
  step "peers"
  timeout "${PEERS_S:-240}" python3 bench/gpu_bench.py --rankd ".bundle/run rankd" --workloads "${WORKLOADS:-dlrm_dcnv2,din}" \
    --rows "${ROWS:-1,64,512,200}" --precisions "${PRECISIONS:-bf16}" --peers "${PEERS-cudagraphs,cudagraphs-bf16}" --buckets on --hoisting on \
    --iters "${ITERS:-300}" ${PEER_ARGS:-} >"$raw/peers.md" 2>"$raw/peers.log"
  echo "peers exit $?" | tee -a "$out/steps.log"
  cat "$raw/peers.md" | tee -a "$out/steps.log"
fi

if [[ -n ${KEYED:-} ]]; then
  step "keyed copy of dlrm_dcnv2_full"
  python3 bench/keyed_model.py ".bundle/run rankd" bench/out/repo dlrm_dcnv2_full 2>&1 | tee -a "$out/steps.log"
fi
if [[ -n ${AB:-}${AB_PRECISIONS:-} ]] && ((${AB_S:-120})); then
  ab=${AB:-CUDA=gemm_log=off}  # precisions alone: one value, the default
  step "a/b ${ab} ${AB_PRECISIONS:-bf16}"
  var=${ab%%=*}
  IFS=, read -r -a values <<<"${ab#*=}"
  deadline=$((SECONDS + ${AB_S:-120}))
  cases=${AB_REQUESTS:-}
  [[ -n $cases ]] || for n in ${AB_ROWS:-64 512}; do cases+=" dlrm_dcnv2_full_n${n}_l0"; done
  for ((round = 0; round < ${AB_ROUNDS:-2}; ++round)); do
    for name in $cases; do
      requests=bench/out/$name.jsonl
      [[ -f $requests ]] || continue
      n=${name##*_n}
      n=${n%%_*}
      buckets=on
      ((n <= 1024)) || buckets=off  # past the largest bucket a request runs at its own shape
      for value in "${values[@]}"; do
        for precision in ${AB_PRECISIONS:-bf16}; do
          ((SECONDS < deadline)) || break 4
          program=rankd settings=() model=${name%_n*}
          [[ $var == RANKD_BINARY ]] && program=$value
          [[ $var == MODEL ]] && model=${model}$value
          [[ $var == CUDA ]] && settings=(--cuda "$value")
          [[ $var == FLAGS && -n $value ]] && settings=("$value")
          timeout $((deadline - SECONDS)) .bundle/run $program bench engine --backend cuda --precision $precision "${settings[@]}" \
            --model-repo bench/out/repo --model "$model" --requests "$requests" --buckets $buckets ${RANKD_ARGS:-} \
            --iters "${ITERS:-300}" --warmup 20 --label "$name $var=$value" --csv "$raw/ab.csv" >/dev/null 2>>"$raw/ab.log"
        done
      done
    done
  done
  cat "$raw/ab.csv" 2>/dev/null | tee -a "$out/steps.log"
fi
if ((${RATE_S:-30})); then
  step "matrix rate"
  timeout "${RATE_S:-30}" python3 bench/matrix_rate.py >"$raw/rate.log" 2>&1
  echo "matrix rate exit $?" | tee -a "$out/steps.log"
  tail -1 "$raw/rate.log" | tee -a "$out/steps.log"
fi

# 6. With NCU_S: every kernel of W1 at NCU_ROWS pairs (one uncaptured batch after one warm-up,
#    with cuBLASLt's heuristic choice), timed by ncu without fixing the clocks, into ncu.csv.
if ((${NCU_S:-0})); then
  step "ncu"
  LD_LIBRARY_PATH=.bundle/lib timeout "$NCU_S" ncu --clock-control none --csv \
    ${NCU_KERNEL:+--kernel-name "regex:$NCU_KERNEL"} --metrics gpu__time_duration.sum .bundle/bin/rankd bench engine --backend cuda --precision "${NCU_PRECISION:-bf16}" ${NCU_ARGS:---cuda gemm_tuning=off} ${RANKD_ARGS:-} \
    --model-repo bench/out/repo --model dlrm_dcnv2_full --requests "bench/out/dlrm_dcnv2_full_n${NCU_ROWS:-512}_l0.jsonl" \
    --buckets off --iters 1 --warmup 1 >"$raw/ncu.csv" 2>"$raw/ncu.log"
  echo "ncu exit $?" | tee -a "$out/steps.log"
  python3 bench/ncu_last.py "$raw/ncu.csv" "${NCU_LAST:-24}" 2>&1 | tee -a "$out/steps.log"
fi
if ((${TRACE_S:-0})); then
  step "trace"
  if [[ -e .bundle/lib/librankd_trace.so ]]; then
    iters=${TRACE_ITERS:-150}
    CUDA_INJECTION64_PATH=$PWD/.bundle/lib/librankd_trace.so RANKD_TRACE_OUT=$raw/trace.csv timeout "$TRACE_S" \
      .bundle/run rankd bench engine --backend cuda --precision "${TRACE_PRECISION:-bf16}" ${RANKD_ARGS:-} \
      --model-repo bench/out/repo --model dlrm_dcnv2_full --requests "bench/out/dlrm_dcnv2_full_n${TRACE_ROWS:-32768}_l0.jsonl" \
      --buckets off --warmup 10 --iters "$iters" --in-flight "${TRACE_IN_FLIGHT:-4}" >"$raw/trace.json" 2>"$raw/trace.log"
    echo "trace exit $?" | tee -a "$out/steps.log"
    # The timed runs' kernels: the batch's kernels (the run's launch count) times the timed runs.
    kernels=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["launches"]["kernels"] * int(sys.argv[1]))' \
      "$iters" <"$raw/trace.json" 2>/dev/null || echo 0)
    grep -o '"throughput_pairs_per_s":[0-9.]*' "$raw/trace.json" | tee -a "$out/steps.log"
    python3 bench/trace_summary.py "$raw/trace.csv" --last "$kernels" 2>&1 | tee -a "$out/steps.log"
  else
    echo "the bundle has no kernel tracer (scripts/gpu_bundle.sh found no CUPTI)" | tee -a "$out/steps.log"
  fi
fi
if ((${SERVED_S:-300})); then
  step "served"
  deadline=$((SECONDS + ${SERVED_S:-300}))
  n=0
  for entry in ${SERVED_BINARIES:-rankd}; do
    n=$((n + 1))
    program=${entry%%:*} extra=""
    [[ $entry == *:* ]] && extra=${entry#*:} && extra=${extra//,/ }
    # shellcheck disable=SC2086 # SERVED_ARGS is a list of flags
    timeout $((deadline - SECONDS)) python3 bench/load_bench.py --rankd ".bundle/run $program" --backend cuda \
      --size full --server-cpus 0-7 --client-cpus 8-15 --hoisting on --din-length 1000 --protocols grpc,http \
      --precision "${SERVED_PRECISION:-bf16-activations}" --serve-args "${SERVE_FLAGS:-} $extra" \
      ${SERVED_ARGS:---batching off,on --w1-rates 3000 --w2-rates 3000 --seconds 5} \
      >"$raw/served_${n}_$program.md" 2>"$raw/served_${n}_$program.log"
    echo "served $entry exit $? ($(uname -r))" | tee -a "$out/steps.log"
    tee -a "$out/steps.log" <"$raw/served_${n}_$program.md"
  done
fi
if ((${LOAD_S:-0})); then
  step "load in-process"
  deadline=$((SECONDS + LOAD_S))
  LOAD_BATCHING=${LOAD_BATCHING:-config}
  w1=dlrm_dcnv2_full_batched
  if [[ -n ${LOAD_W1_BUCKETS_TO:-} ]]; then
    w1=$(cd bench && python3 -c "import load_bench as l; print(l.bucketed_copy('out/load_repo', '$w1', $LOAD_W1_BUCKETS_TO))")
  fi
  for w in "dlrm_dcnv2 $w1 ${LOAD_W1_RATES:-5000,10000,20000,40000} 10" "din din_full_batched ${LOAD_W2_RATES:-5000,10000,20000} 5"; do
    read -r name model rates target <<<"$w"
    for batching in ${LOAD_BATCHING//,/ }; do
      echo "$model, batching $batching" | tee -a "$out/steps.log"
      # shellcheck disable=SC2086 # LOAD_ARGS is a list of flags
      taskset -c 0-7 timeout $((deadline - SECONDS)) .bundle/run rankd bench load --backend cuda \
        --model-repo bench/out/load_repo --model "$model" --requests "bench/out/load_${name}_full.jsonl" \
        --batching "$batching" --rates "$rates" --seconds 5 --p99-target-ms "$target" ${LOAD_ARGS:-} \
        --json "$raw/load_${name}_$batching.json" 2>&1 | grep -E "^rate|highest|warning|rankd" | tee -a "$out/steps.log"
    done
  done
fi
if ((${SPLIT_S:-0})); then
  step "split strings"
  deadline=$((SECONDS + SPLIT_S))
  if [[ ! -f bench/out/load_din_full.jsonl ]]; then  # step 8's W2, when it did not run
    (cd bench && python3 -c "import load_bench as l; l.prepare('din', 'full', 'out/load_repo', 'out', 1000, 64,
      precision='${SERVED_PRECISION:-bf16-activations}')") >>"$raw/split.log" 2>&1
  fi
  python3 bench/split_requests.py --repo bench/out/load_repo --model din_full --requests bench/out/load_din_full.jsonl \
    --out "$raw/split" 2>&1 | tee -a "$out/steps.log"
  timeout $((deadline - SECONDS)) python3 bench/string_cost.py --rankd ".bundle/run rankd" --repo bench/out/load_repo \
    --requests "$raw/split" --ids-model din_full --strings-model din_full_split --files din_full_ids,din_full_split \
    --rows 200 --rates "200:${SPLIT_RATE:-5000}" --wires http-binary,grpc-raw,grpc-typed --backend cuda \
    --server-cpus 0-7 --client-cpus 8-15 2>&1 | tee -a "$out/steps.log"
fi
step "done"
