#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60; the four request
# and config targets for half of it): the model loader seeded with the zoo models and the exported
# nn.EmbeddingBag Loops (tests/data/embedding_bags), the JSON request
# parser, the gRPC request builder, HTTP/1.1 framing through the REST routes, and model configs,
# each from fuzz/corpus/, two at a time where there are two cores.  Usage: scripts/fuzz.sh [SECONDS]
# The runs use a fixed seed (FUZZ_SEED, default 1), so that the test command replays the same
# mutations wherever it runs: a red CI is a regression, reproducible, not a new find by chance.
# Exploring is for longer runs outside CI with other seeds: FUZZ_SEED=0 (random) scripts/fuzz.sh 3600,
# then read the stats lines it prints; crashes are written to the current directory.
# FUZZ_BUILD_DIR (default build-fuzz) is the clang build to use; scripts/test.sh passes its
# sanitizer build, which is configured with the fuzzers too.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
dir=${FUZZ_BUILD_DIR:-build-fuzz}
BUILD_DIR=$dir BUILD_TYPE=RelWithDebInfo scripts/build.sh -DCMAKE_CXX_COMPILER="$(scripts/clang.sh)" -DRANKD_FUZZ=ON \
  -DRANKD_CUDA=OFF --target fuzz_model_loader fuzz_request_parser fuzz_grpc_request fuzz_http_request fuzz_model_config
mkdir -p "$dir/corpus/model_loader"
for c in request_parser grpc_request http_request model_config; do
  mkdir -p "$dir/corpus/$c"
  cp fuzz/corpus/$c/* "$dir/corpus/$c/"
done
for m in models/zoo/*/1/model.onnx; do cp "$m" "$dir/corpus/model_loader/$(basename "$(dirname "$(dirname "$m")")").onnx"; done
cp tests/data/embedding_bags/*.onnx "$dir/corpus/model_loader/"  # both exporters' nn.EmbeddingBag Loops
for m in /usr/share/libonnx-testdata/data/node/test_split_*/model.onnx; do  # Split, lowered to Slices
  if [[ -f $m ]]; then cp "$m" "$dir/corpus/model_loader/$(basename "$(dirname "$m")").onnx"; fi
done
run() {
  local target=$1 corpus=$2 max_len=$3 time=${4:-$seconds}
  echo "== $target for ${time}s"
  ASAN_OPTIONS=detect_leaks=1 "$dir/fuzz/$target" "$corpus" -max_total_time="$time" \
    -rss_limit_mb=4096 -timeout=25 -seed="${FUZZ_SEED:-1}" -max_len="$max_len" -print_final_stats=1 2>&1 | tail -6
  return "${PIPESTATUS[0]}"
}
half=$(((seconds + 1) / 2))
# Two lanes of 1.5 x SECONDS each, side by side where there are two cores or more (each fuzzer keeps
# a core to itself, so it runs as many inputs as alone), one after the other where there is one.
lane_a() {
  run fuzz_model_loader "$dir/corpus/model_loader" 1100000 &&
    run fuzz_http_request "$dir/corpus/http_request" 65536 "$half"
}
lane_b() {
  run fuzz_request_parser "$dir/corpus/request_parser" 65536 "$half" &&
    run fuzz_grpc_request "$dir/corpus/grpc_request" 65536 "$half" &&
    run fuzz_model_config "$dir/corpus/model_config" 16384 "$half"
}
if (($(nproc) < 2)); then
  lane_a
  lane_b
  exit 0
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
lane_a > "$logs/a" 2>&1 &
a=$!
lane_b > "$logs/b" 2>&1 &
b=$!
status_a=0 status_b=0
wait "$a" || status_a=$?
wait "$b" || status_b=$?
cat "$logs/a" "$logs/b"
((status_a == 0 && status_b == 0))
