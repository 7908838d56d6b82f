#!/usr/bin/env bash
# Few-label SQuAD 2.0 curve on a lent H200 in one call (benchmarks/device/prepare_qa_carry.sh makes .dev/,
# which holds this script as run.sh): wheels the image lacks, all-MiniLM-L6-v2 stored in fp16 (restored to
# fp32 here), the data. Runs the curve sweep (12 runs at once) and the 4,800-step pilot beside it, stops
# them at BUDGET seconds, and sends back results.tgz (small files only). A run stopped after its first
# checkpoint continues from it when the sweep is run again on the same machine; NLIST, SEEDS, SKIP_LONG
# and RESUME_FROM (below) run a part of the curve, e.g. what a first call left:
#   NLIST="256 64" SKIP_LONG=1 RESUME_FROM=benchmarks/results/squad_v2_fewlabel_curve bash .dev/run.sh
set -u
T0=$(date +%s)
BUDGET=${BUDGET:-520}          # seconds for the sweeps, from T0
CURVE_JOBS=${CURVE_JOBS:-12}
QUICK=${QUICK:-}               # --quick for a local smoke test
. benchmarks/device/setup_dev.sh
# RESUME_FROM=benchmarks/results/squad_v2_fewlabel_curve: the finished runs of an earlier call (results.json
# and the small files) are copied in first, so the sweep skips them and runs only what is missing
if [ -n "${RESUME_FROM:-}" ]; then
  mkdir -p $RES/qa_curve
  for d in $RESUME_FROM/*-seed*/; do [ -f $d/results.json ] && cp -r $d $RES/qa_curve/; done
  echo "copied $(ls -d $RES/qa_curve/*-seed* | wc -l) finished runs from $RESUME_FROM"
fi
COMMON="--config configs/recipes/squad_v2_fewlabel.yaml --data.path .dev/data/dev-v2.0.json --model.name_or_path /tmp/minilm32"
LEFT=$(( BUDGET - ($(date +%s) - T0) ))
echo "setup done after $(( $(date +%s) - T0 )) s; sweeps get ${LEFT} s"
( timeout -s INT $LEFT $PY benchmarks/sweep.py --task squad_v2 --out $RES/qa_curve --num_labeled ${NLIST:-all 1024 256 64} \
  --seeds ${SEEDS:-1 2 3} --methods supervised uda_bt --bt_file .dev/data/questions.bt.jsonl.gz --jobs $CURVE_JOBS $QUICK \
  -- $COMMON --uda.lambda_u 1 > $RES/curve.out 2>&1
  LEFT2=$(( BUDGET - ($(date +%s) - T0) ))
  echo "curve ended after $(( $(date +%s) - T0 )) s" >> $RES/curve.out
  if [ -z "${SKIP_LONG:-}" ] && [ $LEFT2 -gt 150 ]; then
    timeout -s INT $LEFT2 $PY benchmarks/sweep.py --task squad_v2 --out $RES/qa_long4800 --num_labeled all \
      --seeds 1 2 3 --methods uda_bt --bt_file .dev/data/questions.bt.jsonl.gz --jobs 6 $QUICK \
      -- $COMMON --uda.lambda_u 1 --train.max_steps 4800 --train.warmup_steps 480 --train.eval_every 600 > $RES/long_uda.out 2>&1
  fi ) &
[ -n "${SKIP_LONG:-}" ] || timeout -s INT $LEFT $PY benchmarks/sweep.py --task squad_v2 --out $RES/qa_long4800 --num_labeled all \
  --seeds 1 2 3 --methods supervised --jobs 3 $QUICK \
  -- $COMMON --train.max_steps 4800 --train.warmup_steps 480 --train.eval_every 600 > $RES/long.out 2>&1 &
( sleep 90; echo "--- at 90 s:"; tail -c 400 $RES/qa_curve/supervised-nall-seed1.log; tail -c 300 $RES/qa_curve/uda_bt-nall-seed1.log;
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv; uptime ) &
MON=$!
wait %1 %2 2>/dev/null; kill $MON 2>/dev/null; wait
echo "sweeps ended after $(( $(date +%s) - T0 )) s"
for d in qa_curve qa_long4800; do $PY benchmarks/sweep.py --task squad_v2 --out $RES/$d --summarize_only > $RES/$d.summary.out 2>&1; done
(cd $RES && tar czf $OUT/results.tgz --exclude='model' --exclude='checkpoints' --exclude='tensorboard' \
   --exclude='predictions_*.jsonl' --exclude='*.safetensors' --exclude='*.pt' --exclude='*.bin' .)
ls -la $OUT
tail -4 $RES/curve.out; tail -3 $RES/long.out; tail -3 $RES/long_uda.out 2>/dev/null; cat $RES/qa_curve/summary.md $RES/qa_long4800/summary.md 2>/dev/null
echo "total $(( $(date +%s) - T0 )) s"
