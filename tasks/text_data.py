"""Text-classification data for UDA: labelled subset, dev, test and unlabelled pool.

Sources, in order of precedence:

* ``data.path`` (or the ``UDA_DATA_PATH`` environment variable):
  - an official ``aclImdb`` folder (``train/{pos,neg[,unsup]}``, ``test/{pos,neg}``), or a folder holding one;
  - a folder with files named ``train.*``, ``test.*``, optional ``dev.*`` and ``unsup.*``/``unlabeled.*``
    in any supported format (json, jsonl, csv, tsv, parquet; json/jsonl/csv/tsv may be gzipped);
  - a single file, used as the training pool.
  ``data.train_file/test_file/dev_file/unlabeled_file`` override the files found in the folder.
* otherwise the hub dataset ``data.hub_id`` through :func:`datasets.load_dataset`.

All random choices use ``numpy.random.Generator`` seeded from ``seed``, so the same config and seed give the
same split. Every problem with the data raises :class:`DataError` with a message that names the file, row or
option and says what to do.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from uda.config import DataConfig
from uda.hub import hub_reachable


class DataError(ValueError):
    """bad data; message names the file/row/option and says what to do"""


@dataclass
class TextClassificationData:
    label_names: list[str]
    train: list[dict]      # the labelled training subset, each {"id": str, "text": str, "label": int}
    dev: list[dict]        # same keys; model selection split
    test: list[dict]       # same keys
    unlabeled: list[dict]  # each {"id": str, "text": str}
    info: dict = field(default_factory=dict)  # counts and sources (json-serialisable) for logging

    @property
    def num_labels(self) -> int:
        return len(self.label_names)


# ----------------------------------------------------------------------------- constants

SUPPORTED_EXTENSIONS = (
    ".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv", ".csv.gz", ".tsv", ".tsv.gz", ".parquet",
)
_SPLIT_PREFIX = re.compile(r"^(?:train|test|unsup)_")
_UNLABELED_STEMS = ("unsup", "unlabeled", "unlabelled", "unsupervised")
_DEV_STEMS = ("dev", "validation", "valid", "val")
# ClassLabel names of hub datasets, for local copies whose labels are plain ints.
_KNOWN_HUB_LABEL_NAMES = {
    "stanfordnlp/imdb": ["neg", "pos"],
    "imdb": ["neg", "pos"],
}
_HUB_UNREACHABLE = (
    "no local data given and the hub is unreachable; pass --data.path /path/to/imdb "
    "(a folder with train/test/unsup files or the aclImdb folder) or set UDA_DATA_PATH"
)
_INT_RE = re.compile(r"^[+-]?\d+$")


# ----------------------------------------------------------------------------- small helpers

def resolve_data_path(cfg: DataConfig) -> Optional[str]:
    """``cfg.path``, else the ``UDA_DATA_PATH`` environment variable, else None (use the hub)."""
    if cfg.path:
        return str(cfg.path)
    env = os.environ.get("UDA_DATA_PATH", "").strip()
    return env or None


def _extension(path: str | os.PathLike) -> Optional[str]:
    name = Path(path).name.lower()
    for ext in sorted(SUPPORTED_EXTENSIONS, key=len, reverse=True):
        if name.endswith(ext):
            return ext
    return None


def _stem(path: str | os.PathLike) -> str:
    name = Path(path).name
    ext = _extension(path)
    return name[: len(name) - len(ext)] if ext else name.split(".")[0]


def _strip_split_prefix(example_id: str) -> str:
    return _SPLIT_PREFIX.sub("", example_id, count=1)


def _rng(seed: int, purpose: int = 0) -> np.random.Generator:
    """Labelled subset: Generator(seed); other purposes get their own independent stream."""
    seed = int(seed) % (2**63)
    return np.random.default_rng(seed if purpose == 0 else [seed, purpose])


# ----------------------------------------------------------------------------- readers

def _read_bytes(path: Path) -> bytes:
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise DataError(f"cannot read data file '{path}': {e}; check that it is a complete, valid file") from None


def _decode(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataError(
            f"data file '{path}' is not valid UTF-8 (line {line}, byte {e.start}: {data[e.start:e.start + 1]!r}); "
            f"re-save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
        ) from None


def _records_from_json(text: str, path: Path) -> list[dict]:
    stripped = text.lstrip()
    if not stripped:
        return []
    if not path.name.lower().endswith((".jsonl", ".jsonl.gz")):
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as e:
            if "Extra data" not in e.msg:  # a whole-file json document that is broken
                raise DataError(f"data file '{path}' is not valid JSON (line {e.lineno}: {e.msg}); fix the file") \
                    from None
            obj = None  # several documents: json lines with a .json name
        if obj is not None:
            if isinstance(obj, dict):
                for key in ("data", "rows", "examples"):
                    if isinstance(obj.get(key), list):
                        obj = obj[key]
                        break
                else:
                    if obj and all(isinstance(v, list) for v in obj.values()):
                        cols = list(obj)
                        n = len(obj[cols[0]])
                        if any(len(obj[c]) != n for c in cols):
                            raise DataError(f"data file '{path}': its columns have different lengths; fix the file")
                        obj = [{c: obj[c][i] for c in cols} for i in range(n)]
                    else:
                        obj = [obj]
            if not isinstance(obj, list):
                raise DataError(f"data file '{path}' must hold a list of objects (or one object per line)")
            for i, rec in enumerate(obj):
                if not isinstance(rec, dict):
                    raise DataError(f"data file '{path}', row {i + 1}: expected a JSON object, got "
                                    f"{type(rec).__name__}; each example must be {{\"text\": ..., \"label\": ...}}")
            return obj
    records = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"data file '{path}', line {lineno}: invalid JSON ({e.msg} at column {e.colno}); "
                            f"each line must be one JSON object") from None
        if not isinstance(rec, dict):
            raise DataError(f"data file '{path}', line {lineno}: expected a JSON object, got {type(rec).__name__}; "
                            f"each line must be one JSON object like {{\"text\": ..., \"label\": ...}}")
        records.append(rec)
    return records


def _records_from_csv(text: str, path: Path) -> tuple[list[dict], list[str]]:
    delimiter = "\t" if ".tsv" in path.name.lower() else ","
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
        columns = list(reader.fieldnames or [])
        return list(reader), columns
    except csv.Error as e:
        raise DataError(f"data file '{path}' is not valid CSV: {e}; fix the file") from None


def _records_from_parquet(path: Path, wanted: Sequence[str]) -> tuple[list[dict], list[str]]:
    try:
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        columns = list(pf.schema_arrow.names)
        table = pf.read(columns=[c for c in wanted if c in columns])
    except ImportError:
        raise DataError(f"reading '{path}' needs pyarrow; `pip install pyarrow` or convert the file to jsonl") \
            from None
    except Exception as e:  # pyarrow raises several error types for broken files
        raise DataError(f"cannot read parquet file '{path}': {e}; check that it is a complete parquet file") \
            from None
    return table.to_pylist(), columns


def read_table(path: str | os.PathLike, text_column: str = "text", label_column: Optional[str] = "label",
               id_column: Optional[str] = "id", *, require_label: bool = True) -> list[dict]:
    """Read a json / jsonl / jsonl.gz / json.gz / csv(.gz) / tsv(.gz) / parquet file.

    Returns one dict per row: ``{"id": str, "text": str | None, "label": raw value or None}``. The id comes from
    ``id_column`` when the file has it, else ``"<filestem>-<row>"`` (row counted from 0). Labels are returned
    as stored (int, label name, or None when missing); :func:`load_text_classification` maps them.
    ``require_label=False`` allows a file without the label column (unlabelled data).
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"data file '{p}' does not exist; check --data.path / --data.*_file")
    if p.is_dir():
        raise DataError(f"'{p}' is a folder where a data file was expected; name a file")
    ext = _extension(p)
    if ext is None:
        raise DataError(f"data file '{p}' has an unsupported extension; use one of {', '.join(SUPPORTED_EXTENSIONS)}")
    if ext == ".parquet":
        wanted = [c for c in (text_column, label_column, id_column) if c]
        records, columns = _records_from_parquet(p, wanted)
    else:
        text = _decode(_read_bytes(p), p)
        if ext.startswith((".csv", ".tsv")):
            records, columns = _records_from_csv(text, p)
        else:
            records = _records_from_json(text, p)
            columns = list(records[0]) if records else []
    if not records:
        raise DataError(f"data file '{p}' is empty (no rows); give a file with at least one example")
    if text_column not in columns:
        raise DataError(f"data file '{p}' has no text column '{text_column}' (columns: {columns}); "
                        f"set --data.text_column to the right one")
    has_label = bool(label_column) and label_column in columns
    if require_label and not has_label:
        raise DataError(f"data file '{p}' has no label column '{label_column}' (columns: {columns}); "
                        f"set --data.label_column to the right one")
    has_id = bool(id_column) and id_column in columns
    stem = _stem(p)
    rows = []
    for i, rec in enumerate(records):
        t = rec.get(text_column)
        rid = rec.get(id_column) if has_id else None
        rows.append({
            "id": str(rid) if rid is not None and rid != "" else f"{stem}-{i}",
            "text": t if t is None or isinstance(t, str) else str(t),
            "label": rec.get(label_column) if has_label else None,
        })
    return rows


def read_aclimdb(folder: str | os.PathLike) -> dict[str, list[dict]]:
    """Read the official aclImdb layout: ``train/{pos,neg[,unsup]}``, ``test/{pos,neg}``.

    Returns ``{"train": [...], "test": [...], "unsup": [...]}`` with ``{"id", "text", "label"}`` rows;
    labels are 0 (neg), 1 (pos), -1 (unsup); ids are the file names with their class folder, e.g.
    ``"neg_9851_1.txt"`` (the reference UDA id-order format). Files are ordered by review number.
    """
    root = Path(folder)
    if not _is_aclimdb(root):
        raise DataError(f"'{root}' is not an aclImdb folder (needs train/pos, train/neg, test/pos, test/neg)")

    def number(p: Path) -> tuple:
        head = p.stem.split("_")[0]
        return (int(head), p.name) if head.isdigit() else (math.inf, p.name)

    out: dict[str, list[dict]] = {}
    for split, classes in (("train", ("neg", "pos", "unsup")), ("test", ("neg", "pos"))):
        for cls in classes:
            d = root / split / cls
            if not d.is_dir():
                continue
            label = -1 if cls == "unsup" else ("neg", "pos").index(cls)
            rows = out.setdefault("unsup" if cls == "unsup" else split, [])
            for f in sorted(d.glob("*.txt"), key=number):
                data = f.read_bytes()
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise DataError(f"review file '{f}' is not valid UTF-8 (byte {e.start}); re-save it as UTF-8") \
                        from None
                rows.append({"id": f"{cls}_{f.name}", "text": text, "label": label})
    out.setdefault("unsup", [])
    return out


def _is_aclimdb(root: Path) -> bool:
    return all((root / s / c).is_dir() for s in ("train", "test") for c in ("pos", "neg"))


# ----------------------------------------------------------------------------- source discovery

@dataclass
class _Source:
    name: str                     # where it came from, for messages and info
    rows: list[dict]              # {"id", "text", "label"(raw)}


def _find_in_folder(folder: Path, stems: Sequence[str], required: bool, what: str, option: str) -> Optional[Path]:
    found = [p for p in sorted(folder.iterdir()) if p.is_file() and _stem(p).lower() in stems and _extension(p)]
    if len(found) > 1:
        raise DataError(f"folder '{folder}' has several {what} files ({', '.join(p.name for p in found)}); "
                        f"keep one or pass --data.{option}")
    if not found:
        if required:
            listing = sorted(p.name for p in folder.iterdir())[:20]
            raise DataError(f"folder '{folder}' has no {what} file (expected {stems[0]}.jsonl, {stems[0]}.csv, ...; "
                            f"found {listing}); add one or pass --data.{option}")
        return None
    return found[0]


def _override(value: Optional[str], folder: Optional[Path], option: str) -> Optional[Path]:
    if not value:
        return None
    p = Path(value).expanduser()
    if not p.exists() and folder is not None and not p.is_absolute() and (folder / p).exists():
        p = folder / p
    if not p.exists():
        raise DataError(f"--data.{option} '{value}' does not exist; fix the path")
    return p


def _local_sources(cfg: DataConfig, path: Optional[str]) -> dict:
    """Returns {"train", "test", "dev", "unlabeled": _Source | None, "default_names": list | None, "kind": str}."""
    folder: Optional[Path] = None
    out: dict[str, Any] = {"train": None, "test": None, "dev": None, "unlabeled": None,
                           "default_names": None, "kind": "files"}
    found: dict[str, Optional[Path]] = {"train": None, "test": None, "dev": None, "unlabeled": None}
    if path:
        root = Path(path).expanduser()
        if not root.exists():
            raise DataError(f"data path '{root}' (from --data.path or UDA_DATA_PATH) does not exist; "
                            f"pass --data.path /path/to/imdb (a folder with train/test/unsup files or the aclImdb "
                            f"folder)")
        if root.is_dir():
            folder = root
            acl = root if _is_aclimdb(root) else (root / "aclImdb" if _is_aclimdb(root / "aclImdb") else None)
            if acl is not None:
                splits = read_aclimdb(acl)
                out["kind"] = "aclImdb"
                out["default_names"] = ["neg", "pos"]
                out["train"] = _Source(str(acl / "train"), splits["train"])
                out["test"] = _Source(str(acl / "test"), splits["test"])
                if splits["unsup"]:
                    out["unlabeled"] = _Source(str(acl / "train" / "unsup"), splits["unsup"])
            else:
                has_train = cfg.train_file is None
                found["train"] = _find_in_folder(root, ("train",), has_train, "train", "train_file")
                found["test"] = _find_in_folder(root, ("test",), cfg.test_file is None, "test", "test_file")
                found["dev"] = _find_in_folder(root, _DEV_STEMS, False, "dev", "dev_file")
                found["unlabeled"] = _find_in_folder(root, _UNLABELED_STEMS, False, "unlabelled", "unlabeled_file")
        else:
            out["kind"] = "single file"
            found["train"] = root
    for key, option in (("train", "train_file"), ("test", "test_file"), ("dev", "dev_file"),
                        ("unlabeled", "unlabeled_file")):
        o = _override(getattr(cfg, option), folder, option)
        if o is not None:
            found[key] = o
    for key, p in found.items():
        if p is not None:
            out[key] = _Source(str(p), read_table(p, cfg.text_column, cfg.label_column, cfg.id_column,
                                                  require_label=key != "unlabeled"))
    if out["train"] is None:
        raise DataError("no training data: pass --data.path (folder or file) or --data.train_file")
    return out


def _hub_sources(cfg: DataConfig) -> dict:
    if not cfg.hub_id:
        raise DataError("no local data given and data.hub_id is empty; pass --data.path /path/to/data or set "
                        "UDA_DATA_PATH")
    if not hub_reachable():
        raise DataError(_HUB_UNREACHABLE)
    import datasets

    try:
        ds = datasets.load_dataset(cfg.hub_id)
    except Exception as e:  # network, auth, missing dataset
        raise DataError(f"could not load hub dataset '{cfg.hub_id}' ({type(e).__name__}: {e}); "
                        f"pass --data.path /path/to/data or set UDA_DATA_PATH") from None
    names = None
    out: dict[str, Any] = {"train": None, "test": None, "dev": None, "unlabeled": None,
                           "default_names": None, "kind": f"hub:{cfg.hub_id}"}

    def convert(split: str) -> _Source:
        d = ds[split]
        cols = list(d.column_names)
        if cfg.text_column not in cols:
            raise DataError(f"hub dataset '{cfg.hub_id}' split '{split}' has no text column '{cfg.text_column}' "
                            f"(columns: {cols}); set --data.text_column")
        texts = d[cfg.text_column]
        labels = d[cfg.label_column] if cfg.label_column in cols else [None] * len(texts)
        ids = d[cfg.id_column] if cfg.id_column and cfg.id_column in cols else None
        rows = [{"id": str(ids[i]) if ids is not None else f"{split}-{i}", "text": texts[i], "label": labels[i]}
                for i in range(len(texts))]
        return _Source(f"{cfg.hub_id}[{split}]", rows)

    splits = list(ds.keys())
    if "train" not in splits:
        raise DataError(f"hub dataset '{cfg.hub_id}' has no 'train' split (splits: {splits}); pass --data.path")
    feat = ds["train"].features.get(cfg.label_column)
    if feat is not None and hasattr(feat, "names"):
        names = list(feat.names)
    out["default_names"] = names
    out["train"] = convert("train")
    for key, candidates in (("test", ("test",)), ("dev", ("validation", "dev")),
                            ("unlabeled", ("unsupervised", "unsup", "unlabeled"))):
        for s in candidates:
            if s in splits:
                out[key] = convert(s)
                break
    return out


# ----------------------------------------------------------------------------- labels

def _raw_label(value: Any) -> Any:
    """None for missing; int for ints / int-like strings / integral floats; else the stripped string."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return int(value) if value.is_integer() else value
    if isinstance(value, str):
        s = value.strip()
        if not s:
            return None
        return int(s) if _INT_RE.match(s) else s
    return value


class _LabelMap:
    def __init__(self, names: list[str], mode: str):
        self.names = [str(n) for n in names]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.mode = mode  # how the names were chosen, for info

    def map(self, value: Any, where: str, unlabeled_ok: bool) -> int:
        """Return the class index, or -1 for unlabelled (only when unlabeled_ok)."""
        if value is None or value == -1:
            if unlabeled_ok:
                return -1
            raise DataError(f"{where}: missing label (or -1); every example of this split needs a label "
                            f"in {self.names}")
        if isinstance(value, str):
            if value in self.index:
                return self.index[value]
            raise DataError(f"{where}: unknown label '{value}'; expected one of {self.names} (label set from "
                            f"{self.mode}): the splits' label sets differ. Fix the label, or set --data.label_names "
                            f"to the full list of class names")
        if isinstance(value, int):
            if 0 <= value < len(self.names):
                return value
            raise DataError(f"{where}: label {value} is out of range for {len(self.names)} classes {self.names} "
                            f"(label set from {self.mode}); "
                            f"fix the label or set --data.label_names to all class names")
        raise DataError(f"{where}: label {value!r} is neither a class index nor a class name from {self.names}")


def _choose_label_names(cfg: DataConfig, default_names: Optional[list], train: _Source) -> _LabelMap:
    if cfg.label_names:
        names = [str(n) for n in cfg.label_names]
        if len(set(names)) != len(names):
            raise DataError(f"--data.label_names {names} has duplicates; give each class once")
        # int-like strings that are class names stay names
        return _LabelMap(names, "data.label_names")
    if default_names:
        return _LabelMap(list(default_names), "dataset")
    ints, strs = set(), set()
    for i, r in enumerate(train.rows):
        v = _raw_label(r["label"])
        if v is None or v == -1:
            continue
        if isinstance(v, int):
            if v < 0:
                raise DataError(f"data file '{train.name}', row {i + 1} (id '{r['id']}'): label {v} is negative; "
                                f"use 0..K-1, a class name, or -1 for unlabelled")
            ints.add(v)
        elif isinstance(v, str):
            strs.add(v)
        else:
            raise DataError(f"data file '{train.name}', row {i + 1} (id '{r['id']}'): label {r['label']!r} is "
                            f"neither a class index nor a class name")
    if ints and strs:
        raise DataError(f"data file '{train.name}' mixes integer labels and label names ({sorted(strs)[:5]}); "
                        f"use one kind, or set --data.label_names so names and indices agree")
    if strs:
        return _LabelMap(sorted(strs), "sorted names in train")
    if not ints:
        raise DataError(f"data file '{train.name}' has no labelled rows (all labels missing or -1); "
                        f"the training pool needs labels")
    k = max(ints) + 1
    known = _KNOWN_HUB_LABEL_NAMES.get(cfg.hub_id or "")
    if known and k <= len(known):
        return _LabelMap(list(known), f"hub ClassLabel names of {cfg.hub_id}")
    return _LabelMap([str(i) for i in range(k)], "class indices")


def _map_labels(src: _Source, lm: _LabelMap, split: str, label_names_from_cfg: bool) -> list[int]:
    labels = []
    train = split == "train"
    for i, r in enumerate(src.rows):
        where = f"{split} data '{src.name}', row {i + 1} (id '{r['id']}')"
        raw = r["label"]
        v = raw.strip() if isinstance(raw, str) else raw
        if label_names_from_cfg and isinstance(v, str) and v in lm.index:
            y = lm.index[v]
        else:
            y = lm.map(_raw_label(raw), where, unlabeled_ok=train)
        if y >= 0:
            t = r["text"]
            if t is None or not str(t).strip():
                raise DataError(f"{where}: empty text in labelled data; remove the row or fill in its text")
        labels.append(y)
    return labels


# ----------------------------------------------------------------------------- selection

def _by_class(indices: Sequence[int], labels: Sequence[int], k: int) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in range(k)]
    for i in indices:
        out[labels[i]].append(i)
    return out


def _balanced_subset(per_class: list[list[int]], n: int, rng: np.random.Generator) -> list[int]:
    """Seeded subset of n indices, as even across classes as availability allows; sorted."""
    k = len(per_class)
    total = sum(len(c) for c in per_class)
    if n >= total:
        return sorted(i for c in per_class for i in c)
    quota = [0] * k
    remaining = n
    open_classes = [c for c in range(k) if per_class[c]]
    while remaining > 0 and open_classes:
        share, extra = divmod(remaining, len(open_classes))
        nxt = []
        for j, c in enumerate(open_classes):
            want = share + (1 if j < extra else 0)
            take = min(want, len(per_class[c]) - quota[c])
            quota[c] += take
            remaining -= take
            if quota[c] < len(per_class[c]):
                nxt.append(c)
        open_classes = nxt
    chosen: list[int] = []
    for c in range(k):
        if quota[c]:
            pick = rng.choice(len(per_class[c]), size=quota[c], replace=False)
            chosen.extend(per_class[c][j] for j in pick)
    return sorted(chosen)


def _read_id_order(path_str: str) -> list[str]:
    p = Path(path_str).expanduser()
    if not p.is_file():
        raise DataError(f"--data.id_order_file '{path_str}' does not exist; fix the path or leave it unset")
    text = _decode(_read_bytes(p), p)
    ids = [line.strip() for line in text.split("\n") if line.strip()]
    if not ids:
        raise DataError(f"--data.id_order_file '{p}' is empty; it must list one example id per line")
    return ids


def _select_by_order(order_file: str, pool: _Source, idx: Sequence[int], labels: Sequence[int], per: int,
                     lm: _LabelMap) -> list[int]:
    order = _read_id_order(order_file)
    lookup: dict[str, int] = {}
    for i in idx:  # exact ids win over prefix-stripped ones
        lookup.setdefault(_strip_split_prefix(pool.rows[i]["id"]), i)
    for i in idx:
        lookup[pool.rows[i]["id"]] = i
    k = len(lm.names)
    got: list[list[int]] = [[] for _ in range(k)]
    chosen: list[int] = []
    seen: set[int] = set()
    need = per * k
    for line in order:
        i = lookup.get(line)
        if i is None:
            i = lookup.get(_strip_split_prefix(line))
        if i is None or i in seen:
            continue
        c = labels[i]
        if len(got[c]) < per:
            got[c].append(i)
            chosen.append(i)
            seen.add(i)
            if len(chosen) == need:
                break
    short = [f"'{lm.names[c]}': {len(got[c])}" for c in range(k) if len(got[c]) < per]
    if short:
        raise DataError(f"--data.id_order_file '{order_file}' lists too few ids of the training pool "
                        f"'{pool.name}' for {per} per class (found {', '.join(short)}); check that its ids match "
                        f"the pool's id column '--data.id_column' or lower --data.num_labeled")
    return chosen


# ----------------------------------------------------------------------------- main entry

def load_text_classification(cfg: DataConfig, seed: int) -> TextClassificationData:
    """Load sources (see module doc) and build the labelled subset, dev, test and unlabelled pool."""
    t0 = time.perf_counter()
    path = resolve_data_path(cfg)
    local = bool(path or cfg.train_file)
    src = _local_sources(cfg, path) if local else _hub_sources(cfg)
    pool: _Source = src["train"]
    lm = _choose_label_names(cfg, src["default_names"], pool)
    k = len(lm.names)
    if k < 2:
        raise DataError(f"only one class {lm.names} in '{pool.name}'; classification needs at least 2 "
                        f"(set --data.label_names if classes are missing from the training pool)")
    from_cfg = bool(cfg.label_names)
    y_pool = _map_labels(pool, lm, "train", from_cfg)

    use_all = cfg.num_labeled == 0  # every labelled example of the pool that is not dev
    if cfg.num_labeled < 0 or cfg.num_labeled % k:
        raise DataError(f"data.num_labeled={cfg.num_labeled} must be a positive multiple of the number of classes "
                        f"({k}: {lm.names}) so each class gets the same count, or 0 for all labelled examples; "
                        f"e.g. --data.num_labeled {k * 10}")
    per = cfg.num_labeled // k

    # dev from a file (if any) first, so its texts can be kept out of everything else
    dev_rows: list[dict] = []
    dev_source = None
    if src["dev"] is not None:
        d = src["dev"]
        y_dev = _map_labels(d, lm, "dev", from_cfg)
        all_dev = list(range(len(d.rows)))
        keep = all_dev if cfg.dev_size <= 0 else _balanced_subset(_by_class(all_dev, y_dev, k), cfg.dev_size,
                                                                   _rng(seed, 1))
        dev_rows = [{"id": d.rows[i]["id"], "text": d.rows[i]["text"], "label": y_dev[i]} for i in keep]
        dev_source = d.name
    dev_texts = {r["text"] for r in dev_rows}

    labelled_idx = [i for i, y in enumerate(y_pool) if y >= 0 and pool.rows[i]["text"] not in dev_texts]
    pool_classes = _by_class(labelled_idx, y_pool, k)
    for c in range(k):
        if len(pool_classes[c]) < per:
            raise DataError(f"training pool '{pool.name}' has only {len(pool_classes[c])} labelled examples of class "
                            f"'{lm.names[c]}' but data.num_labeled={cfg.num_labeled} asks for {per} per class; "
                            f"lower --data.num_labeled or add data")

    carve = src["dev"] is None and cfg.dev_size > 0  # dev carved from the training pool

    def carve_dev(candidates: list[int]) -> tuple[list[int], list[dict]]:
        idx = _balanced_subset(_by_class(candidates, y_pool, k), cfg.dev_size, _rng(seed, 1))
        return idx, [{"id": pool.rows[i]["id"], "text": pool.rows[i]["text"], "label": y_pool[i]} for i in idx]

    dev_idx: list[int] = []
    if use_all:
        # dev first (when carved from the pool), then every other labelled example is trained on
        if carve:
            if len(labelled_idx) <= cfg.dev_size:
                raise DataError(f"data.dev_size={cfg.dev_size} leaves no training example of the {len(labelled_idx)} "
                                f"labelled ones of '{pool.name}' (data.num_labeled=0: all the rest); lower "
                                f"--data.dev_size or give --data.dev_file")
            dev_idx, dev_rows = carve_dev(labelled_idx)
            dev_source = f"carved from {pool.name}"
            dev_texts = {r["text"] for r in dev_rows}
        carved = set(dev_idx)
        train_idx = [i for i in labelled_idx if i not in carved and pool.rows[i]["text"] not in dev_texts]
        selection = "all labelled examples not in dev (data.num_labeled=0)"
    elif cfg.id_order_file:
        order_file = cfg.id_order_file
        data_path = resolve_data_path(cfg)
        if not Path(order_file).expanduser().exists() and data_path and Path(data_path).is_dir() \
                and (Path(data_path) / order_file).is_file():
            order_file = str(Path(data_path) / order_file)  # a bare name is looked up in the data folder
        train_idx = _select_by_order(order_file, pool, labelled_idx, y_pool, per, lm)
        selection = f"id_order_file {cfg.id_order_file}"
    else:
        rng = _rng(seed, 0)
        train_idx = []
        for c in range(k):
            pick = rng.choice(len(pool_classes[c]), size=per, replace=False)
            train_idx.extend(pool_classes[c][j] for j in pick)
        train_idx.sort()
        selection = f"random per class (seed {seed})"
    train_set = set(train_idx)
    train_texts = {pool.rows[i]["text"] for i in train_idx}

    if carve and not use_all:
        rest = [i for i in labelled_idx if i not in train_set and pool.rows[i]["text"] not in train_texts]
        if len(rest) < cfg.dev_size:
            raise DataError(f"data.dev_size={cfg.dev_size} but only {len(rest)} labelled examples of "
                            f"'{pool.name}' remain after the {len(train_idx)} training ones; lower --data.dev_size "
                            f"or give --data.dev_file")
        dev_idx, dev_rows = carve_dev(rest)
        dev_source = f"carved from {pool.name}"
        dev_texts = {r["text"] for r in dev_rows}
    dev_set = set(dev_idx)

    train_rows = [{"id": pool.rows[i]["id"], "text": pool.rows[i]["text"], "label": y_pool[i]} for i in train_idx]

    # test
    test_rows: list[dict] = []
    test_total = 0
    if src["test"] is not None:
        t = src["test"]
        y_test = _map_labels(t, lm, "test", from_cfg)
        test_total = len(t.rows)
        all_t = list(range(test_total))
        keep = all_t if cfg.max_test is None else _balanced_subset(_by_class(all_t, y_test, k), cfg.max_test,
                                                                    _rng(seed, 2))
        test_rows = [{"id": t.rows[i]["id"], "text": t.rows[i]["text"], "label": y_test[i]} for i in keep]

    # unlabelled pool: unlabelled file (long enough) + -1 rows of train + (optionally) the train pool
    unl: list[dict] = []
    skipped_short = skipped_dev = skipped_test = 0
    from_file = 0
    # every test text (not only a --data.max_test subset) is kept out of the pool: IMDB's train and
    # unsup files hold some test reviews verbatim
    test_texts = {r["text"] for r in src["test"].rows} if src["test"] is not None else set()

    def add_unlabeled(rid: str, text: Any, check_len: bool, hidden_label: int = -1) -> bool:
        nonlocal skipped_short, skipped_dev, skipped_test
        if text is None or not str(text).strip():
            return False
        if check_len and len(text) < cfg.min_unlabeled_chars:
            skipped_short += 1
            return False
        if text in dev_texts:
            skipped_dev += 1
            return False
        if text in test_texts:
            skipped_test += 1
            return False
        row = {"id": rid, "text": text}
        if hidden_label >= 0:
            row["hidden_label"] = hidden_label  # never read by training or selection: diagnostics only
        unl.append(row)
        return True

    if src["unlabeled"] is not None:
        for r in src["unlabeled"].rows:
            from_file += add_unlabeled(r["id"], r["text"], True)
    from_train_unlabeled = 0
    for i, y in enumerate(y_pool):
        if y < 0:
            from_train_unlabeled += add_unlabeled(pool.rows[i]["id"], pool.rows[i]["text"], True)
    from_train = 0
    if cfg.unlabeled_from_train:
        for i, y in enumerate(y_pool):
            if y >= 0 and i not in dev_set:
                from_train += add_unlabeled(pool.rows[i]["id"], pool.rows[i]["text"], False, y)
    before_cap = len(unl)
    if cfg.max_unlabeled is not None and cfg.max_unlabeled < len(unl):
        keep = np.sort(_rng(seed, 3).choice(len(unl), size=max(cfg.max_unlabeled, 0), replace=False))
        unl = [unl[j] for j in keep]

    def counts(rows: list[dict]) -> dict:
        c = {n: 0 for n in lm.names}
        for r in rows:
            c[lm.names[r["label"]]] += 1
        return c

    info = {
        "source": src["kind"],
        "path": path,
        "files": {key: (src[key].name if src[key] is not None else None)
                  for key in ("train", "test", "dev", "unlabeled")},
        "label_names": lm.names,
        "label_names_from": lm.mode,
        "num_classes": k,
        "seed": seed,
        "selection": selection,
        "dev_source": dev_source,
        "counts": {
            "train_pool": len(pool.rows),
            "train_pool_labeled": len(labelled_idx),
            "train_pool_per_class": {lm.names[c]: len(pool_classes[c]) for c in range(k)},
            "train": len(train_rows),
            "train_per_class": counts(train_rows),
            "dev": len(dev_rows),
            "dev_per_class": counts(dev_rows),
            "test": len(test_rows),
            "test_total": test_total,
            "test_per_class": counts(test_rows),
            "unlabeled": len(unl),
            "unlabeled_before_cap": before_cap,
            "unlabeled_from_file": from_file,
            "unlabeled_from_train_unlabeled_rows": from_train_unlabeled,
            "unlabeled_from_train_pool": from_train,
            "unlabeled_skipped_short": skipped_short,
            "unlabeled_skipped_dev_text": skipped_dev,
            "unlabeled_skipped_test_text": skipped_test,
        },
        "load_seconds": round(time.perf_counter() - t0, 3),
    }
    return TextClassificationData(label_names=lm.names, train=train_rows, dev=dev_rows, test=test_rows,
                                  unlabeled=unl, info=info)
