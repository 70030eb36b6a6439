# Helpers for the *-call.sh scripts (sourced, from the repository root).

# build_patched NAME [PATCH...]: .bench/moescope-NAME, a release build of HEAD with the patches
# (paths from the repository root) applied in order, in a throwaway worktree.
build_patched() {
    local name=$1 tree
    shift
    tree=$(mktemp -d)
    git worktree add -q --detach "$tree" HEAD
    for p in "$@"; do
        (cd "$tree" && git apply "$OLDPWD/$p") || { git worktree remove --force "$tree"; return 1; }
    done
    CARGO_TARGET_DIR=target/exp cargo build --release -p moescope-engine --bin moescope \
        --manifest-path "$tree/Cargo.toml" || { git worktree remove --force "$tree"; return 1; }
    mkdir -p .bench && cp target/exp/release/moescope ".bench/moescope-$name"
    git worktree remove --force "$tree"
}

# device_setup LOG: on the device machine, the Vulkan loader from .gl (the device README's
# recipe) and NVIDIA's ICD; the SM clock every 250 ms into $OUT/clocks.csv; LOG starts with
# nvidia-smi's report. `one CMD...` then appends CMD's output and exit status to LOG.
device_setup() {
    log=$1
    if [ -d .gl ]; then
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
    else
        echo "no .gl carried: the Vulkan loader must already be installed" >&2
    fi
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active \
        --format=csv -lms 250 > "$OUT/clocks.csv" 2>&1 &
    nvidia-smi > "$log" 2>&1
}

one() {
    echo "=== $* ($(date +%T))" >> "$log"
    "$@" >> "$log" 2>&1
    echo "rc $?" >> "$log"
}
