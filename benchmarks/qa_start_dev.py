#!/usr/bin/env python
"""Dev metrics of a QA-shaped start before any labelled training: the reader that ``uda-qa-start``
built (or, for a run still going, its latest checkpoint's) read zero-shot on the dev articles of the
squad_v2 split (never the test articles), with the no-answer threshold at its best on dev.

    python benchmarks/qa_start_dev.py --start runs/qa_start --data ../shared/data/squad_v2/dev-v2.0.json \\
        [--config configs/recipes/squad_v2_fewlabel.yaml] [--out FOLDER]

Prints (and with ``--out`` writes to results.json) the dev metrics: best-threshold F1, HasAns span F1
(answerable questions always answered with the best span), answerability accuracy and AUC; beside
them the same numbers for the plain encoder's untrained reader, for comparison (``--baseline``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tasks  # noqa: E402,F401 (registers the built-in tasks)
from uda.config import build_config  # noqa: E402
from uda.io import atomic_write_json  # noqa: E402
from uda.task import RunContext  # noqa: E402

METRICS = ("best_f1", "f1", "HasAns_span_f1", "HasAns_span_exact", "answerability_accuracy", "answerability_auc",
           "num_examples")


def start_model_folder(start: Path) -> tuple[Path, int]:
    """(a model folder to read, the step it holds): ``start/model`` when the run has finished (the step
    selected on the held-out synthetic questions), else its latest checkpoint's model."""
    from uda import checkpoint

    if (start / "model" / "config.json").is_file():
        results = json.loads((start / "results.json").read_text(encoding="utf-8"))
        return start / "model", int(results["selected_model"]["step"])
    last = checkpoint.latest(start / "checkpoints")
    if last is None:
        sys.exit(f"error: '{start}' has neither model/ nor a checkpoint: pass a uda-qa-start output folder")
    return last.path / checkpoint.MODEL_DIR, last.step


def dev_metrics(model_path: str, args: argparse.Namespace) -> dict:
    from accelerate import Accelerator

    from tasks.qa.task import QATask
    from uda.devices import kept_accelerate_state

    cfg = build_config("squad_v2", args.config, {"data.path": args.data, "model.name_or_path": model_path,
                                                  "uda.lambda_u": 0, "data.num_labeled": 0})
    task = QATask()
    data = task.setup(cfg, RunContext(Path(tempfile.gettempdir()), wants_unlabeled=False))  # QA writes no files
    model = task.build_model(cfg).eval()
    with kept_accelerate_state():
        acc = Accelerator(mixed_precision="no")
        m = task.evaluate(model, list(data.dev), acc, args.batch, "dev")
    return {k: round(float(m[k]), 4) for k in METRICS if k in m}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--start", required=True, type=Path, help="a uda-qa-start output folder")
    ap.add_argument("--data", required=True, help="the SQuAD json file (its split's dev articles are read)")
    ap.add_argument("--config", default="configs/recipes/squad_v2_fewlabel.yaml", help="the split and windows")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--baseline", action="store_true", help="also the plain encoder's untrained reader")
    ap.add_argument("--out", type=Path, help="folder for results.json (default: print only)")
    args = ap.parse_args()
    t0 = time.time()
    folder, step = start_model_folder(args.start)
    results = {"start": args.start.name, "step": step, "dev": dev_metrics(str(folder), args)}
    if args.baseline:  # the encoder the start began from, as its run's config.yaml names it
        start_cfg = yaml.safe_load((args.start / "config.yaml").read_text(encoding="utf-8"))
        results["plain_encoder_dev"] = dev_metrics(start_cfg["model"]["name_or_path"], args)
    results["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(results, indent=2))
    if args.out:
        atomic_write_json(args.out / "results.json", results)


if __name__ == "__main__":
    main()
