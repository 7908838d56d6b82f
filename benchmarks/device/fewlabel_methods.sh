#!/usr/bin/env bash
# The consistency methods against supervised training on TREC-6 (96 labels) and BANKING77 (770 labels),
# configs/recipes/text_fewlabel.yaml unchanged but for the data, on a lent GPU in one call: one uda-compare
# sweep per set, side by side, JOBS runs at once each, stopped at BUDGET seconds (a finished run is kept, an
# unfinished one is lost with the machine), then the summaries and results.tgz (small files only).
# Prepare .dev/ here first: bash benchmarks/device/prepare_text_carry.sh
# then, on the device (carry .dev):  bash benchmarks/device/fewlabel_methods.sh
# A local smoke test on the CPU:
#   QUICK=--quick SEEDS=1 NO_WHEELS=1 PY=.venv/bin/python bash benchmarks/device/fewlabel_methods.sh
set -u
T0=$(date +%s)
BUDGET=${BUDGET:-520}
JOBS=${JOBS:-7}
SEEDS=${SEEDS:-1 2 3 4 5}
METHODS=${METHODS:-supervised uda fixmatch flexmatch freematch softmatch adamatch}
EXTRA=${EXTRA:-}               # more uda-train options for every run (e.g. a longer schedule)
QUICK=${QUICK:-}
OUT=${OUT:-/tmp/out}
. benchmarks/device/setup_dev.sh
mkdir -p $OUT
sweep() {  # set, N, extra options
  timeout -s INT $(( BUDGET - ($(date +%s) - T0) )) $PY benchmarks/sweep.py --task text_classification \
    --out $RES/$1 --num_labeled $2 --seeds $SEEDS --methods $METHODS --jobs $JOBS $QUICK \
    -- --config configs/recipes/text_fewlabel.yaml --data.path .dev/data/$1 --model.name_or_path /tmp/minilm32 \
    $3 $EXTRA > $RES/$1.out 2>&1
  $PY benchmarks/sweep.py --task text_classification --out $RES/$1 --summarize_only > $RES/$1.summary.out 2>&1
}
sweep trec 96 "--model.label_descriptions configs/labels/trec.json" &
sweep banking77 770 "" &
wait
echo "sweeps ended after $(( $(date +%s) - T0 )) s"
(cd $RES && tar czf $OUT/results.tgz --exclude='model' --exclude='checkpoints' --exclude='tensorboard' \
   --exclude='predictions_*.jsonl' --exclude='*.safetensors' --exclude='*.pt' --exclude='*.bin' --exclude='data' .)
for s in trec banking77; do tail -2 $RES/$s.out; head -20 $RES/$s/summary.md 2>/dev/null; done
echo "total $(( $(date +%s) - T0 )) s"
