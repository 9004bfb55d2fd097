#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds tests/install/example.cc against the
# installed copy twice - with pkg-config's flags and with CMake's find_package(rankd) - and runs
# both on a zoo model, the first also on W4s (a string input): the headers, librankd.so, rankd.pc
# and the CMake package work outside the source tree.
#   tests/install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/rankd/engine.h"
pc=$(dirname "$(find "$tmp/prefix" -name rankd.pc)")
libdir=$(PKG_CONFIG_PATH=$pc pkg-config --variable=libdir rankd)
g++ -std=c++20 -Wall -Werror -o "$tmp/example_pc" "$src/tests/install/example.cc" \
  $(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs rankd) -Wl,-rpath,"$libdir"
"$tmp/example_pc" "$src/models/zoo/din" | tee "$tmp/pc.out"
cmake -S "$src/tests/install" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/example" "$src/models/zoo/din" >"$tmp/cmake.out"
# The same model and request give the same scores either way.
diff "$tmp/pc.out" "$tmp/cmake.out"
test "$(wc -l <"$tmp/pc.out")" -eq 4  # the version, then three scores
test "$(head -1 "$tmp/pc.out")" = "librankd $(PKG_CONFIG_PATH=$pc pkg-config --modversion rankd)"
# A model with a string input (W4s): PackedStrings through the installed headers.
"$tmp/example_pc" "$src/models/zoo/mmoe_strings" >"$tmp/strings.out"
test "$(grep -c '^ctr ' "$tmp/strings.out")" -eq 3
echo "installed rankd: pkg-config and find_package builds score alike"
