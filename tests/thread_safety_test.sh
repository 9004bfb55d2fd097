#!/usr/bin/env bash
# Thread-safety annotations are enforced (common/mutex.h, -Wthread-safety in clang builds): a field
# marked RANKD_GUARDED_BY read with its mutex held builds, one read without it does not.
# Usage: thread_safety_test.sh <build dir>
set -uo pipefail
build=$1
fail() { echo "FAIL: $*"; exit 1; }
out=$(cmake --build "$build" --target thread_safety_guarded 2>&1) || fail "the guarded probe did not build: $out"
if out=$(cmake --build "$build" --target thread_safety_unguarded 2>&1); then
  fail "a read without the mutex built"
fi
grep -q "requires holding mutex" <<<"$out" || fail "the unguarded probe failed for another reason: $out"
echo "thread-safety analysis holds"
