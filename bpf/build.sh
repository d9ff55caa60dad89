#!/bin/sh
# Builds light.bpf.o from light.bpf.c. The object is committed (a plain
# `cargo build` needs no clang); scripts/test rebuilds it into a scratch
# directory and checks that it is byte for byte the committed one.
#
#   bpf/build.sh [OUT]      (default bpf/light.bpf.o; needs clang-14, llvm-strip-14)
set -eu
cd "$(dirname "$0")"
out=${1:-light.bpf.o}
# The object's BTF line info names the source file: build from this
# directory and map it to "." so the bytes do not depend on where the
# repository was cloned (CI's fresh clone is elsewhere).
clang-14 -target bpf -O2 -g -D__TARGET_ARCH_x86 -fdebug-prefix-map="$(pwd)"=. \
  -I/usr/include/x86_64-linux-gnu -c light.bpf.c -o "$out"
llvm-strip-14 -g "$out"
