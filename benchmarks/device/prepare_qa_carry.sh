#!/usr/bin/env bash
# Builds .dev/ (git-ignored through .git/info/exclude), what benchmarks/device/qa_curve_h200.sh needs on a
# lent GPU machine that has no network and only its own image's packages (torch, transformers, ...):
# the wheels it lacks (datasets and its two pure-Python deps, for Python 3.12), all-MiniLM-L6-v2 with its
# float weights stored in fp16 (the carry limit is 64 MiB; restored to fp32 there, a relative rounding of
# at most 4.9e-4 per weight), the SQuAD 2.0 dev file and the Apertium back-translations of the questions
# of the labelled pool (the UDA runs' unlabelled questions). Run here, from a checkout with .venv:
#   bash benchmarks/device/prepare_qa_carry.sh [path/to/dev-v2.0.json]
# then carry .dev and run `bash .dev/run.sh` (a copy of qa_curve_h200.sh) there.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${1:-../shared/data/squad_v2/dev-v2.0.json}
. .venv/bin/activate
. benchmarks/device/carry_common.sh
cp "$DATA" .dev/data/dev-v2.0.json
python scripts/uda_augment.py --task squad_v2 --config configs/recipes/squad_v2_fewlabel.yaml --data_path "$DATA" \
  --method apertium --copies 1 --output .dev/data/questions.bt.jsonl.gz --no_progress
cp benchmarks/device/qa_curve_h200.sh .dev/run.sh
du -sh .dev
