#!/usr/bin/env bash
# The test command: checks the sources' layout, builds and runs every test (Release, with the CUDA backend where nvcc is
# present), then the same tests under AddressSanitizer and UndefinedBehaviorSanitizer, the batcher
# under ThreadSanitizer, and the fuzzers for a short time.
#   scripts/test.sh            everything
#   scripts/test.sh --quick    the Release build's tests only
# The sanitizer tests and the fuzzers share one clang build (the library instrumented for both),
# so the library is compiled twice in all, not three times; ccache is used where installed.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
start=$SECONDS
phase() { echo "== $1 (at $((SECONDS - start)) s)"; }
phase "layout (clang-format)"
scripts/format.sh --check
phase "Release build"
BUILD_DIR=build scripts/build.sh -DRANKD_TESTS=ON
phase "Release tests"
(cd build && ctest --output-on-failure -j"$jobs")
[[ "${1:-}" == "--quick" ]] && exit 0
phase "ASan/UBSan + fuzzer build (clang)"
BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo scripts/build.sh -DCMAKE_CXX_COMPILER="$(scripts/clang.sh)" \
  -DRANKD_SANITIZE=ON -DRANKD_FUZZ=ON -DRANKD_TESTS=ON -DRANKD_CUDA=OFF
phase "ASan/UBSan tests"
# OpenBLAS and OpenMP runtimes keep thread pools alive past exit; they are not ours to free.
(cd build-asan && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 OMP_NUM_THREADS=2 \
  ctest --output-on-failure -j"$jobs")
phase "TSan batcher and embedding host tier"
# The threaded pieces (the batcher, the merge gate, the helping pool, the completion poller, gRPC's call queue;
# rows in files, their host caches and the caches' warm start) under ThreadSanitizer (only those targets: TSan
# needs its own build).
BUILD_DIR=build-tsan BUILD_TYPE=RelWithDebInfo scripts/build.sh -DRANKD_TSAN=ON -DRANKD_TESTS=ON -DRANKD_CUDA=OFF \
  --target batcher_test embedding_host_test
TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/batcher_test
TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/embedding_host_test
phase "fuzzers"
FUZZ_BUILD_DIR=build-asan scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
phase "done"
