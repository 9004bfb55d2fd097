#!/usr/bin/env bash
# Where a served request's host CPU goes: `rankd serve` under perf while bench/load_bench.py offers
# one workload at one rate over one protocol (server on cores 0-7, client on 8-15, as the
# served-load benchmark). perf samples the server (cpu-clock, 499 Hz, call chains) for 10 s in the
# middle of a 15 s run and writes OUT/serve.data; the table of the run goes to OUT/served.md.
#
#   here:    PERF=1 scripts/gpu_bundle.sh all          (Debian's perf packed into the bundle)
#   there:   tar -xJf .bundle/rankd.tar.xz && bench/profile_served.sh OUT [W1|W2] [RATE] [grpc|http]
#            (SERVER_CPUS, CLIENT_CPUS, BATCHING and SERVE_ARGS change the split, batching and flags:
#            SERVER_CPUS=0-15 CLIENT_CPUS=16-31 SERVE_ARGS=--gpus=all on a two-GPU host;
#            RANKD_BINARY=rankd_base profiles the bundle's other build, BASE_RANKD=... scripts/gpu_bundle.sh;
#            PERF_SAMPLING replaces "-e cpu-clock -F 499 -g", e.g. "-e sched:sched_switch --call-graph dwarf,8192":
#            where the server's threads go to sleep, each context switch a sample)
#   here:    perf buildid-cache -a build/rankd        (the bundle's rankd is stripped; same build id)
#            perf report -i OUT/serve.data --no-children --sort dso,sym -g none --stdio
#
# The report is read here, not there: there perf finds no symbols for the stripped binary (and a
# report there once ran past the call's time limit).
set -uo pipefail
out=$(cd "$1" && pwd) workload=${2:-W1} rate=${3:-6000} protocol=${4:-grpc}
[[ -f .bundle/perf.tar.xz ]] || { echo "no .bundle/perf.tar.xz: PERF=1 scripts/gpu_bundle.sh all"; exit 3; }
mkdir -p .bundle/perf && tar -C .bundle/perf -xJf .bundle/perf.tar.xz
perf=(.bundle/perf/run perf)
"${perf[@]}" stat -e cpu-clock true >"$out/perf_check.txt" 2>&1 || { echo "perf cannot sample here:"; cat "$out/perf_check.txt"; exit 5; }
ctl=$(mktemp -u) ack=$(mktemp -u) wrapper=$(mktemp)
mkfifo "$ctl" "$ack"
here=$PWD
# `rankd serve` runs under perf, started with sampling off; every other rankd command runs as is.
cat >"$wrapper" <<WRAP
#!/usr/bin/env bash
if [[ \$1 == serve ]]; then
  exec $here/.bundle/perf/run perf record ${PERF_SAMPLING:--e cpu-clock -F 499 -g} -D -1 --control fifo:$ctl,$ack \
    -o $out/serve.data -- $here/.bundle/run ${RANKD_BINARY:-rankd} "\$@"
fi
exec $here/.bundle/run rankd "\$@"
WRAP
chmod +x "$wrapper"
rates=(--w1-rates= --w2-rates=)
[[ $workload == W1 ]] && rates[0]=--w1-rates=$rate
[[ $workload == W2 ]] && rates[1]=--w2-rates=$rate
python3 bench/load_bench.py --rankd "$wrapper" --backend cuda --size full --server-cpus "${SERVER_CPUS:-0-7}" \
  --client-cpus "${CLIENT_CPUS:-8-15}" --hoisting on --din-length 1000 --precision bf16-activations \
  --batching "${BATCHING:-on}" --queue-delay-us 0 --serve-args="${SERVE_ARGS:-}" \
  --protocols "$protocol" "${rates[@]}" --seconds 15 >"$out/served.md" 2>"$out/served.log" &
bench=$!
# The measured run is the client's only one of 15 s.
for _ in $(seq 1200); do pgrep -f -- "--seconds 15.0" >/dev/null && break; sleep 0.5; done
sleep 2
# A write to the control FIFO blocks while nothing reads it (perf gone with the server): bounded.
control() { timeout 10 bash -c "echo $1 >'$ctl'" && timeout 10 cat "$ack" >/dev/null; }
control enable
sleep 10
control disable || echo "perf was gone before sampling stopped"
# The client stops the server when its run ends; if perf keeps it alive past that (a run once
# waited here until the call's time limit), perf is interrupted (it writes its data) and the
# server killed, so the script always ends.
for _ in $(seq 90); do kill -0 "$bench" 2>/dev/null || break; sleep 1; done
if kill -0 "$bench" 2>/dev/null; then
  echo "the run had not ended 90 s after sampling: interrupting perf, then the server"
  pkill -INT -f "perf record"
  sleep 10
  pkill -KILL -f "rankd serve"
fi
wait $bench
echo "load_bench exit $?"
cat "$out/served.md"
rm -f "$ctl" "$ack" "$wrapper"
ls -la "$out/serve.data"
