#!/usr/bin/env bash
# Builds rankd and scores the bundled demo requests with the bundled demo model on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh -DRANKD_TESTS=OFF -DRANKD_BENCH=OFF
build/rankd inspect --model-repo models/demo --model ctr_demo
echo "--- scoring models/demo/requests.jsonl"
build/rankd run --model-repo models/demo --model ctr_demo --input models/demo/requests.jsonl
