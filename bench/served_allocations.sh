#!/usr/bin/env bash
# Heap allocations a served request costs: `rankd serve` (the CPU backend, tiny models) while
# bench/load_bench.py offers W1 or W2 (hoisted) over one protocol, with perf counting the server's
# calls of libc's malloc and memalign (uprobes) for 4 s inside the measured run (before 2026-12-07
# the window could fall on the warm-up passes at 50/s, and the counts came out low). Exact counts, unlike the CPU a request,
# which the development machine cannot resolve to a few percent: a change to what a request
# allocates shows here first (docs/log/benchmarks.md, "A tensor's shape held inline").
#
#   sudo bench/served_allocations.sh [RANKD] [W1|W2] [http|grpc]
#     RANKD: the rankd command (default build/rankd; a bundle's: ".bundle/run rankd")
#
# Needs perf with uprobes on libc (root). Prints the requests answered in the counted window and
# mallocs and memaligns per request. The server is on core 0, the client on core 1.
set -euo pipefail
cd "$(dirname "$0")/.."
rankd=${1:-build/rankd} workload=${2:-W1} protocol=${3:-http}
libc=$(ldconfig -p | awk '/libc.so.6 .*x86-64/ && !found {print $NF; found = 1}')  # reads it all: no SIGPIPE under pipefail
for probe in malloc memalign; do
  perf probe -q -x "$libc" --add "$probe" 2>/dev/null || true  # already placed by an earlier run
  placed=$(perf probe -l 2>/dev/null || true)
  [[ $placed == *"probe_libc:$probe"* ]] || { echo "cannot place a uprobe on $libc's $probe (root and perf needed)"; exit 3; }
done
counts=$(mktemp) wrapper=$(mktemp)
cat >"$wrapper" <<WRAP
#!/usr/bin/env bash
if [[ \$1 == serve ]]; then
  $rankd "\$@" &
  pid=\$!
  ( for _ in \$(seq 600); do pgrep -f -- "bench server.*--connections 128" >/dev/null && break; sleep 0.2; done
    sleep 2; perf stat -x, -e probe_libc:malloc,probe_libc:memalign -p \$pid -o $counts -- sleep 4 >/dev/null 2>&1 ) &
  wait \$pid
  exit \$?
fi
exec $rankd "\$@"
WRAP
chmod +x "$wrapper"
rate=200
rates=(--w1-rates=$rate --w2-rates=)
[[ $workload == W2 ]] && rate=400 && rates=(--w1-rates= --w2-rates=$rate)
line=$(/usr/bin/python3 bench/load_bench.py --rankd "$wrapper" --backend cpu --size tiny --server-cpus 0 --client-cpus 1 \
  --protocols "$protocol" "${rates[@]}" --seconds 8 --batching on --hoisting on --lengths tensor | grep "^| W" | tail -1)
echo "$line"
achieved=$(echo "$line" | awk -F'|' '{print $7}')
/usr/bin/python3 - "$counts" "$achieved" <<'PY'
import sys
counts = {}
for line in open(sys.argv[1]):
    fields = line.strip().split(",")
    if len(fields) > 2 and fields[0].isdigit():
        counts[fields[2]] = int(fields[0])
requests = 4 * float(sys.argv[2])  # the rate achieved over the counted 4 s
print("about %d requests counted: %.0f mallocs and %.1f memaligns a request"
      % (requests, counts["probe_libc:malloc"] / requests, counts["probe_libc:memalign"] / requests))
PY
rm -f "$counts" "$wrapper"
