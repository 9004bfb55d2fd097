#!/usr/bin/env bash
# Installs the Debian packages rankd needs to build, test and export models. Safe to re-run.
#   scripts/setup.sh          build + test dependencies
#   scripts/setup.sh --zoo    also PyTorch and ONNX for Python (to re-export the model zoo)
set -euo pipefail
packages=(
  cmake g++ make pkg-config           # the build
  ccache                              # rebuilds reuse unchanged objects (scripts/build.sh)
  libprotobuf-dev protobuf-compiler   # ONNX files are protobuf
  libonnx-dev                         # ONNX's own protobuf schema and its generated C++ classes
  libdnnl-dev                         # oneDNN: multi-threaded sgemm for the CPU backend
  libopenblas-openmp-dev              # OpenBLAS (OpenMP build): the alternative sgemm (-DRANKD_CPU_GEMM=openblas)
  libomp-dev                          # OpenMP for the CPU kernels (and clang's fuzz build)
  nlohmann-json3-dev                  # JSON: configs, responses, and KServe v2 bodies over 8 MB
  libsimdjson-dev                     # JSON: KServe v2 request bodies (and binary requests' headers)
  libyaml-cpp-dev                     # YAML model configs
  libcli11-dev                        # the command line
  libboost-dev                        # Boost.Asio / Boost.Beast: the HTTP server
  zlib1g-dev                          # gzip and deflate HTTP bodies
  liburing-dev                        # io_uring: a table's rows read from disk in batches (the SSD tier)
  libfarmhash-dev libxxhash-dev libmurmurhash-dev  # string features hashed as TensorFlow, xxHash and Spark do
  python3-xxhash                      # the string tests' independent hash (Python's own xxHash binding)
  libgrpc++-dev protobuf-compiler-grpc  # the gRPC frontend (KServe v2 gRPC)
  python3-grpcio python3-grpc-tools   # the gRPC client in the server tests
  libssl-dev                          # HTTPS (Boost.Asio's TLS streams on OpenSSL)
  openssl                             # the server tests' TLS certificates
  libspdlog-dev                       # the server's log
  libgtest-dev libgmock-dev           # tests
  libonnx-testdata                    # ONNX's conformance cases: the independent op reference
  clang-14 libclang-rt-14-dev         # libFuzzer and sanitizers for the fuzz targets
  clang-format-14                     # the C++ layout, checked by the test command (scripts/format.sh)
  python3-numpy                       # scripts
  gnuplot-nox                         # benchmark plots (bench/report.py)
)
if [[ "${1:-}" == "--zoo" ]]; then
  packages+=(python3-torch python3-onnx)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) == 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup: all packages present"
