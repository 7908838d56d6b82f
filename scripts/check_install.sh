#!/usr/bin/env bash
# Proves that the project installs as one package: builds the wheel from this checkout, installs it
# into a fresh virtual environment outside the checkout (torch first, then the wheel with its
# dependencies), and from an unrelated folder runs the installed commands: `uda-train --help`,
# `uda-augment --help`, `uda-qa-start --help`, `uda-compare --help`, a 2-step training of a tiny BERT
# that must take its task defaults from the configs shipped inside the package (uda/configs/),
# `uda-train --task no_such_task` (exit 2), a --quick `uda-compare` of supervised and UDA on the tiny
# BERT, and (setfit is an optional dependency) `uda-compare --methods setfit` refused up front.
#
#   bash scripts/check_install.sh            # CI runs this (.ci/run)
#
# Environment: PYTHON builds the wheel (default .venv/bin/python, else python3); VENV_PYTHON makes the
# fresh venv (default python3); TORCH_SPEC is installed first (default torch==2.13.0: on this kind of
# machine pip takes the CPU wheel from /opt/wheels) and TORCH_EXPECT is the torch.__version__ it must
# give (default 2.13.0+cpu; empty: any); KEEP=1 keeps the temporary folder. pip's cache is reused.
# Exits non-zero on the first failure; the last line is a one-line summary with the duration.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
START=$SECONDS
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
VENV_PYTHON="${VENV_PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
TORCH_EXPECT="${TORCH_EXPECT-2.13.0+cpu}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/uda-check-install.XXXXXX")"
case "$WORK" in "$ROOT"/*) echo "check_install: temporary folder $WORK is inside the checkout" >&2; exit 1;; esac
LOG="$WORK/log.txt"
STEP="start"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}" TOKENIZERS_PARALLELISM=false
# pip installs with --no-compile; Python then writes the .pyc files of only the modules it imports
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
unset PYTHONDONTWRITEBYTECODE
# nothing below needs the Hugging Face hub: the model and the data are made here
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1

finish() {
  rc=$?
  local took=$((SECONDS - START)) cleanup=""
  if [ "$rc" = 0 ] && [ "${KEEP:-0}" != 1 ]; then
    rm -rf "$WORK"
    cleanup=" (+$((SECONDS - START - took))s removing the temporary venv)"
  fi
  if [ "$rc" != 0 ]; then
    if [ -s "$LOG" ]; then echo "---- last lines of the log of step '$STEP' ----" >&2; tail -n 40 "$LOG" >&2; fi
    local kept="work folder kept: $WORK"
    # under CI nobody looks at it afterwards: don't leave a ~1.5 GB venv behind
    if [ "${CI:-}" = true ] && [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; kept="work folder removed (CI)"; fi
    echo "check_install: FAILED at step '$STEP' (exit $rc) after ${took}s; $kept" >&2
  else
    echo "check_install: OK in ${took}s${cleanup}: wheel built and installed in a fresh venv (torch $TORCH_VERSION), uda-train/uda-augment/uda-qa-start/uda-compare run from outside the checkout, task config read from the installed package"
  fi
  exit "$rc"
}
trap finish EXIT
step() { STEP="$1"; : >"$LOG"; echo "[$((SECONDS - START))s] $1"; }
fail() { echo "check_install: $*" >&2; exit 1; }
# run quietly, the output kept in $LOG (shown on failure)
quiet() { "$@" >"$LOG" 2>&1; }

step "copy the checkout (tracked and untracked, not ignored, files)"
# The wheel is built from a copy so that setuptools' build/ and *.egg-info stay out of the checkout, and
# a stale build/lib cannot slip removed modules into the wheel.
mkdir -p "$WORK/src"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$ROOT" && git ls-files -z -c -o --exclude-standard | while IFS= read -r -d '' f; do
    [ -f "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) | tar -xf - -C "$WORK/src"
else
  (cd "$ROOT" && tar --exclude=./.venv --exclude=./build --exclude='*.egg-info' --exclude=__pycache__ -cf - .) \
    | tar -xf - -C "$WORK/src"
fi

step "build the wheel ($PYTHON -m pip wheel --no-deps)"
quiet "$PYTHON" -m pip wheel --no-deps -w "$WORK/dist" "$WORK/src"
WHEEL="$(ls "$WORK"/dist/uda_consistency-*.whl)"
echo "    $(basename "$WHEEL")"

step "check the wheel's contents"
"$PYTHON" - "$WHEEL" "$WORK/src" <<'EOF'
import sys, zipfile
from pathlib import Path
whl, src = sys.argv[1], Path(sys.argv[2])
names = set(zipfile.ZipFile(whl).namelist())
errors = []
configs = sorted(p.relative_to(src / "configs").as_posix() for p in (src / "configs").rglob("*.yaml"))
wanted = ["uda/__init__.py", "augment/__init__.py", "tasks/__init__.py", "tasks/cli.py", "uda_compare/__init__.py",
          "uda_compare/cli.py", "uda_compare/setfit_baseline.py", "uda/configs/imdb.yaml",
          "uda/configs/text_classification.yaml", "uda/configs/recipes/imdb_cpu.yaml"]
for want in wanted + [f"uda/configs/{c}" for c in configs if f"uda/configs/{c}" not in wanted]:
    if want not in names:
        errors.append(f"missing {want}")
for bad in ("tests/", "configs/", "benchmarks/", "scripts/"):
    if any(n.startswith(bad) for n in names):
        errors.append(f"unexpected top-level {bad} in the wheel")
ep = next((zipfile.ZipFile(whl).read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt")), "")
for cmd in ("uda-train = tasks.cli:train_main", "uda-augment = tasks.cli:augment_main",
            "uda-qa-start = tasks.qa.start:main", "uda-compare = uda_compare.cli:main"):
    if cmd not in ep:
        errors.append(f"entry point missing: {cmd}")
if errors:
    sys.exit("wheel contents: " + "; ".join(errors))
print(f"    {len(names)} files; {len(configs)} configs under uda/configs/; entry points uda-train, uda-augment, uda-qa-start, uda-compare")
EOF

step "fresh venv ($VENV_PYTHON -m venv) and $TORCH_SPEC first"
quiet "$VENV_PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
# --no-compile: skip byte-compiling torch & co. at install (the main cost of a cached install)
quiet "$VPY" -m pip install --no-compile "$TORCH_SPEC"
TORCH_VERSION="$(cd "$WORK" && "$VPY" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
echo "    torch $TORCH_VERSION"
if [ -n "$TORCH_EXPECT" ] && [ "$TORCH_VERSION" != "$TORCH_EXPECT" ]; then
  fail "torch is $TORCH_VERSION, expected $TORCH_EXPECT (a CUDA build would be several GB)"
fi

step "install the wheel with its dependencies"
quiet "$VPY" -m pip install --no-compile "$WHEEL"
"$VPY" -m pip check >"$LOG" 2>&1 || fail "pip check: $(cat "$LOG")"
after="$(cd "$WORK" && "$VPY" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
[ "$after" = "$TORCH_VERSION" ] || fail "installing the wheel replaced torch $TORCH_VERSION with $after"
if "$VPY" -m pip list --format=freeze 2>/dev/null | grep -iq '^nvidia-'; then
  fail "CUDA packages (nvidia-*) were installed: $("$VPY" -m pip list --format=freeze | grep -i '^nvidia-' | tr '\n' ' ')"
fi

BIN="$WORK/venv/bin"
RUN_DIR="$WORK/elsewhere"  # commands run from here: not the checkout, nothing of it on sys.path
mkdir -p "$RUN_DIR"
cd "$RUN_DIR"

step "the installed packages come from the venv, not the checkout"
"$VPY" - "$ROOT" <<'EOF'
import sys
from pathlib import Path
import augment, tasks, uda, uda.config, uda_compare
root = Path(sys.argv[1]).resolve()
for m in (uda, augment, tasks, uda_compare, uda.config):
    f = Path(m.__file__).resolve()
    if root in f.parents or "site-packages" not in f.parts:
        sys.exit(f"{m.__name__} imported from {f}, not from the venv's site-packages")
cfg_dir = Path(uda.config.__file__).resolve().parent / "configs"
if not (cfg_dir / "text_classification.yaml").is_file() or not (cfg_dir / "recipes" / "imdb_cpu.yaml").is_file():
    sys.exit(f"shipped configs missing under {cfg_dir}")
print(f"    uda from {Path(uda.__file__).parent}; configs in {cfg_dir}")
EOF

step "uda-train --help"
"$BIN/uda-train" --help >"$LOG" 2>&1 || fail "uda-train --help exited $?"
grep -q -- "--train.max_steps" "$LOG" || fail "uda-train --help does not list --train.max_steps"
step "uda-augment --help"
"$BIN/uda-augment" --help >"$LOG" 2>&1 || fail "uda-augment --help exited $?"
grep -qi "usage" "$LOG" || fail "uda-augment --help prints no usage"
step "uda-qa-start --help"
"$BIN/uda-qa-start" --help >"$LOG" 2>&1 || fail "uda-qa-start --help exited $?"
grep -qi "usage" "$LOG" || fail "uda-qa-start --help prints no usage"
step "uda-compare --help"
"$BIN/uda-compare" --help >"$LOG" 2>&1 || fail "uda-compare --help exited $?"
grep -q "usage: uda-compare" "$LOG" || fail "uda-compare --help prints no 'usage: uda-compare'"
for opt in --task --out --num_labeled --seeds --methods --quick --summarize_only; do
  grep -q -- "$opt" "$LOG" || fail "uda-compare --help does not list $opt"
done

step "tiny BERT and tiny data"
# A 2-layer BERT (hidden 32) with a word-level vocab (as tests/conftest.py), and jsonl data of a
# learnable synthetic sentiment task. The training pool is large enough for the shipped
# text_classification.yaml's dev_size, which this run does not override (it is the value checked below).
"$VPY" - "$WORK" >"$LOG" 2>&1 <<'EOF' || fail "could not build the tiny model and data"
import json, random, sys
from pathlib import Path
import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast
work = Path(sys.argv[1])
pos = ["good", "great", "excellent", "wonderful", "superb", "loved", "brilliant", "fun"]
neg = ["bad", "awful", "terrible", "boring", "poor", "hated", "dull", "worst"]
filler = ["the", "movie", "film", "was", "plot", "acting", "and", "a", "really", "story", "it", "this", "i", "of",
          "very", "quite", "scene", "end", "with", "actors"]
m = work / "tiny_bert"
m.mkdir()
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + sorted(set(pos + neg + filler))
(m / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
tok = BertTokenizerFast(vocab=str(m / "vocab.txt"), do_lower_case=True)
assert tok("great movie")["input_ids"][1] != tok.unk_token_id
torch.manual_seed(0)
cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=37, max_position_embeddings=64, num_labels=2)
BertForSequenceClassification(cfg).save_pretrained(m)
tok.save_pretrained(m)
rng = random.Random(0)
def review(label, n=10):
    words = [rng.choice(filler) for _ in range(n)]
    for _ in range(2):
        words.insert(rng.randrange(len(words) + 1), rng.choice(pos if label == 1 else neg))
    return " ".join(words) + "."
d = work / "tiny_data"
d.mkdir()
for name, n in (("train", 1200), ("test", 8), ("unsup", 16)):
    with (d / f"{name}.jsonl").open("w", encoding="utf-8") as f:
        for i in range(n):
            label = i % 2 if name != "unsup" else -1
            f.write(json.dumps({"id": f"{name}_{i}", "text": review(i % 2), "label": label}) + "\n")
EOF

step "uda-train: 2 steps of the tiny model on task text_classification"
OUT="$WORK/run"
# every option given here; the task's other defaults must come from the shipped configs
OVERRIDES=(--model.name_or_path "$WORK/tiny_bert" --data.path "$WORK/tiny_data" --data.num_labeled 4
           --train.max_steps 2 --train.eval_every 2 --train.batch_size 2 --uda.unsup_ratio 1
           --model.max_length 16 --train.warmup_steps 0)
"$BIN/uda-train" --task text_classification "${OVERRIDES[@]}" --output_dir "$OUT" --report_to none \
  >"$LOG" 2>&1 || fail "uda-train exited $?"
[ -f "$OUT/results.json" ] || fail "no $OUT/results.json"
[ -f "$OUT/config.yaml" ] || fail "no $OUT/config.yaml"

step "the run's config.yaml holds the shipped task config"
"$VPY" - "$OUT/config.yaml" "${OVERRIDES[@]}" <<'EOF'
import dataclasses, sys
from pathlib import Path
import yaml
import uda.config as C
run_cfg, args = sys.argv[1], sys.argv[2:]
overridden = {a[2:] for a in args[::2]}
shipped = Path(C.__file__).resolve().parent / "configs" / "text_classification.yaml"
def flat(d, pre=""):
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(flat(v, f"{pre}{k}."))
        else:
            out[f"{pre}{k}"] = v
    return out
task = flat(yaml.safe_load(shipped.read_text()))
run = flat(yaml.safe_load(Path(run_cfg).read_text()))
bad = [f"{k}: run {run.get(k)!r} != shipped {v!r}" for k, v in task.items() if k not in overridden and run.get(k) != v]
if bad:
    sys.exit(f"the run's config.yaml does not hold {shipped}: " + "; ".join(bad))
# the value that proves the file was applied: data.dev_size, 500 in the shipped file, 1000 by default
default = {f.name: f.default for f in dataclasses.fields(C.DataConfig)}["dev_size"]
if "data.dev_size" not in task or task["data.dev_size"] == default:
    sys.exit(f"{shipped} no longer sets data.dev_size to a non-default value (default {default}): choose another "
             f"key here that shows the task config was applied")
if "data.dev_size" in overridden:
    sys.exit("data.dev_size must not be given on the command line of this check")
print(f"    data.dev_size = {run['data.dev_size']} (shipped {shipped.name}; dataclass default {default}); "
      f"{len(task)} shipped keys consistent")
EOF
"$VPY" - "$OUT/results.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"    results.json keys: {', '.join(sorted(r)[:8])}{' ...' if len(r) > 8 else ''}")
EOF

step "uda-train --task no_such_task exits 2 naming the task"
set +e
"$BIN/uda-train" --task no_such_task --output_dir "$WORK/bad_run" >"$LOG" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || fail "uda-train --task no_such_task exited $rc, expected 2: $(tail -n 5 "$LOG")"
grep -q "no_such_task" "$LOG" || fail "uda-train --task no_such_task: the message does not name the task: $(tail -n 5 "$LOG")"
echo "    $(grep -m1 "no_such_task" "$LOG")"

step "uda-compare --quick: supervised and uda, N=4, seed 0, on the tiny model"
CMP="$WORK/compare"
TINY=(--model.name_or_path "$WORK/tiny_bert" --data.path "$WORK/tiny_data" --train.batch_size 2
      --uda.unsup_ratio 1 --model.max_length 16)
"$BIN/uda-compare" --task text_classification --out "$CMP" --num_labeled 4 --seeds 0 --methods supervised uda \
  --quick -- "${TINY[@]}" >"$LOG" 2>&1 || fail "uda-compare exited $?"
for run in supervised-n4-seed0 uda-n4-seed0; do
  [ -f "$CMP/$run/results.json" ] || fail "uda-compare: no $CMP/$run/results.json"
done
grep -q '^\[2/2\] done uda-n4-seed0 in ' "$LOG" || fail "uda-compare printed no '[2/2] done uda-n4-seed0 in ...' line"
grep -q '^| 4 | uda | 1 |' "$CMP/summary.md" || fail "uda-compare: $CMP/summary.md has no row for uda, N=4"
grep -q 'per seed' "$CMP/summary.md" || fail "uda-compare: $CMP/summary.md has no per-seed table"
echo "    $(grep -m1 '^\[2/2\] done' "$LOG")"

if "$VPY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("setfit") is not None)'; then
  step "uda-compare --methods setfit without setfit installed: exit 2 naming pip install setfit, nothing run"
  set +e
  "$BIN/uda-compare" --task text_classification --out "$WORK/compare_setfit" --num_labeled 4 --seeds 0 \
    --methods supervised setfit --quick -- "${TINY[@]}" >"$LOG" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "uda-compare --methods setfit without setfit exited $rc, expected 2: $(tail -n 5 "$LOG")"
  grep -q "pip install setfit" "$LOG" || fail "uda-compare --methods setfit: the message does not say pip install setfit"
  [ ! -e "$WORK/compare_setfit" ] || fail "uda-compare --methods setfit without setfit started runs"
  echo "    $(grep -m1 "pip install setfit" "$LOG")"
fi
STEP="done"
