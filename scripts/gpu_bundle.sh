#!/usr/bin/env bash
# Packs what a GPU-machine run needs into .bundle/ (ignored by git), within the 64 MiB a device
# run carries, with COMMIT, the commit it was built from (reports name it):
#   scripts/gpu_bundle.sh        the tests with the libraries that machine lacks and the ONNX
#                                conformance cases of the ops rankd runs (it has no libonnx-testdata)
#   scripts/gpu_bundle.sh rankd  rankd itself (server and benchmarks), compressed,
#                                bench/host_reads.cu built as .bundle/host_reads and
#                                bench/omp_regions.cc as .bundle/omp_regions.so
#   scripts/gpu_bundle.sh all    both programs, compressed (no ONNX cases)
#   PERF=1 scripts/gpu_bundle.sh all
#                                also Debian's perf (with the libraries it loads) as .bundle/perf.tar.xz,
#                                for bench/profile_served.sh
#   BASE_RANKD=other/build/rankd scripts/gpu_bundle.sh all
#                                also another build of rankd as rankd_base (a before/after A/B:
#                                bench/gpu_quick.sh's AB=RANKD_BINARY=rankd_base,rankd)
# Then, on the GPU machine (docs/cuda.md, docs/log/benchmarks.md):
#   RANKD_SOURCE_DIR=$PWD RANKD_ONNX_TESTDATA=$PWD/.bundle/onnx_node .bundle/run rankd_tests --gtest_filter='*Cuda*'
#   tar -xJf .bundle/rankd.tar.xz && bench/gpu_report.sh          (rankd or all)
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx "/.bundle/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo /.bundle/ >> .git/info/exclude; }
BUILD_DIR=${BUILD_DIR:-build}
# bench/kernel_trace.cc as .bundle/lib/librankd_trace.so, with the libcupti it loads, where nvcc's
# toolkit has CUPTI (bench/gpu_quick.sh's trace step); else nothing.
bundle_kernel_trace() {
  local root lib
  root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /nonexistent/bin/nvcc)")")")
  for lib in "$root/lib" "$root/lib64" "$root/extras/CUPTI/lib64"; do
    [[ -e $lib/libcupti.so ]] && break
  done
  if [[ ! -e $lib/libcupti.so || ! -e $root/include/cupti.h ]]; then
    echo "no CUPTI beside nvcc: the bundle has no kernel tracer"
    return 0
  fi
  g++ -std=c++20 -O2 -Wall -Wextra -Werror -shared -fPIC -o .bundle/lib/librankd_trace.so bench/kernel_trace.cc \
    -I"$root/include" -L"$lib" -lcupti -Wl,-rpath,'$ORIGIN'
  cp -L "$lib/$(objdump -p .bundle/lib/librankd_trace.so | awk '/NEEDED.*cupti/ {print $2}')" .bundle/lib/
}
# bench/host_reads.cu as .bundle/host_reads (the host tier's read rates), where nvcc is here.
bundle_host_reads() {
  command -v nvcc >/dev/null || return 0
  nvcc -O2 -std=c++17 -arch=sm_90 -Xcompiler -Wall,-Wextra,-Werror -o .bundle/host_reads bench/host_reads.cu
}
rm -rf .bundle
commit=$(git describe --always --dirty)
if [[ ${1:-} == rankd || ${1:-} == all ]]; then
  programs=("$BUILD_DIR/rankd")
  [[ $1 == all ]] && programs+=("$BUILD_DIR/tests/rankd_tests")
  if [[ -n ${BASE_RANKD:-} ]]; then
    cp "$BASE_RANKD" "$BUILD_DIR/rankd_base"
    programs+=("$BUILD_DIR/rankd_base")
  fi
  ../shared/tools/device-bundle .bundle "${programs[@]}" >/dev/null
  strip .bundle/bin/*
  bundle_kernel_trace
  echo "$commit" > .bundle/COMMIT
  tar -cJf rankd.tar.xz .bundle && rm -rf .bundle && mkdir .bundle && mv rankd.tar.xz .bundle/
  bundle_host_reads
  # bench/omp_regions.cc: an LD_PRELOAD library logging the OpenMP regions (its header says how).
  g++ -std=c++20 -O2 -Wall -Wextra -Werror -shared -fPIC -o .bundle/omp_regions.so bench/omp_regions.cc -ldl
  echo "$commit" > .bundle/COMMIT
  if [[ -n ${PERF:-} ]]; then
    perf_dir=$(mktemp -d)
    ../shared/tools/device-bundle "$perf_dir/p" "$(command -v perf)" >/dev/null
    tar -C "$perf_dir/p" -cJf .bundle/perf.tar.xz bin lib run
    rm -rf "$perf_dir"
  fi
  du -sh --apparent-size .bundle | awk '{print "bundle: " $1 " (on the device: tar -xJf .bundle/rankd.tar.xz)"}'
  exit 0
fi
../shared/tools/device-bundle .bundle "$BUILD_DIR/tests/rankd_tests" >/dev/null
strip .bundle/bin/*
echo "$commit" > .bundle/COMMIT
mkdir -p .bundle/onnx_node
# The ops CUDA kernels run, and those a compile pass lowers into them (Split into Slices).
ops=$(grep -ho '"[A-Z][A-Za-z]*"' src/backend/cuda/*.cu src/backend/cuda/*.cc src/compile/*_lowering.cc | tr -d '"' | sort -u)
data=${RANKD_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data/node}
# ONNX names its cases test_<op in snake case or lower case>...; keep those of the ops rankd runs.
prefixes=()
for op in $ops; do
  prefixes+=("$(echo "$op" | sed -E 's/([a-z0-9])([A-Z])/\1_\2/g' | tr 'A-Z' 'a-z')" "$(echo "$op" | tr 'A-Z' 'a-z')")
done
for dir in "$data"/test_*; do
  name=$(basename "$dir")
  for prefix in "${prefixes[@]}"; do
    if [[ $name == test_${prefix}* ]]; then cp -r "$dir" .bundle/onnx_node/; break; fi
  done
done
du -sh --apparent-size .bundle | awk '{print "bundle: " $1 " (a device run carries at most 64 MiB with the tree)"}'
echo "onnx cases: $(ls .bundle/onnx_node | wc -l)"
