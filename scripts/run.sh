#!/usr/bin/env bash
# Set up the environment (first time only), then train: all arguments go to scripts/train_uda.py.
#   bash scripts/run.sh --task imdb --config configs/recipes/imdb_cpu.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
exec .venv/bin/python scripts/train_uda.py "$@"
