#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60), seeded with the
# zoo models. Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cxx=$(command -v clang++-14 || command -v clang++)
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRANKD_FUZZ=ON -DRANKD_TESTS=OFF -DRANKD_BENCH=OFF -DRANKD_CUDA=OFF >/dev/null
cmake --build build-fuzz --target fuzz_model_loader -j"$(nproc)"
corpus=build-fuzz/corpus/model_loader
mkdir -p "$corpus"
cp models/zoo/*/1/model.onnx "$corpus/" 2>/dev/null || true
for m in models/zoo/*/1/model.onnx; do cp "$m" "$corpus/$(basename "$(dirname "$(dirname "$m")")").onnx"; done
ASAN_OPTIONS=detect_leaks=1 build-fuzz/fuzz/fuzz_model_loader "$corpus" -max_total_time="$seconds" \
  -rss_limit_mb=4096 -max_len=1100000 -print_final_stats=1 2>&1 | tail -20
