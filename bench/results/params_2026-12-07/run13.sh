#!/usr/bin/env bash
# Device call 13: every in-process GPU test (bench/scripts/gpu_tests.sh, prebuilt): the 28 built by
# CI's clean clone of 8d8b8ce (build-ci/tests/gpu, stripped) and test_gpu_one_shot of e8cf5db (its
# bitwise case), all in .deps/bins13.tar.xz.
#   bash bench/results/params_2026-12-07/run13.sh OUT
set -u
OUT=${1:?usage: run13.sh OUT}
mkdir -p .deps/bin13 && tar xJf .deps/bins13.tar.xz -C .deps/bin13
BIN=.deps/bin13 bash bench/scripts/gpu_tests.sh "$OUT"
