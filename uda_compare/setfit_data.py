"""The inputs of the SetFit baseline: the labelled and dev examples of one run, looked up by id in the
run's data files, and the test set the trainer evaluates on (see :mod:`uda_compare.setfit_baseline`)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, Optional

# a relative data folder is looked up here, then in the checkout this module is in (if it is in one)
CHECKOUT = Path(__file__).resolve().parents[1]
DATA_EXTS = (".jsonl.gz", ".jsonl", ".json.gz", ".json", ".csv.gz", ".csv", ".tsv.gz", ".tsv", ".parquet")


class BaselineError(Exception):
    """Bad input; the message says which file / id and what to do."""


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
    """A run folder's config.yaml as a dict, with ``_data_info_path``: the data folder the run read
    (from its data_info.json, when there is one)."""
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


def _id_files(args: argparse.Namespace) -> tuple[dict, Path, Optional[Path]]:
    """The run's config (empty without --run_dir), the labelled-id file and the dev-id file (None: no dev)."""
    if args.run_dir:
        run_dir = Path(args.run_dir)
        cfg = load_run_config(run_dir)
        labeled_file = Path(args.labeled_ids) if args.labeled_ids else run_dir / "labeled_ids.txt"
        dev_file = Path(args.dev_ids) if args.dev_ids else run_dir / "dev_ids.txt"
        return cfg, labeled_file, dev_file
    if not args.labeled_ids:
        raise BaselineError("give --run_dir RUN (a run folder) or --labeled_ids FILE (with --data_path DIR)")
    return {}, Path(args.labeled_ids), Path(args.dev_ids) if args.dev_ids else None


def _data_folder(args: argparse.Namespace, cfg: dict) -> Path:
    """The data folder: --data_path, else the run's data.path (or the folder its data_info.json names),
    else UDA_DATA_PATH."""
    data_cfg = cfg.get("data") or {}
    if args.data_path:
        return _existing_dir(args.data_path, "--data_path")
    if data_cfg.get("path") or cfg.get("_data_info_path"):
        origin = "data.path of the run's config.yaml" if data_cfg.get("path") else "the run's data_info.json"
        return _existing_dir(data_cfg.get("path") or cfg["_data_info_path"], origin)
    if os.environ.get("UDA_DATA_PATH", "").strip():
        return _existing_dir(os.environ["UDA_DATA_PATH"].strip(), "UDA_DATA_PATH")
    raise BaselineError("no data folder: pass --data_path DIR (a folder with train/test files)")


def _read_data(args: argparse.Namespace, folder: Path, data_cfg: dict) -> tuple[dict, dict]:
    """The train, test and (optional) dev files of the data folder (the run's data.*_file unless
    --data_path is given) and their rows: ({split: path or None}, {split: rows})."""
    from uda.data import DataError, read_table  # the project's reader (json/jsonl/csv/tsv/parquet, gzipped or not)

    cols = {k: data_cfg.get(k, d) for k, d in (("text_column", "text"), ("label_column", "label"),
                                                ("id_column", "id"))}
    paths = {split: _data_file(folder, None if args.data_path else data_cfg.get(f"{split}_file"), split,
                               split != "dev") for split in ("train", "test", "dev")}
    try:
        rows = {split: read_table(path, **cols) if path else [] for split, path in paths.items()}
    except DataError as e:
        raise BaselineError(str(e)) from None
    return paths, rows


def _test_set(test_rows: list[dict], test_path: Path, labels: Labels, max_test: Optional[int],
              seed: int) -> list[dict]:
    """The test examples, texts cleaned; with ``max_test`` the trainer's balanced subset drawn from ``seed``."""
    from tasks.text.task import clean_text

    test = [{"id": r["id"], "text": clean_text(r["text"] or ""), "label": labels(r["label"], f"'{test_path}' id "
                                                                                            f"'{r['id']}'")}
            for r in test_rows]
    if max_test is not None and 0 <= int(max_test) < len(test):
        from tasks.text.data import test_subset  # the trainer's subset: balanced, drawn from the run's seed

        keep = test_subset([r["label"] for r in test], max(r["label"] for r in test) + 1, int(max_test), seed)
        test = [test[i] for i in keep]
    return test


def load_inputs(args: argparse.Namespace) -> dict:
    """Everything the run needs: the rows, the encoder, lengths and the seed (flags win over the config)."""
    cfg, labeled_file, dev_file = _id_files(args)
    data_cfg = cfg.get("data") or {}
    model_cfg = cfg.get("model") or {}
    folder = _data_folder(args, cfg)
    labeled_ids = read_ids(labeled_file, "labelled-id")
    dev_ids = read_ids(dev_file, "dev-id") if dev_file is not None else []
    paths, rows = _read_data(args, folder, data_cfg)
    labels = Labels(data_cfg.get("label_names"))
    pool_files = [paths["train"]] + ([paths["dev"]] if paths["dev"] else [])
    pool = rows["train"] + rows["dev"]
    train = select(pool, labeled_ids, labeled_file, pool_files, labels)
    dev = select(pool, dev_ids, dev_file, pool_files, labels) if dev_ids else []
    overlap = sorted({r["id"] for r in train} & {r["id"] for r in dev})
    if overlap:
        raise BaselineError(f"id '{overlap[0]}' is in both '{labeled_file}' and '{dev_file}' "
                            f"({len(overlap)} shared ids); dev must be held out")
    seed = args.seed if args.seed is not None else int(cfg.get("seed", 42))
    max_test = args.max_test if args.max_test is not None else data_cfg.get("max_test")
    test = _test_set(rows["test"], paths["test"], labels, max_test, seed)
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
                  **{split: str(path) if path else None for split, path in paths.items()}},
        "max_test": max_test, "test_total": len(rows["test"]),
    }
