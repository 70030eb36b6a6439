#!/usr/bin/env bash
# Is gemv_wide's cost per dispatch (17-21 µs on an H100, BENCHMARKS.md "FP4 by size around
# 256 MiB") the drain of its last workgroups? If so it grows with the bytes one workgroup
# streams, and fewer rows per workgroup shrink it (while the streaming rate may drop).
#
#   bash docs/experiments/gemv-wide/int8-fp8-call.sh build   # here: .bench/moescope-exp
#   bash docs/experiments/gemv-wide/drain-call.sh            # there (the tree travels), after
#                                                            # the .gl recipe; carry .bench
#
# NVFP4 at 256 and 384 MiB for 32, 16 and 8 rows per workgroup; fit time = a + bytes / B per
# setting from the two sizes. Not yet run (session 18 ran out of device time).
log=$OUT/drain.log
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$log"
for pair in "32 256" "16 256" "32 384" "16 384" "8 256" "8 384"; do
    set -- $pair
    echo "=== rows $1 mib $2" >> "$log"
    MOESCOPE_GEMV_WIDE=1 MOESCOPE_WIDE_ROWS=$1 timeout 40 .bench/moescope-exp bench kernels \
        --mib "$2" --iterations 40 --formats nvfp4 >> "$log" 2>&1
    echo "rc $?" >> "$log"
done
grep -E "^===|^rc|ceiling|^nvfp4" "$log"
