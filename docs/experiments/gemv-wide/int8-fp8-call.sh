#!/usr/bin/env bash
# One device call that decides int8-fp8.patch (docs/experiments/README.md, session 17).
#
#   bash docs/experiments/gemv-wide/int8-fp8-call.sh build   # here, in the repository root
#   bash docs/experiments/gemv-wide/int8-fp8-call.sh run     # there, after the .gl recipe and
#                                                            # VK_DRIVER_FILES; writes $OUT/int8-fp8.log
#
# build: a release binary from HEAD with shader-override.patch and int8-fp8.patch, into
# .bench/ (which .gitignore ignores; carry it), and composed sources:
# v_two/gemv_wide.wgsl (gemv_wide with int8-fp8-two-chunks.patch); v_nonan/gemv_wide.wgsl (FP8 without its NaN
# check: a timing probe whose values are right only because the bench's weights hold no NaN);
# v_nodecode/gemv.wgsl and gemv_wide.wgsl (each int8, FP8 or FP4 word one FMA of its bits, no
# NaN check: values wrong, the bench prints MISMATCH; what each kernel's loads, scales, x reads
# and reduction allow without a decode, against the same run's copy); v_noscale/ the same with
# every scale word a constant instead of a load (what the scale loads cost that path: compare
# µs, since the bench still counts the scale bytes it no longer reads, 11% of NVFP4's).
# A second binary, .bench/moescope-flag, adds fp8-nan-flag.patch (NaN checks only in blocks whose
# scale carries the flag).
# run: the same binary, gemv_wide (the patch's rule) against the tile kernel
# (MOESCOPE_GEMV_WIDE=0) for int8 and FP8, interleaved, at 256 and 512 MiB, with the SM clock
# logged every 250 ms to $OUT/clocks.csv; then the no-decode probes of both kernels.
set -euo pipefail
here=docs/experiments
case "${1:-}" in
build)
    tree=$(mktemp -d)
    git worktree add -q --detach "$tree" HEAD
    (cd "$tree" && git apply "$OLDPWD/$here/gemv-wide/int8-fp8.patch" \
        && git apply "$OLDPWD/$here/shader-override.patch")
    CARGO_TARGET_DIR=target/exp cargo build --release -p moescope-engine --bin moescope \
        --manifest-path "$tree/Cargo.toml"
    mkdir -p .bench/v_two .bench/v_nonan
    cp target/exp/release/moescope .bench/moescope-exp
    inc="$tree/shaders/include"
    # A kernel's composed source (as kernels::SHADERS has it).
    compose() { cat "$inc/fp8.wgsl" "$inc/weights.wgsl" "$inc/gemv_layout.wgsl" "$1"; }
    no_nan='s/let c = q\.codes;.*?return vec2\(select\(scale,[^\n]*\n/return vec2(bitcast<f32>(q.scale));\n/s'
    no_decode='s/case 3u: \{\n\s*return acc \+ int8_word_dot.*?fp4_word_fma\(c\[p\], x\.a, x\.b, acc\);\n\s*\}/case 3u, 4u, 5u, 6u: { return fma(bitcast<f32>(c[p] & 0x3F7FFFFFu), x.a.x, acc); }/s'
    patch -s -o .bench/two.wgsl "$tree/shaders/gemv_wide.wgsl" < "$here/gemv-wide/int8-fp8-two-chunks.patch"
    compose .bench/two.wgsl > .bench/v_two/gemv_wide.wgsl
    rm .bench/two.wgsl
    compose "$tree/shaders/gemv_wide.wgsl" | perl -0pe "$no_nan" > .bench/v_nonan/gemv_wide.wgsl
    no_scale='s/(fn scale_word\(i: u32\) -> u32 \{\n\s*return) w\[i \/ 4u\]\[i % 4u\];/$1 0x3F800000u | (i & 0u);/'
    mkdir -p .bench/v_nodecode .bench/v_noscale
    for k in gemv gemv_wide; do
        compose "$tree/shaders/$k.wgsl" | perl -0pe "$no_nan" | perl -0pe "$no_decode" \
            > .bench/v_nodecode/$k.wgsl
        perl -0pe "$no_scale" .bench/v_nodecode/$k.wgsl > .bench/v_noscale/$k.wgsl
        if cmp -s .bench/v_nodecode/$k.wgsl .bench/v_noscale/$k.wgsl; then
            echo "v_noscale: scale_word was not found to replace" >&2
            exit 1
        fi
    done
    if grep -q "e4m3_nan_bytes(c" .bench/v_nonan/gemv_wide.wgsl .bench/v_nodecode/*.wgsl \
        || grep -q "int8_word_dot(c\[p\]" .bench/v_nodecode/*.wgsl; then
        echo "the probes' edits did not apply to these sources" >&2
        exit 1
    fi
    (cd "$tree" && git apply "$OLDPWD/$here/fp8-nan-flag.patch")
    CARGO_TARGET_DIR=target/exp cargo build --release -p moescope-engine --bin moescope \
        --manifest-path "$tree/Cargo.toml"
    cp target/exp/release/moescope .bench/moescope-flag
    git worktree remove --force "$tree"
    cp "$0" .bench/call.sh
    ;;
run)
    b=.bench/moescope-exp
    log=$OUT/int8-fp8.log
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active \
        --format=csv -lms 250 > "$OUT/clocks.csv" 2>&1 &
    nvidia-smi >> "$log" 2>&1
    one() { echo "=== $*" >> "$log"; env "$@" >> "$log" 2>&1; echo "rc $?" >> "$log"; }
    a="--iterations 40 --formats"
    set +e
    for mib in 256 256; do
        one V=wide timeout 100 $b bench kernels --mib $mib $a int8,fp8-e4m3,nvfp4,mxfp4
        one MOESCOPE_GEMV_WIDE=0 timeout 100 $b bench kernels --mib $mib $a int8,fp8-e4m3
        one MOESCOPE_WGSL_DIR=.bench/v_two timeout 100 $b bench kernels --mib $mib $a int8,fp8-e4m3
        one MOESCOPE_WGSL_DIR=.bench/v_nonan timeout 100 $b bench kernels --mib $mib $a fp8-e4m3
        one V=flag timeout 100 .bench/moescope-flag bench kernels --mib $mib $a fp8-e4m3
        one V=flag MOESCOPE_GEMV_WIDE=0 timeout 100 .bench/moescope-flag bench kernels --mib $mib $a fp8-e4m3
    done
    one V=wide timeout 100 $b bench kernels --mib 512 $a int8,fp8-e4m3,nvfp4,mxfp4
    one MOESCOPE_GEMV_WIDE=0 timeout 100 $b bench kernels --mib 512 $a int8,fp8-e4m3
    for probe in v_nodecode v_noscale; do
        for wide in 1 0; do
            one MOESCOPE_GEMV_WIDE=$wide MOESCOPE_WGSL_DIR=.bench/$probe timeout 100 \
                $b bench kernels --mib 256 $a int8,fp8-e4m3,nvfp4,mxfp4
        done
    done
    grep -E "^===|^rc|ceiling|^int8|^fp8|^nvfp4|^mxfp4|best gemv" "$log"
    ;;
*)
    echo "usage: $0 build|run" >&2
    exit 2
    ;;
esac
