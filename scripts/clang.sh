#!/usr/bin/env bash
# Prints the clang++ the sanitizer and fuzzer builds use (clang-14 from Debian, or any clang++).
command -v clang++-14 || command -v clang++
