#!/usr/bin/env bash
# Builds rankd, scores the bundled demo requests offline, then serves the demo model on the CPU:
# KServe v2 over HTTP on :8000, Prometheus metrics on :8002 (Ctrl-C stops it). Try, from another
# shell:   curl -s localhost:8000/v2/models/ctr_demo
#          curl -s -X POST localhost:8000/v2/models/ctr_demo/infer -d "$(head -1 models/demo/requests.jsonl)"
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh -DRANKD_TESTS=OFF
echo "--- offline: build/rankd run --model-repo models/demo --model ctr_demo --input models/demo/requests.jsonl"
build/rankd run --model-repo models/demo --model ctr_demo --input models/demo/requests.jsonl | cut -c1-160
echo "--- serving models/demo (HTTP :${HTTP_PORT:-8000}, metrics :${METRICS_PORT:-8002})"
# OpenMP threads sleep at once when idle rather than spin (docs/engine.md, "Rows over the CPU's threads").
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
exec build/rankd serve --model-repository models/demo --http-port "${HTTP_PORT:-8000}" --metrics-port "${METRICS_PORT:-8002}"
