#!/usr/bin/env bash
# The test command: builds and runs every test, then the same tests under AddressSanitizer and
# UndefinedBehaviorSanitizer, then the model-loader fuzzer for a short time.
#   scripts/test.sh            everything
#   scripts/test.sh --quick    the Release build's tests only
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
BUILD_DIR=build scripts/build.sh -DRANKD_TESTS=ON -DRANKD_BENCH=ON
(cd build && ctest --output-on-failure -j"$jobs")
[[ "${1:-}" == "--quick" ]] && exit 0
BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo scripts/build.sh -DRANKD_SANITIZE=ON -DRANKD_TESTS=ON -DRANKD_BENCH=OFF -DRANKD_CUDA=OFF
# OpenBLAS and OpenMP runtimes keep thread pools alive past exit; they are not ours to free.
(cd build-asan && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 OMP_NUM_THREADS=2 \
  ctest --output-on-failure -j"$jobs")
scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
