#!/usr/bin/env bash
# Builds .dev/ (git-ignored through .git/info/exclude) for benchmarks/device/fewlabel_methods.sh on a lent GPU
# machine without network: the wheels its image lacks (datasets and its two pure-Python deps, for Python
# 3.12), all-MiniLM-L6-v2 with its float weights stored in fp16 (the carry limit is 64 MiB; restored to
# fp32 there) and the TREC-6 and BANKING77 files. Run here, from a checkout with .venv:
#   bash benchmarks/device/prepare_text_carry.sh [DATA_DIR]      (default ../shared/data)
# then carry .dev and run `bash benchmarks/device/fewlabel_methods.sh` there.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${1:-../shared/data}
. .venv/bin/activate
. benchmarks/device/carry_common.sh
for s in trec banking77; do mkdir -p .dev/data/$s && cp "$DATA"/$s/*.jsonl .dev/data/$s/; done
du -sh .dev
