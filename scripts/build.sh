#!/usr/bin/env bash
# Configures and builds rankd into BUILD_DIR (default build/). Arguments up to `--target` go to
# cmake's configure step; `--target T...` builds only those targets. ccache is used when installed.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}
configure=() targets=()
while (($#)); do
  if [[ $1 == --target ]]; then
    shift
    targets=(--target "$@")
    break
  fi
  configure+=("$1")
  shift
done
launcher=()
if command -v ccache >/dev/null; then
  # The tests' precompiled header: ccache reuses what was compiled against it only when told to (its manual).
  launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_SLOPPINESS=pch_defines,time_macros;ccache"
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "${launcher[@]}" "${configure[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
