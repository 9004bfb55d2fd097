#!/usr/bin/env bash
# The test command: builds and runs every test, then the same tests under AddressSanitizer and
# UndefinedBehaviorSanitizer, the batcher under ThreadSanitizer, and the fuzzers for a short time.
#   scripts/test.sh            everything
#   scripts/test.sh --quick    the Release build's tests only
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
BUILD_DIR=build scripts/build.sh -DRANKD_TESTS=ON
(cd build && ctest --output-on-failure -j"$jobs")
[[ "${1:-}" == "--quick" ]] && exit 0
BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo scripts/build.sh -DRANKD_SANITIZE=ON -DRANKD_TESTS=ON -DRANKD_CUDA=OFF
# OpenBLAS and OpenMP runtimes keep thread pools alive past exit; they are not ours to free.
(cd build-asan && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 OMP_NUM_THREADS=2 \
  ctest --output-on-failure -j"$jobs")
# The threaded batcher under ThreadSanitizer (only that target: TSan needs its own build).
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRANKD_TSAN=ON -DRANKD_TESTS=ON \
  -DRANKD_CUDA=OFF >/dev/null
cmake --build build-tsan --target batcher_test -j"$jobs"
TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/batcher_test
scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
