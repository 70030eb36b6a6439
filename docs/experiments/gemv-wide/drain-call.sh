#!/usr/bin/env bash
# Is gemv_wide's cost per dispatch (17-21 µs on an H100, BENCHMARKS.md "FP4 by size around
# 256 MiB") the drain of its last workgroups? If so it grows with the bytes one workgroup
# streams: fewer rows per workgroup, or a tail of smaller workgroups at the end of the matrix
# (tail.patch: MOESCOPE_WIDE_TAIL=rows,step), would shrink it. Run in session 19 on an H100:
# no (BENCHMARKS.md, "The cost per dispatch is not the drain").
#
#   bash docs/experiments/gemv-wide/drain-call.sh build   # here: .bench/moescope-rows, -tail
#   bash docs/experiments/gemv-wide/drain-call.sh run     # there (the tree travels); carry
#                                                         # .gl and .bench
set -uo pipefail
here=docs/experiments
. $here/device.sh
case "${1:-}" in
build)
    # moescope-rows: MOESCOPE_WIDE_ROWS (shader-override.patch); moescope-tail: and tail.patch.
    build_patched rows $here/shader-override.patch || exit 1
    build_patched tail $here/shader-override.patch $here/gemv-wide/tail.patch || exit 1
    ;;
run)
    device_setup "$OUT/drain.log"
    for mib in 256 384; do
        for t in 0,8 4096,8 8192,8 16384,8 8192,16 0,8; do
            one env MOESCOPE_WIDE_TAIL=$t timeout 40 .bench/moescope-tail bench kernels \
                --mib $mib --iterations 40 --formats nvfp4
        done
    done
    for pair in "32 256" "16 256" "8 256" "32 384" "16 384" "8 384"; do
        set -- $pair
        one env MOESCOPE_GEMV_WIDE=1 MOESCOPE_WIDE_ROWS=$1 timeout 40 .bench/moescope-rows \
            bench kernels --mib "$2" --iterations 40 --formats nvfp4
    done
    grep -E "^===|^rc|ceiling|^nvfp4|NVIDIA H" "$log"
    ;;
*) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
