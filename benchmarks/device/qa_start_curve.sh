#!/usr/bin/env bash
# The few-label SQuAD 2.0 curve from a QA-shaped start, on a lent GPU in one call: builds the start
# (uda-qa-start on the labelled-pool paragraphs), then sweeps supervised and UDA (back-translated
# questions, and UDA with a confidence mask and answerability alignment) at N = 1024 and 256, seeds 1-3,
# with configs/recipes/squad_v2_fewlabel_qastart.yaml, stops at BUDGET seconds and sends back
# results.tgz (small files only; the start's weights stay there). Prepare .dev/ here first:
#   bash benchmarks/device/prepare_qa_carry.sh
# then, on the device (carry .dev):  bash benchmarks/device/qa_start_curve.sh
# A local smoke test on the CPU: QUICK=--quick START_STEPS=4 NO_WHEELS=1 PY=.venv/bin/python bash benchmarks/device/qa_start_curve.sh
set -u
T0=$(date +%s)
BUDGET=${BUDGET:-520}          # seconds for the start and the sweep, from T0
START_STEPS=${START_STEPS:-1500}
CURVE_JOBS=${CURVE_JOBS:-12}
QUICK=${QUICK:-}
OUT=${OUT:-/tmp/out}
. benchmarks/device/setup_dev.sh
mkdir -p $OUT
$PY scripts/build_qa_start.py --output_dir $RES/qa_start --model /tmp/minilm32 --squad .dev/data/dev-v2.0.json \
  --max_steps $START_STEPS > $RES/start.out 2>&1 || { tail -20 $RES/start.out; exit 5; }
echo "start built after $(( $(date +%s) - T0 )) s: $(tail -1 $RES/start.out)"
LEFT=$(( BUDGET - ($(date +%s) - T0) ))
timeout -s INT $LEFT $PY benchmarks/sweep.py --task squad_v2 --out $RES/qastart_curve --num_labeled ${NLIST:-1024 256} \
  --seeds ${SEEDS:-1 2 3} --methods supervised uda_bt uda_bt_da --bt_file .dev/data/questions.bt.jsonl.gz \
  --variant uda_bt_da uda_bt "--uda.confidence 0.8 --uda.distribution_alignment true --uda.alignment_bank 256" \
  --jobs $CURVE_JOBS $QUICK --compare benchmarks/results/squad_v2_fewlabel_curve "plain start" \
  -- --config configs/recipes/squad_v2_fewlabel_qastart.yaml --data.path .dev/data/dev-v2.0.json \
  --model.name_or_path $RES/qa_start/model > $RES/curve.out 2>&1
echo "sweep ended after $(( $(date +%s) - T0 )) s"
$PY benchmarks/sweep.py --task squad_v2 --out $RES/qastart_curve --summarize_only \
  --compare benchmarks/results/squad_v2_fewlabel_curve "plain start" > $RES/summary.out 2>&1
(cd $RES && tar czf $OUT/results.tgz --exclude='model' --exclude='checkpoints' --exclude='tensorboard' \
   --exclude='predictions_*.jsonl' --exclude='*.safetensors' --exclude='*.pt' --exclude='*.bin' --exclude='tb' .)
tail -3 $RES/curve.out; cat $RES/qastart_curve/summary.md 2>/dev/null; cat $RES/qa_start/results.json 2>/dev/null
echo "total $(( $(date +%s) - T0 )) s"
