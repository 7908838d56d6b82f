#!/usr/bin/env bash
# Set up the environment (first time only), then train: all arguments go to scripts/train_uda.py.
#   bash scripts/run.sh --task imdb --config configs/recipes/imdb_cpu.yaml
# With no arguments: the few-label IMDB recipe (20 labels), on the data of $UDA_DATA_PATH, else of
# ../shared/data/imdb beside the checkout, else the Hugging Face hub's IMDB.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
if [ $# -eq 0 ]; then
  set -- --task imdb --config configs/recipes/imdb_cpu_fewlabel.yaml
  if [ -z "${UDA_DATA_PATH:-}" ] && [ -d ../shared/data/imdb ]; then
    set -- "$@" --data.path ../shared/data/imdb
  fi
  echo "bash scripts/run.sh: running uda-train $*" >&2
fi
exec .venv/bin/python scripts/train_uda.py "$@"
