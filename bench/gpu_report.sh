#!/usr/bin/env bash
# The GPU report in one command, on the GPU machine (docs/log/benchmarks.md says how it is run):
# rankd's engine benchmark and the PyTorch peers on every workload and batch size
# (bench/gpu_bench.py), then open-loop load against `rankd serve` on the GPU for W1 and W2,
# batching off and on (bench/load_bench.py). Builds nothing: it runs the rankd carried in .bundle
# (scripts/gpu_bundle.sh rankd).
#   bench/gpu_report.sh OUT_DIR
# Writes OUT_DIR/gpu_report.json and .md, OUT_DIR/load.json, the GPU's name and clocks, and the
# logs. Then, on the development machine, the report goes into docs/log/benchmarks.md with its plots:
#   /usr/bin/python3 bench/report.py --gpu OUT_DIR/gpu_report.json --load OUT_DIR/load.json \
#       --docs docs/log/benchmarks.md --plots docs/plots
# GPU_BENCH_ARGS and LOAD_BENCH_ARGS replace the defaults below (e.g. fewer workloads).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/gpu_report.sh OUT_DIR}
mkdir -p "$out"
[[ -x .bundle/run ]] || tar -xJf .bundle/rankd.tar.xz
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >"$out/gpu.csv" || true
python3 bench/gpu_bench.py --rankd ".bundle/run rankd" --report "$out" ${GPU_BENCH_ARGS:-} 2>&1 | tee "$out/gpu_bench.log"
python3 bench/load_bench.py --rankd ".bundle/run rankd" --backend cuda --size full \
  ${LOAD_BENCH_ARGS:---w1-rates 100,200,300,400 --w2-rates 100,250,500,750 --din-length 1000 --seconds 4 --requests 32} \
  --json "$out/load.json" 2>&1 | tee "$out/load_bench.log"
