#!/usr/bin/env bash
# The whole server under ThreadSanitizer, for changes to the serving core (frontends, batcher,
# executors); CI builds only batcher_test this way, a third full build being past its budget.
# Builds `rankd` with -DRANKD_TSAN=ON (clang, CPU backend) into TSAN_BUILD_DIR (default
# build-tsan-all), runs the server's Python tests and a short soak against it with TSan's reports
# written to files, then sorts the reports: one with a frame of gRPC's libraries (Abseil's included) or of
# the OpenMP runtime is passed over (their hand-offs between threads are not instrumented, so TSan reports
# them whether or not they race); any other is printed and the script exits 1.
# The tests' own verdicts are not the point here (they expect exit code 0 where TSan exits 66).
#   scripts/tsan_server.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${TSAN_BUILD_DIR:-build-tsan-all}
BUILD_DIR=$dir BUILD_TYPE=RelWithDebInfo scripts/build.sh -DCMAKE_CXX_COMPILER="$(scripts/clang.sh)" -DRANKD_TSAN=ON \
  -DRANKD_TESTS=ON -DRANKD_CUDA=OFF --target rankd
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
export TSAN_OPTIONS="halt_on_error=0 log_path=$reports/report"
for t in server_http_test server_binary_bodies_test server_batching_test server_tables_test server_shared_memory_test server_grpc_test \
  server_triton_test async_core_test reliability_test; do
  echo "== tests/$t.py"
  timeout 900 /usr/bin/python3 "tests/$t.py" "$dir/rankd" "$PWD" >"$reports/$t.out" 2>&1 || true
done
echo "== bench/soak.py, 20 s"
timeout 300 /usr/bin/python3 bench/soak.py "$dir/rankd" --seconds 20 --clients 4 --max-rss-growth-mb 4000 \
  >"$reports/soak.out" 2>&1 || true
/usr/bin/python3 - "$reports" <<'EOF'
import glob, os, re, sys

PASSED_OVER = re.compile(r"\((libgrpc|libgpr|libabsl|libomp)|#\d+ grpc(::|_)|#\d+ __kmp")  # library frames, not file paths
total, ours = 0, []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "report.*"))):
    with open(path, errors="replace") as f:
        for report in f.read().split("==================")[1:]:
            if "WARNING: ThreadSanitizer" not in report:
                continue
            total += 1
            if not PASSED_OVER.search(report):
                ours.append(report)
print(f"{total} reports, {total - len(ours)} with a gRPC or OpenMP runtime frame, {len(ours)} in rankd's own code")
for report in ours[:20]:
    print(report)
sys.exit(1 if ours else 0)
EOF
