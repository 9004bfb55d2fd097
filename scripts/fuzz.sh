#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60): the model loader
# seeded with the zoo models, the request parser with zoo requests.  Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cxx=$(command -v clang++-14 || command -v clang++)
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRANKD_FUZZ=ON -DRANKD_TESTS=OFF -DRANKD_CUDA=OFF >/dev/null
cmake --build build-fuzz --target fuzz_model_loader fuzz_request_parser -j"$(nproc)"
mkdir -p build-fuzz/corpus/model_loader build-fuzz/corpus/request_parser
for m in models/zoo/*/1/model.onnx; do cp "$m" "build-fuzz/corpus/model_loader/$(basename "$(dirname "$(dirname "$m")")").onnx"; done
for m in /usr/share/libonnx-testdata/data/node/test_split_*/model.onnx; do  # Split, lowered to Slices
  if [[ -f $m ]]; then cp "$m" "build-fuzz/corpus/model_loader/$(basename "$(dirname "$m")").onnx"; fi
done
cp fuzz/corpus/request_parser/* build-fuzz/corpus/request_parser/
run() {
  local target=$1 corpus=$2 max_len=$3
  echo "== $target for ${seconds}s"
  ASAN_OPTIONS=detect_leaks=1 "build-fuzz/fuzz/$target" "$corpus" -max_total_time="$seconds" \
    -rss_limit_mb=4096 -max_len="$max_len" -print_final_stats=1 2>&1 | tail -6
  return "${PIPESTATUS[0]}"
}
run fuzz_model_loader build-fuzz/corpus/model_loader 1100000
run fuzz_request_parser build-fuzz/corpus/request_parser 65536
