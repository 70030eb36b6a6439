#!/usr/bin/env bash
# The whole training on one H200: two BF16 seeds and one FP8 run side by side (the model is far
# too small to fill the GPU alone), then the export of BF16 seed 0, the plot, and a tarball of the
# results in $OUT. STEPS=30 makes it a smoke test.
#   STEPS=3000 bash train/run.sh
set -euo pipefail
STEPS=${STEPS:-3000}
EVAL=${EVAL:-100}
OUT=${OUT:-out}
export PYTHONUNBUFFERED=1
mkdir -p runs "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__)'
pids=()
for spec in bf16:0 bf16:1 fp8:0; do
  p=${spec%:*}; s=${spec#*:}
  python3 train/train.py --precision "$p" --seed "$s" --steps "$STEPS" --eval-every "$EVAL" ${MAX_SECONDS:+--max-seconds $MAX_SECONDS} \
    --out "runs/$p-s$s" > "runs/$p-s$s.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for f in runs/*.log; do echo "== $f"; tail -n 40 "$f"; done
[ "$status" = 0 ] || exit 1
mkdir -p "$OUT/fixtures"
python3 train/export.py runs/bf16-s0 --out "$OUT/deepseek-mini-int8.safetensors" \
  --fixture "$OUT/fixtures/deepseek-mini-logits.json"
python3 train/plot.py runs/bf16-s0 runs/bf16-s1 runs/fp8-s0 --png "$OUT/fixtures/training-loss.png" \
  --json "$OUT/fixtures/fp8-training.json"
# The f32 weights travel back in 16 MB pieces (the device returns files of at most 16 MiB).
split -b 16000000 -d runs/bf16-s0/weights.safetensors "$OUT/bf16-s0-f32.part"
tar -czf "$OUT/runs.tar.gz" runs/*.log runs/*/log.jsonl runs/*/summary.json -C "$OUT" fixtures
ls -la "$OUT"
