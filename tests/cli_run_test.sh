#!/usr/bin/env bash
# `rankd run` and `rankd inspect` as a user runs them: bad lines are reported with their line
# number and do not stop the good ones; exit codes say what happened.
set -u
rankd=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

good=$(sed -n 1p "$src/tests/data/zoo/din.requests.jsonl")
{
  echo "$good"
  echo '{"inputs": [ {"name": '
  echo '{"inputs":[{"name":"nope","datatype":"FP32","shape":[1],"data":[1]}]}'
  echo ""
  echo "$good"
} > "$tmp/in.jsonl"
"$rankd" run --model-repo "$src/models/zoo" --model din --input "$tmp/in.jsonl" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] || fail "exit code $rc, want 1"
grep -q '^line 2: INVALID_ARGUMENT: the request body is not valid JSON' "$tmp/err" || fail "line 2 not reported: $(cat "$tmp/err")"
grep -q "^line 3: INVALID_ARGUMENT: unknown input 'nope'" "$tmp/err" || fail "line 3 not reported: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/out")" = 4 ] || fail "want 4 output lines, got $(wc -l <"$tmp/out")"
[ "$(sed -n 1p "$tmp/out")" = "$(sed -n 4p "$tmp/out")" ] || fail "the same request scored differently"
sed -n 1p "$tmp/out" | grep -q '"model_name":"din","model_version":"1","id":"din-0","outputs":\[{"name":"score","datatype":"FP32","shape":\[1,1\]' || fail "bad response: $(sed -n 1p "$tmp/out")"
sed -n 2p "$tmp/out" | grep -q '^{"error":' || fail "line 2 should be an error body"

# From stdin, all good: exit 0.
sed -n 1,3p "$src/tests/data/zoo/din.requests.jsonl" | "$rankd" run --model-repo "$src/models/zoo" --model din >"$tmp/out2" || fail "stdin run failed"
[ "$(wc -l <"$tmp/out2")" = 3 ] || fail "stdin: want 3 lines"

# A model that does not exist: exit 2 and a reason.
"$rankd" run --model-repo "$src/models/zoo" --model nosuch --input "$tmp/in.jsonl" >/dev/null 2>"$tmp/err3"
[ $? = 2 ] || fail "missing model should exit 2"
grep -q "does not exist" "$tmp/err3" || fail "missing model reason: $(cat "$tmp/err3")"

"$rankd" inspect --model-repo "$src/models/zoo" --model dlrm_dcnv2 >"$tmp/inspect" || fail "inspect failed"
grep -q "26 embedding bags recognised, 0 layer norms recognised, 1 concatenations of bags fused, 0 tables merged into others, 6 epilogues fused, 0 products of concatenations split, 0 sibling products merged, 0 expansions read as broadcasts, 3 multiply-adds fused, 3 multiply-adds fused into products, 0 attention units fused, 0 softmax attentions fused, 0 dot interactions fused, 0 element-wise chains fused, 26 ragged inputs" "$tmp/inspect" || fail "inspect: $(cat "$tmp/inspect")"
grep -q "ConcatEmbeddingBags *1" "$tmp/inspect" || fail "inspect op counts"
# The CPU's row split is decided at load: off on one thread, else auto with each probe's times.
grep -Eq "rows over the CPU's threads: (off|auto, up to [0-9]+ parts of 4 rows or more; [0-9]+ rows: [0-9]+ us whole, [0-9]+ split \((split|whole)\))" \
  "$tmp/inspect" || fail "inspect shows the row split: $(grep "rows over" "$tmp/inspect")"
"$rankd" inspect --model-repo "$src/models/zoo" --model mmoe_strings >"$tmp/inspect_strings" || fail "inspect W4s failed"
grep -q "categories *BYTES *\[rows, 6\]  strings: xxhash64 seed 0 % 100 -> INT64" "$tmp/inspect_strings" ||
  fail "inspect shows how strings become ids: $(cat "$tmp/inspect_strings")"
[ "$(grep -c "tables\.[0-9]*\.weight" "$tmp/inspect")" = 26 ] || fail "inspect lists the 26 tables the fused bags read"
# --nodes: the cross layers' up-projections carry their multiply-add (inputs 3 and 4: x0 and x).
"$rankd" inspect --model-repo "$src/models/zoo" --model dlrm_dcnv2 --nodes >"$tmp/dcn_nodes" || fail "inspect --nodes failed"
[ "$(grep -c "= Gemm(/cross_down.*, /Concat_output_0, " "$tmp/dcn_nodes")" = 3 ] || fail "inspect --nodes: $(cat "$tmp/dcn_nodes")"
# --nodes lists the graph after the passes: BST's three attentions each one node.
"$rankd" inspect --model-repo "$src/models/zoo" --model dlrm --nodes >"$tmp/dot_nodes" || fail "inspect --nodes failed"
grep -q "1 dot interactions fused" "$tmp/dot_nodes" || fail "inspect: $(cat "$tmp/dot_nodes")"
[ "$(grep -c "= DotInteraction(" "$tmp/dot_nodes")" = 1 ] || fail "inspect --nodes: $(cat "$tmp/dot_nodes")"
"$rankd" inspect --model-repo "$src/models/zoo" --model bst --nodes >"$tmp/nodes" || fail "inspect --nodes failed"
[ "$(grep -c "= SoftmaxAttention(" "$tmp/nodes")" = 3 ] || fail "inspect --nodes: $(cat "$tmp/nodes")"
# The table placement: with a budget of 0 every table of the tiny DLRM is in host memory.
"$rankd" inspect --model-repo "$src/models/zoo" --model dlrm_dcnv2 --table-gpu-budget-mb 0 >"$tmp/placed" ||
  fail "inspect --table-gpu-budget-mb failed"
grep -q "^tables: 26, 0.0 KiB on the GPU, 812.5 KiB in host memory, 0.0 KiB of GPU caches, 0.0 KiB on disk (GPU budget for tables: 0.0 KiB, host budget: none)" "$tmp/placed" ||
  fail "inspect placement: $(grep '^tables' "$tmp/placed")"
[ "$(grep -c "tables\.[0-9]*\.weight *host " "$tmp/placed")" = 26 ] || fail "inspect: every table on host"
# Every table cached with 10% of its rows: 100 of 1,000, an index of 4 bytes a row and 32-byte rows.
"$rankd" inspect --model-repo "$src/models/zoo" --model dlrm_dcnv2 --table-cache-percent 10 >"$tmp/cached" ||
  fail "inspect --table-cache-percent failed"
[ "$(grep -c "tables\.[0-9]*\.weight *cache  \[1000, 8\] FP32  31.2 KiB  cache of 100 rows (10.0%), 7.0 KiB on the GPU" "$tmp/cached")" = 26 ] ||
  fail "inspect --table-cache-percent: $(grep weight "$tmp/cached" | head -3)"

# The cache sizing from a request file: a row per size, the policy's hit ratio fed every lookup and
# as the server's keeper would feed it, Belady's and the static oracle's.
"$rankd" inspect --model-repo "$src/models/zoo" --model dlrm_dcnv2 --requests "$src/tests/data/zoo/dlrm_dcnv2.requests.jsonl" \
  --cache-mb 0.01,0.1 >"$tmp/sizing" || fail "inspect --requests failed"
grep -q "^cache sizing from 12 requests: 2802 lookups" "$tmp/sizing" || fail "inspect sizing: $(cat "$tmp/sizing")"
[ "$(grep -cE "^ +[0-9.]+ KiB +[0-9]+ +0\.[0-9]{4} +0\.[0-9]{4} +0\.[0-9]{4} +[01]\.[0-9]{4}$" "$tmp/sizing")" = 2 ] ||
  fail "inspect sizing rows: $(cat "$tmp/sizing")"

# The cache simulator: hit ratios per capacity, the policy within Belady's optimum, a snapshot file.
"$rankd" bench cache --rows 20000 --accesses 100000 --capacity 500,2000 --snapshot "$tmp/hot.bin" \
  --json "$tmp/cache.json" >"$tmp/cache" || fail "bench cache failed"
[ -s "$tmp/hot.bin" ] || fail "bench cache wrote no snapshot"
/usr/bin/python3 - "$tmp/cache.json" <<'PY' || fail "bench cache results: $(cat "$tmp/cache")"
import json, sys
r = json.load(open(sys.argv[1]))["results"]
assert [x["capacity"] for x in r] == [500, 2000], r
for x in r:
    assert 0.3 < x["policy_hit_ratio"] <= x["belady_hit_ratio"] <= 1, x
assert r[0]["policy_hit_ratio"] < r[1]["policy_hit_ratio"], r
PY
# A hot set that moves: after each of its 4 moves the policy is back near the oracle of the stretch.
"$rankd" bench cache --rows 20000 --accesses 250000 --capacity 200 --drift-every 50000 --drift-rows 2000 \
  --json "$tmp/drift.json" >"$tmp/drift" || fail "bench cache with a drift failed"
/usr/bin/python3 - "$tmp/drift.json" <<'PY' || fail "bench cache recovery: $(cat "$tmp/drift")"
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
assert r["moves"] == 4 and r["recovered"] == 4, r
assert 0 < r["recovery_accesses_median"] <= r["recovery_accesses_max"] < 50000, r
PY
echo "cli_run: ok"
