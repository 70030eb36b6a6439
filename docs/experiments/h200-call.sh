#!/usr/bin/env bash
# The measurement issue 6 asks for, on an H200: the landed kernels at 256 MiB, 512 MiB and 1 GiB
# (× the fastest copy of the same process), then the weight-formats table, with the SM clock
# logged every 250 ms. Not yet run with the current kernels: no H200 was lent in sessions 17-19.
#
#   bash docs/experiments/h200-call.sh build   # here: .bench/moescope-head (HEAD, release)
#   bash docs/experiments/h200-call.sh run     # there, with .gl and .bench carried; ~200 s
#                                              # after the start
# On any other GPU `run` says so and stops at once, so that a call that lands on an H100 costs
# only its start (the H100's figures are in BENCHMARKS.md, session 18).
set -uo pipefail
. docs/experiments/device.sh
case "${1:-}" in
build)
    build_patched head || exit 1
    ;;
run)
    nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 \
        || { echo "not an H200: nothing run"; nvidia-smi -L; exit 0; }
    device_setup "$OUT/h200.log"
    b=.bench/moescope-head
    for mib in 256 512 1024; do
        one timeout 100 $b bench kernels --mib $mib --iterations 40 \
            --formats int8,fp8-e4m3,nvfp4,mxfp4
    done
    one timeout 120 $b bench formats --steps 16 --rounds 3
    grep -vE "^\{" "$log" | grep -E "^===|^rc|ceiling|^f32|^f16|^bf16|^int8|^fp8|^nvfp4|^mxfp4|best gemv|\|"
    ;;
*) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
