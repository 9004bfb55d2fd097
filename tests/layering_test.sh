#!/usr/bin/env bash
# The layering rule (src/CMakeLists.txt): against a layer's include root, a header of that layer or
# a lower one compiles, and a header of a higher or side-by-side layer does not. Also no source
# reaches around the roots with a relative "../" include.
# Usage: layering_test.sh <build dir> <source dir>
set -uo pipefail
build=$1 src=$2
fail() { echo "FAIL: $*"; exit 1; }

out=$(cmake --build "$build" --target layering_downward_include 2>&1) || fail "a downward include did not build: $out"
for probe in layering_upward_include:serving/model.h layering_side_include:backend/cuda/device.h; do
  target=${probe%%:*} header=${probe#*:}
  if out=$(cmake --build "$build" --target "$target" 2>&1); then
    fail "$target built: $header is visible from below"
  fi
  grep -q "$header" <<<"$out" || fail "$target failed for another reason than $header: $out"
done
if grep -rnE '#include "\.\./' "$src/src"; then
  fail "relative includes reach around the layer roots"
fi
echo "layering holds"
