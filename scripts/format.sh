#!/usr/bin/env bash
# Lays out the C++ and CUDA sources with clang-format 14 (.clang-format).
#   scripts/format.sh          rewrites files in place
#   scripts/format.sh --check  changes nothing; fails naming the files that are not laid out
set -euo pipefail
cd "$(dirname "$0")/.."
tool=$(command -v clang-format-14 || command -v clang-format)
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
if [[ "${1:-}" == "--check" ]]; then
  "$tool" --dry-run --Werror "${files[@]}"
else
  "$tool" -i "${files[@]}"
fi
