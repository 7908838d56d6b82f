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

Each local file (and each hub split) becomes an Arrow table on disk, converted once and then memory-mapped
(``uda.arrow_cache``). The labelled, dev and test splits are small and read into lists; the unlabelled pool is
an :class:`UnlabeledPool` of (table, row) pairs whose texts are read only when a batch needs them.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import time
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from tasks.text.config import TextDataConfig
from uda.arrow_cache import MappedPages, cached_table, file_key, hash_array, is_in_sorted, numpy_column, take_pylist
from uda.data import (DataError, decode_text, read_bytes, check_data_file, file_extension, file_stem, iter_table,
                      read_table, resolve_data_path)  # noqa: F401 (read_table: re-exported for callers)
from uda.hub import hub_reachable
from uda.io import text_hash


@dataclass
class TextClassificationData:
    label_names: list[str]
    train: list[dict]      # the labelled training subset, each {"id": str, "text": str, "label": int}
    dev: list[dict]        # same keys; model selection split
    test: list[dict]       # same keys
    unlabeled: "UnlabeledPool"  # each {"id": str, "text": str} (+ "hidden_label"), read from disk
    info: dict = field(default_factory=dict)  # counts and sources (json-serialisable) for logging

    @property
    def num_labels(self) -> int:
        return len(self.label_names)


# ----------------------------------------------------------------------------- constants

_SPLIT_PREFIX = re.compile(r"^(?:train|test|unsup)_")
_UNLABELED_STEMS = ("unsup", "unlabeled", "unlabelled", "unsupervised")
_DEV_STEMS = ("dev", "validation", "valid", "val")
# ClassLabel names of hub datasets, for local copies whose labels are plain ints.
_KNOWN_HUB_LABEL_NAMES = {
    "stanfordnlp/imdb": ["neg", "pos"],
    "imdb": ["neg", "pos"],
}
_HUB_UNREACHABLE = (
    "no local data given and the hub is unreachable (data.hub_id '{hub_id}'); pass --data.path /path/to/{name} "
    "(a local copy: a folder with train/test/unsup files, or the aclImdb folder) or set UDA_DATA_PATH"
)
_INT_RE = re.compile(r"^[+-]?\d+$")


# ----------------------------------------------------------------------------- small helpers

def _say(kind: str, message: str) -> None:
    """A ``warning:`` or ``note:`` line about the data, from the main process only (each loads the data)."""
    if os.environ.get("RANK", "0") == "0":
        from tqdm.auto import tqdm

        tqdm.write(f"{kind}: {message}")


def _strip_split_prefix(example_id: str) -> str:
    return _SPLIT_PREFIX.sub("", example_id, count=1)


def _rng(seed: int, purpose: int = 0) -> np.random.Generator:
    """Labelled subset: Generator(seed); other purposes get their own independent stream."""
    seed = int(seed) % (2**63)
    return np.random.default_rng(seed if purpose == 0 else [seed, purpose])


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

def _row_schema() -> Any:
    """Columns of a source's Arrow table. The label is stored as JSON because files mix integers, names,
    floats and missing labels in one column (reported later, by row); a text's hash, length and blankness
    are computed once, at conversion, so that building the unlabelled pool reads these small columns
    instead of every text."""
    import pyarrow as pa

    return pa.schema([("id", pa.string()), ("text", pa.string()), ("label", pa.string()),
                      ("hash", pa.binary(16)), ("chars", pa.int64()), ("blank", pa.bool_())])


def _arrow_row(row: dict, where: str, i: int) -> dict:
    t = row["text"]
    if t is not None and not isinstance(t, str):  # local files are checked by iter_table, with the row's id
        raise DataError(f"data '{where}', row {i + 1}: the text is a {type(t).__name__} ({str(t)[:60]!r}), not a "
                        f"string; give a text column of strings (--data.text_column)")
    try:
        h = text_hash(t) if t is not None else bytes(16)
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape: Arrow cannot store it either
        raise DataError(f"data file '{where}', row {i + 1}: the text is not valid Unicode (a lone surrogate "
                        f"escape such as \\ud800); fix the row") from None
    return {"id": row["id"], "text": t, "label": json.dumps(row["label"], default=str), "hash": h,
            "chars": len(t) if t is not None else 0, "blank": t is None or not t.strip()}


@dataclass(eq=False)
class _Source:
    name: str                     # where it came from, for messages and info
    table: Any                    # datasets.Dataset with the _row_schema() columns

    @cached_property
    def rows(self) -> list[dict]:
        """{"id", "text", "label"(raw)} of every row, in memory: for the labelled splits, which are small."""
        ids, texts, labels = (self.table.data.column(c).to_pylist() for c in ("id", "text", "label"))
        self.pages.release()
        return [{"id": i, "text": t, "label": json.loads(y)} for i, t, y in zip(ids, texts, labels)]

    @cached_property
    def pages(self) -> MappedPages:
        return MappedPages(self.table)

    @cached_property
    def checks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(blank, length in characters, text hash) of every row, as numpy arrays (25 bytes a row)."""
        col = self.table.data.column
        return (numpy_column(col("blank"), self.pages), numpy_column(col("chars"), self.pages),
                hash_array(col("hash"), self.pages))


def _file_source(path: Path, cfg: TextDataConfig, require_label: bool) -> _Source:
    """A local file as a source: converted to Arrow by our reader (its checks and messages) on first use,
    then read from the cache while the file is unchanged."""
    check_data_file(path)
    columns = (cfg.text_column, cfg.label_column, cfg.id_column)
    rows = lambda: (_arrow_row(r, str(path), i) for i, r in  # noqa: E731
                    enumerate(iter_table(path, *columns, require_label=require_label)))
    # checks 2: a text that is not a string is an error (tables of the reader before it hold str() of it)
    key = {**file_key(path), "columns": columns, "require_label": require_label, "checks": 2}
    return _Source(str(path), cached_table("text", key, rows, _row_schema()))


def _rows_source(name: str, rows: list[dict]) -> _Source:
    """Rows already in memory (an aclImdb folder) as a source, with the same columns."""
    import datasets
    import pyarrow as pa

    table = pa.Table.from_pylist([_arrow_row(r, name, i) for i, r in enumerate(rows)], schema=_row_schema())
    return _Source(name, datasets.Dataset(datasets.table.InMemoryTable(table)))


class UnlabeledPool(SequenceABC):
    """The unlabelled pool, served from its sources' memory-mapped Arrow tables: item i is read when
    asked for, as ``{"id", "text"}``, plus ``"hidden_label"`` for a text of the labelled pool (diagnostics
    only, never trained on). In memory: 13 bytes a text (its table, row and hidden label)."""

    def __init__(self, tables: list, source: np.ndarray, row: np.ndarray, hidden: np.ndarray,
                 pages: Optional[list[MappedPages]] = None):
        self._tables, self._source, self._row, self._hidden = tables, source, row, hidden
        # the pages of the tables' files that a read mapped are given back after it (see MappedPages)
        self._pages = [p for p in (pages or []) if p]
        self._release()  # what the setup's reads left mapped
        # the Arrow columns themselves: a row read from them takes microseconds, through Dataset[i] ~100
        self._id_text = [(t.data.column("id"), t.data.column("text")) for t in tables]

    def __len__(self) -> int:
        return len(self._row)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self.examples_at(range(*i.indices(len(self))))
        return self.examples_at([i])[0]  # negative indices; IndexError past the end

    def examples_at(self, positions: Sequence[int]) -> list[dict]:
        """``[self[i] for i in positions]``, read together (a training step's batch): the pages the
        reads mapped are given back once for the batch, not once per text."""
        out = []
        for i in positions:
            i = range(len(self))[i]
            ids, texts = self._id_text[self._source[i]]
            r = int(self._row[i])
            out.append(self._example(ids[r].as_py(), texts[r].as_py(), self._hidden[i]))
        self._release()
        return out

    def _release(self) -> None:
        for p in self._pages:
            p.release()

    @staticmethod
    def _example(rid: str, text: str, hidden: int) -> dict:
        ex = {"id": rid, "text": text}
        if hidden >= 0:
            ex["hidden_label"] = int(hidden)
        return ex

    def _read(self, column: str, batch: int = 10_000) -> Iterator[Any]:
        """``column`` of every item in pool order, read a batch at a time (not row by row)."""
        for start in range(0, len(self), batch):
            src, rows = self._source[start:start + batch], self._row[start:start + batch]
            out = np.empty(len(rows), dtype=object)
            for k in np.unique(src):
                at = src == k
                out[at] = take_pylist(self._tables[k].data.column(column), rows[at])
            self._release()
            yield from out

    def __iter__(self) -> Iterator[dict]:
        for rid, text, hidden in zip(self._read("id"), self._read("text"), self._hidden):
            yield self._example(rid, text, hidden)

    def texts(self) -> Iterator[str]:
        """The texts, in pool order, read as they are consumed."""
        return self._read("text")

    def texts_at(self, positions: Sequence[int]) -> list[str]:
        """The texts of the items at ``positions`` (read together, a table at a time)."""
        positions = np.asarray(positions, dtype=np.int64)
        out = np.empty(len(positions), dtype=object)
        src, rows = self._source[positions], self._row[positions]
        for k in np.unique(src):
            at = src == k
            out[at] = take_pylist(self._tables[k].data.column("text"), rows[at])
        self._release()
        return out.tolist()

    def text_hashes(self) -> np.ndarray:
        """:func:`uda.io.text_hash` of every text, in pool order (numpy ``S16``), from the tables' hash columns."""
        hashes = np.empty(len(self), dtype="S16")
        for k, table in enumerate(self._tables):
            at = self._source == k
            hashes[at] = hash_array(table.data.column("hash").take(self._row[at]))
        self._release()
        return hashes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SequenceABC) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"UnlabeledPool({len(self)} texts)"


def require_copies(pool: UnlabeledPool, lookup: Any, file: str) -> None:
    """The join of a precomputed augmentation file to the pool, at setup: every pool text must have
    copies (found by text hash, ``lookup.missing``); else a DataError naming the first texts without."""
    missing = lookup.missing(pool.text_hashes())
    if len(missing):
        first = "; ".join(f"id '{ex['id']}', {ex['text'][:60]!r}" for ex in (pool[int(i)] for i in missing[:3]))
        raise DataError(f"--augment.file '{file}' has no augmented copy for {len(missing)} of the {len(pool)} "
                        f"unlabelled texts (the first: {first}); regenerate it for this data")


def _find_in_folder(folder: Path, stems: Sequence[str], required: bool, what: str, option: str) -> Optional[Path]:
    found = [p for p in sorted(folder.iterdir()) if p.is_file() and file_stem(p).lower() in stems and file_extension(p)]
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


def _local_sources(cfg: TextDataConfig, path: Optional[str]) -> dict:
    """Returns {"train", "test", "dev", "unlabeled": _Source | None, "default_names": list | None, "kind": str}."""
    folder: Optional[Path] = None
    out: dict[str, Any] = {"train": None, "test": None, "dev": None, "unlabeled": None,
                           "default_names": None, "kind": "files"}
    found: dict[str, Optional[Path]] = {"train": None, "test": None, "dev": None, "unlabeled": None}
    if path:
        root = Path(path).expanduser()
        if not root.exists():
            raise DataError(f"data path '{root}' (from --data.path or UDA_DATA_PATH) does not exist; pass "
                            f"--data.path /path/to/data: a folder with train and test files (and optionally dev "
                            f"and unsup ones), a single data file, or an aclImdb folder")
        if root.is_dir():
            folder = root
            acl = root if _is_aclimdb(root) else (root / "aclImdb" if _is_aclimdb(root / "aclImdb") else None)
            if acl is not None:
                splits = read_aclimdb(acl)
                out["kind"] = "aclImdb"
                out["default_names"] = ["neg", "pos"]
                out["train"] = _rows_source(str(acl / "train"), splits["train"])
                out["test"] = _rows_source(str(acl / "test"), splits["test"])
                if splits["unsup"]:
                    out["unlabeled"] = _rows_source(str(acl / "train" / "unsup"), splits["unsup"])
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
            out[key] = _file_source(p, cfg, require_label=key != "unlabeled")
    if out["train"] is None:
        raise DataError("no training data: pass --data.path (folder or file) or --data.train_file")
    return out


def _hub_sources(cfg: TextDataConfig) -> dict:
    if not cfg.hub_id:
        raise DataError("no local data given and data.hub_id is empty; pass --data.path /path/to/data or set "
                        "UDA_DATA_PATH")
    if not hub_reachable():
        raise DataError(_HUB_UNREACHABLE.format(hub_id=cfg.hub_id, name=cfg.hub_id.rsplit("/", 1)[-1]))
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
        name = f"{cfg.hub_id}[{split}]"
        has_label = cfg.label_column in cols
        has_id = bool(cfg.id_column) and cfg.id_column in cols

        def row(ex: dict, i: int) -> dict:
            return _arrow_row({"id": str(ex[cfg.id_column]) if has_id else f"{split}-{i}", "text": ex[cfg.text_column],
                               "label": ex[cfg.label_column] if has_label else None}, name, i)

        # the same columns as a local file's table, on disk: datasets caches the map beside the download
        table = d.map(row, with_indices=True, remove_columns=cols,
                      features=datasets.Features.from_arrow_schema(_row_schema()))
        return _Source(name, table)

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


def _choose_label_names(cfg: TextDataConfig, default_names: Optional[list], train: _Source) -> _LabelMap:
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
    named = _names_from_column(cfg, train, k)
    if named is not None:
        return _LabelMap(named, f"column '{cfg.label_name_column}' of {train.name}")
    return _LabelMap([str(i) for i in range(k)], "class indices")


def _names_from_column(cfg: TextDataConfig, train: _Source, k: int) -> Optional[list[str]]:
    """The class names of integer labels from the training file's ``data.label_name_column`` (TREC's
    ``label_name``): None when there is no such file or column, or a class has no name there; a label
    given two names, or a name given to two labels, is an error."""
    column = cfg.label_name_column
    path = Path(train.name)
    if not column or not path.is_file():
        return None
    names: dict[int, str] = {}
    owner: dict[str, int] = {}
    rows = iter_table(path, cfg.text_column, column, cfg.label_column, require_label=False)
    for i, r in enumerate(rows):  # "id" holds the integer label, "label" the name
        if r["label"] is None:
            if i == 0:
                return None  # no such column: stop at the first row
            continue
        y, name = _raw_label(r["id"]), str(r["label"]).strip()
        if not isinstance(y, int) or y < 0 or not name:
            continue
        if names.setdefault(y, name) != name or owner.setdefault(name, y) != y:
            raise DataError(f"data file '{path}', row {i + 1}: label {y} has the name '{name}' in column "
                            f"'{column}', but another row gives " + (
                                f"it the name '{names[y]}'" if names[y] != name else f"'{name}' to label {owner[name]}")
                            + "; fix the column, or set --data.label_names (or --data.label_name_column none)")
    if any(c not in names for c in range(k)):
        return None
    return [names[c] for c in range(k)]


def _map_labels(src: _Source, lm: _LabelMap, split: str, label_names_from_cfg: bool) -> list[int]:
    labels = []
    train = split == "train"
    first_row: dict[str, int] = {}
    for i, r in enumerate(src.rows):
        where = f"{split} data '{src.name}', row {i + 1} (id '{r['id']}')"
        if first_row.setdefault(r["id"], i) != i:
            raise DataError(f"{where}: the id '{r['id']}' is also the id of row {first_row[r['id']] + 1}; ids must "
                            f"be unique (labeled_ids.txt, dev_ids.txt and predictions name examples by id): fix the "
                            f"ids, or set --data.id_column none to number the rows")
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


def _require_every_class(pool: _Source, labels: Sequence[int], lm: _LabelMap) -> None:
    """Every class needs a labelled example in the training pool: a class without one would be trained
    as a class that never occurs (and --data.num_labeled 0 would not notice)."""
    present = np.bincount(np.array([y for y in labels if y >= 0], dtype=np.int64), minlength=len(lm.names))
    missing = [lm.names[c] for c in range(len(lm.names)) if present[c] == 0]
    if not missing:
        return
    if lm.mode == "data.label_names":
        raise DataError(f"--data.label_names {lm.names} names {len(lm.names)} classes, but the training pool "
                        f"'{pool.name}' has no labelled example of {missing}; give only the classes the data has")
    if lm.mode == "class indices":
        top = max(range(len(labels)), key=lambda i: labels[i])
        raise DataError(f"data file '{pool.name}': integer labels must be 0..K-1 with every class present, but no "
                        f"row has label {', '.join(missing)} while row {top + 1} (id '{pool.rows[top]['id']}') has "
                        f"label {labels[top]}; renumber the labels, or use class names")
    raise DataError(f"the training pool '{pool.name}' has no labelled example of class(es) {missing} (label set "
                    f"from {lm.mode}: {lm.names}); add examples, or set --data.label_names to the classes it has")


def _look_alike(name: str, names: Sequence[str]) -> list[str]:
    """The other class names that ``name`` could be a typo of: equal but for case, or close (difflib)."""
    others = [n for n in names if n != name]
    same_case = [n for n in others if n.casefold() == name.casefold()]
    close = difflib.get_close_matches(name, others, n=3, cutoff=0.75)
    return same_case + [n for n in close if n not in same_case]


def _require_two_per_class(pool: _Source, labels: Sequence[int], lm: _LabelMap) -> None:
    """Every class needs at least 2 labelled examples in the training pool: a class with one is nothing
    to learn, and is most often a label typo ('negg' or 'Pos' among 'neg' and 'pos'), which the message
    points out. Class names that differ only in case, each with examples enough, get a warning."""
    y = np.array(labels, dtype=np.int64)
    counts = np.bincount(y[y >= 0], minlength=len(lm.names))
    rare = [c for c in range(len(lm.names)) if counts[c] < 2]
    if not rare:
        for a, b in ((a, b) for i, a in enumerate(lm.names) for b in lm.names[i + 1:] if a.casefold() == b.casefold()):
            _say("warning", f"the training pool '{pool.name}' has the classes '{a}' and '{b}', whose names differ "
                            f"only in case; they are trained as two classes. If they are one, write the labels alike")
        return
    parts = []
    for c in rare:
        first = int(np.flatnonzero(y == c)[0])
        parts.append(f"'{lm.names[c]}' ({counts[c]} example: row {first + 1}, id '{pool.rows[first]['id']}')")
    alike = [f"'{lm.names[c]}' ~ " + " or ".join(f"'{n}'" for n in _look_alike(lm.names[c], lm.names))
             for c in rare if _look_alike(lm.names[c], lm.names)]
    hint = f"; near-duplicate class names, a typo in the labels? {', '.join(alike)}" if alike else ""
    raise DataError(f"the training pool '{pool.name}' has fewer than 2 labelled examples of the class(es) "
                    f"{', '.join(parts)} (label set from {lm.mode}: {lm.names}){hint}. A class needs at least 2 "
                    f"labelled examples: fix the labels, or remove those rows")


# ----------------------------------------------------------------------------- selection

def _by_class(indices: Sequence[int], labels: Sequence[int], k: int) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in range(k)]
    for i in indices:
        out[labels[i]].append(i)
    return out


def _draw(per_class: list[list[int]], quota: list[int], rng: np.random.Generator) -> list[int]:
    """``quota[c]`` indices of each class drawn with ``rng``, class by class; sorted."""
    chosen: list[int] = []
    for c, n in enumerate(quota):
        if n:
            pick = rng.choice(len(per_class[c]), size=n, replace=False)
            chosen.extend(per_class[c][j] for j in pick)
    return sorted(chosen)


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
    return _draw(per_class, quota, rng)


def _proportional_subset(per_class: list[list[int]], n: int, rng: np.random.Generator) -> list[int]:
    """Seeded subset of n indices whose class shares follow the candidates' (largest remainders), with at
    least one of every class that has candidates; sorted. A dev set drawn so mirrors an unbalanced data
    set (TREC's ABBR is 1.6% of its questions), where an even one would weigh its rare classes as much
    as its common ones when selecting a model."""
    k = len(per_class)
    total = sum(len(c) for c in per_class)
    if n >= total:
        return sorted(i for c in per_class for i in c)
    exact = [len(c) * n / total for c in per_class]
    quota = [min(len(per_class[c]), max(1 if per_class[c] else 0, int(exact[c]))) for c in range(k)]
    by_remainder = sorted(range(k), key=lambda c: (exact[c] - int(exact[c]), len(per_class[c])), reverse=True)
    while sum(quota) < n:  # hand out what is left, largest remainder first
        for c in by_remainder:
            if sum(quota) < n and quota[c] < len(per_class[c]):
                quota[c] += 1
    while sum(quota) > n:  # the minimum of one pushed it over: take back from the largest quotas
        c = max(range(k), key=lambda j: quota[j])
        quota[c] -= 1
    return _draw(per_class, quota, rng)


def _dev_subset(cfg: TextDataConfig, per_class: list[list[int]], n: int, rng: np.random.Generator) -> list[int]:
    """The dev examples: even across classes (``data.dev_sampling balanced``) or in the data's class
    shares (``proportional``)."""
    if cfg.dev_sampling == "proportional":
        return _proportional_subset(per_class, n, rng)
    return _balanced_subset(per_class, n, rng)


def _read_id_order(path_str: str) -> list[str]:
    p = Path(path_str).expanduser()
    if not p.is_file():
        raise DataError(f"--data.id_order_file '{path_str}' does not exist; fix the path or leave it unset")
    text = decode_text(read_bytes(p), p)
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


def test_subset(labels: Sequence[int], num_classes: int, size: int, seed: int) -> list[int]:
    """The balanced seeded subset of a test set that ``data.max_test`` evaluates (indices)."""
    return _balanced_subset(_by_class(range(len(labels)), labels, num_classes), size, _rng(seed, 2))


# ----------------------------------------------------------------------------- the split, step by step

@dataclass
class _Pool:
    """The training pool with its classes: ``labels[i]`` is row i's class index, -1 for an unlabelled row."""
    source: _Source
    lm: _LabelMap
    labels: list[int]
    names_from_cfg: bool  # the class names are data.label_names (a name that looks like an int stays a name)

    @property
    def k(self) -> int:
        return len(self.lm.names)

    def examples(self, idx: Sequence[int]) -> list[dict]:
        """{"id", "text", "label"} of the pool rows ``idx``, in that order."""
        return [{"id": self.source.rows[i]["id"], "text": self.source.rows[i]["text"], "label": self.labels[i]}
                for i in idx]


@dataclass
class _Split:
    """The pool rows trained on and the dev examples (a dev file's, or rows carved from the pool)."""
    train_idx: list[int]
    selection: str                 # how the training rows were chosen, for info
    dev_rows: list[dict]
    dev_source: Optional[str]      # the dev file, "carved from <pool>", or None (no dev set)
    dev_idx: list[int]             # pool rows carved into dev; [] with a dev file
    candidates: list[list[int]]    # by class: the pool's labelled rows whose text is not a dev file's


def _read_sources(cfg: TextDataConfig, path: Optional[str]) -> dict:
    """The local files (``path`` or ``data.train_file`` given) or else the hub dataset, as sources."""
    local = bool(path or cfg.train_file)
    return _local_sources(cfg, path) if local else _hub_sources(cfg)


def _label_pool(cfg: TextDataConfig, src: dict) -> _Pool:
    """The class names and the training pool's labels, checked: at least two classes, each present."""
    pool: _Source = src["train"]
    lm = _choose_label_names(cfg, src["default_names"], pool)
    if len(lm.names) < 2:
        raise DataError(f"only one class {lm.names} in '{pool.name}'; classification needs at least 2 "
                        f"(set --data.label_names if classes are missing from the training pool)")
    from_cfg = bool(cfg.label_names)
    labels = _map_labels(pool, lm, "train", from_cfg)
    _require_every_class(pool, labels, lm)
    _require_two_per_class(pool, labels, lm)
    return _Pool(pool, lm, labels, from_cfg)


def _per_class(cfg: TextDataConfig, lm: _LabelMap) -> int:
    """Labelled examples per class that ``data.num_labeled`` asks for (0: all of them)."""
    k = len(lm.names)
    if cfg.num_labeled < 0 or cfg.num_labeled % k:
        raise DataError(f"data.num_labeled={cfg.num_labeled} must be a positive multiple of the number of classes "
                        f"({k}: {lm.names}) so each class gets the same count, or 0 for all labelled examples; "
                        f"e.g. --data.num_labeled {k * 10}")
    return cfg.num_labeled // k


def _dev_file_rows(cfg: TextDataConfig, dev: Optional[_Source], pool: _Pool, seed: int) -> list[dict]:
    """The dev examples of a dev file (all of them, or a ``data.dev_size`` subset); [] without one."""
    if dev is None:
        return []
    labels = _map_labels(dev, pool.lm, "dev", pool.names_from_cfg)
    every = list(range(len(dev.rows)))
    keep = every if cfg.dev_size <= 0 else _dev_subset(cfg, _by_class(every, labels, pool.k), cfg.dev_size,
                                                       _rng(seed, 1))
    return [{"id": dev.rows[i]["id"], "text": dev.rows[i]["text"], "label": labels[i]} for i in keep]


def _labelled_candidates(cfg: TextDataConfig, pool: _Pool, per: int,
                         dev_texts: set) -> tuple[list[int], list[list[int]]]:
    """(the pool's labelled rows whose text is not a dev text, the same by class); a class with fewer
    than ``per`` of them is an error."""
    labelled_idx = [i for i, y in enumerate(pool.labels) if y >= 0 and pool.source.rows[i]["text"] not in dev_texts]
    by_class = _by_class(labelled_idx, pool.labels, pool.k)
    for c in range(pool.k):
        if len(by_class[c]) < per:
            raise DataError(f"training pool '{pool.source.name}' has only {len(by_class[c])} labelled examples of "
                            f"class '{pool.lm.names[c]}' but data.num_labeled={cfg.num_labeled} asks for {per} per "
                            f"class; lower --data.num_labeled or add data")
    return labelled_idx, by_class


def _carve_dev(cfg: TextDataConfig, pool: _Pool, seed: int, candidates: list[int], need: int,
               too_few: str) -> list[int]:
    """The ``data.dev_size`` pool rows of ``candidates`` that become dev (``data.dev_sampling``);
    ``too_few`` is the error when there are fewer than ``need`` candidates."""
    if len(candidates) < need:
        raise DataError(too_few)
    return _dev_subset(cfg, _by_class(candidates, pool.labels, pool.k), cfg.dev_size, _rng(seed, 1))


def _order_file(cfg: TextDataConfig, data_path: Optional[str]) -> str:
    """``data.id_order_file`` as given, or in the data folder when only found there."""
    order_file = cfg.id_order_file
    if not Path(order_file).expanduser().exists() and data_path and Path(data_path).is_dir() \
            and (Path(data_path) / order_file).is_file():
        order_file = str(Path(data_path) / order_file)  # a bare name is looked up in the data folder
    return order_file


def _choose_train(cfg: TextDataConfig, pool: _Pool, seed: int, data_path: Optional[str], labelled_idx: list[int],
                  by_class: list[list[int]], per: int) -> tuple[list[int], str]:
    """(``per`` training rows of each class, how they were chosen): by ``data.id_order_file``, else at
    random with the seed."""
    order_file = _order_file(cfg, data_path) if cfg.id_order_file else None
    if order_file and not Path(order_file).expanduser().exists() and Path(cfg.id_order_file).name == cfg.id_order_file:
        # a bare name (a recipe's) found neither here nor in the data folder: the data has no such order
        from tqdm.auto import tqdm

        tqdm.write(f"warning: --data.id_order_file '{cfg.id_order_file}' is neither in the working folder nor in the "
                   f"data folder, so the labelled set is drawn at random per class with the seed instead. For the "
                   f"reference split put that file (one id per line, in the reference order) in the data folder; "
                   f"--data.id_order_file none draws at random without this warning")
        order_file = None
    if order_file:
        train_idx = _select_by_order(order_file, pool.source, labelled_idx, pool.labels, per, pool.lm)
        return train_idx, f"id_order_file {cfg.id_order_file}"
    rng = _rng(seed, 0)
    train_idx = []
    for c in range(pool.k):
        pick = rng.choice(len(by_class[c]), size=per, replace=False)
        train_idx.extend(by_class[c][j] for j in pick)
    return sorted(train_idx), f"random per class (seed {seed})"


def _split_pool(cfg: TextDataConfig, src: dict, pool: _Pool, seed: int, data_path: Optional[str]) -> _Split:
    """The labelled sample and the dev set. A dev file comes first, so that its texts are kept out of
    the pool's choices; else dev is carved from the pool: before the training rows with
    ``data.num_labeled 0`` (every other labelled row is trained on), after them otherwise."""
    per = _per_class(cfg, pool.lm)
    dev_rows = _dev_file_rows(cfg, src["dev"], pool, seed)
    dev_source = src["dev"].name if src["dev"] is not None else None
    dev_texts = {r["text"] for r in dev_rows}
    labelled_idx, by_class = _labelled_candidates(cfg, pool, per, dev_texts)
    carve = src["dev"] is None and cfg.dev_size > 0
    name, rows = pool.source.name, pool.source.rows
    dev_idx: list[int] = []
    if cfg.num_labeled == 0:
        if carve:  # at least one example must be left to train on
            dev_idx = _carve_dev(cfg, pool, seed, labelled_idx, cfg.dev_size + 1, (
                f"data.dev_size={cfg.dev_size} leaves no training example of the {len(labelled_idx)} labelled ones "
                f"of '{name}' (data.num_labeled=0: all the rest); lower --data.dev_size or give --data.dev_file"))
            dev_texts = {rows[i]["text"] for i in dev_idx}
        carved = set(dev_idx)
        train_idx = [i for i in labelled_idx if i not in carved and rows[i]["text"] not in dev_texts]
        selection = "all labelled examples not in dev (data.num_labeled=0)"
    else:
        train_idx, selection = _choose_train(cfg, pool, seed, data_path, labelled_idx, by_class, per)
        if carve:
            train_set, train_texts = set(train_idx), {rows[i]["text"] for i in train_idx}
            rest = [i for i in labelled_idx if i not in train_set and rows[i]["text"] not in train_texts]
            dev_idx = _carve_dev(cfg, pool, seed, rest, cfg.dev_size, (
                f"data.dev_size={cfg.dev_size} but only {len(rest)} labelled examples of '{name}' remain after "
                f"the {len(train_idx)} training ones; lower --data.dev_size or give --data.dev_file"))
    if carve:
        dev_rows, dev_source = pool.examples(dev_idx), f"carved from {name}"
    return _Split(train_idx, selection, dev_rows, dev_source, dev_idx, by_class)


def _test_rows(cfg: TextDataConfig, test: Optional[_Source], pool: _Pool, seed: int) -> tuple[list[dict], int]:
    """(the test examples: all of them, or the ``data.max_test`` subset; how many the test file has)."""
    if test is None:
        return [], 0
    labels = _map_labels(test, pool.lm, "test", pool.names_from_cfg)
    every = list(range(len(test.rows)))
    keep = every if cfg.max_test is None else test_subset(labels, pool.k, cfg.max_test, seed)
    return [{"id": test.rows[i]["id"], "text": test.rows[i]["text"], "label": labels[i]} for i in keep], len(every)


def _unlabeled_keep(source: _Source, rows: np.ndarray, min_chars: Optional[int], exclude: dict,
                    skipped: dict) -> np.ndarray:
    """Which of ``rows`` of ``source`` join the unlabelled pool: not blank (empty, or missing), at least
    ``min_chars`` long (None: any length), and not a text of ``exclude`` (reason -> sorted text hashes). A
    row skipped is counted in ``skipped`` under its first reason, in that order ("empty" first)."""
    blank, chars, hashes = source.checks
    keep = ~blank[rows]
    skipped["empty"] += int((~keep).sum())
    if min_chars is not None:
        short = keep & (chars[rows] < min_chars)
        skipped["short"] += int(short.sum())
        keep &= ~short
    for reason, ref in exclude.items():
        hit = keep & is_in_sorted(hashes[rows], ref)
        skipped[reason] += int(hit.sum())
        keep &= ~hit
    return keep


def _unlabeled_pool(cfg: TextDataConfig, src: dict, pool: _Pool, split: _Split,
                    seed: int) -> tuple[UnlabeledPool, dict]:
    """The unlabelled pool and its counts: the unlabelled file's texts (long enough), the pool's
    unlabelled rows, and (``data.unlabeled_from_train``) the pool's labelled rows that are not dev, as
    (source, row) pairs whose texts stay on disk. Texts are compared by their 128-bit hash
    (uda.io.text_hash): two different texts share one with negligible odds. Every test text (not only
    a ``data.max_test`` subset) is kept out: IMDB's train and unsup files hold some test reviews verbatim."""
    sources = [s for s in (src["unlabeled"], pool.source) if s is not None]
    test_hashes = np.sort(src["test"].checks[2]) if src["test"] is not None else np.empty(0, dtype="S16")
    dev_hashes = np.sort(np.array([text_hash(t) for t in {r["text"] for r in split.dev_rows}], dtype="S16"))
    exclude = {"dev": dev_hashes, "test": test_hashes}
    skipped = {"empty": 0, "short": 0, "dev": 0, "test": 0}
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (source, row, hidden label) of each part

    def add(source: _Source, rows: np.ndarray, min_chars: Optional[int], hidden: Optional[np.ndarray] = None) -> int:
        keep = _unlabeled_keep(source, rows, min_chars, exclude, skipped)
        n = int(keep.sum())
        parts.append((np.full(n, sources.index(source), dtype=np.int8), rows[keep],
                      hidden[keep] if hidden is not None else np.full(n, -1, dtype=np.int32)))
        return n

    from_file = 0
    if src["unlabeled"] is not None:
        from_file = add(src["unlabeled"], np.arange(len(src["unlabeled"].table)), cfg.min_unlabeled_chars)
    y = np.array(pool.labels, dtype=np.int32)
    from_train_unlabeled = add(pool.source, np.flatnonzero(y < 0), cfg.min_unlabeled_chars)
    from_train = 0
    if cfg.unlabeled_from_train:
        dev_set = set(split.dev_idx)
        rows = np.array([i for i in np.flatnonzero(y >= 0) if i not in dev_set], dtype=np.int64)
        from_train = add(pool.source, rows, None, y[rows])
    source, row, hidden = (np.concatenate(c) for c in zip(*parts))
    before_cap = len(row)
    if cfg.max_unlabeled is not None and cfg.max_unlabeled < before_cap:
        keep = np.sort(_rng(seed, 3).choice(before_cap, size=max(cfg.max_unlabeled, 0), replace=False))
        source, row, hidden = source[keep], row[keep], hidden[keep]
    unl = UnlabeledPool([s.table for s in sources], source, row, hidden, [s.pages for s in sources])
    counts = {"unlabeled": len(unl), "unlabeled_before_cap": before_cap, "unlabeled_from_file": from_file,
              "unlabeled_from_train_unlabeled_rows": from_train_unlabeled, "unlabeled_from_train_pool": from_train,
              "unlabeled_skipped_empty": skipped["empty"], "unlabeled_skipped_short": skipped["short"],
              "unlabeled_skipped_dev_text": skipped["dev"], "unlabeled_skipped_test_text": skipped["test"]}
    return unl, counts


def _data_info(cfg: TextDataConfig, seed: int, src: dict, path: Optional[str], pool: _Pool, split: _Split,
               splits: dict, test_total: int, more_counts: dict) -> dict:
    """What data_info.json records: sources, class names, how the split was made and the counts
    (``splits``: "train", "dev" and "test" examples; ``more_counts``: the unlabelled pool's and others)."""
    names = pool.lm.names

    def per_class(rows: list[dict]) -> dict:
        c = {n: 0 for n in names}
        for r in rows:
            c[names[r["label"]]] += 1
        return c

    return {
        "source": src["kind"],
        "path": path,
        "files": {key: (src[key].name if src[key] is not None else None)
                  for key in ("train", "test", "dev", "unlabeled")},
        "label_names": names,
        "label_names_from": pool.lm.mode,
        "num_classes": pool.k,
        "seed": seed,
        "selection": split.selection,
        "dev_source": split.dev_source,
        "dev_sampling": cfg.dev_sampling,
        "counts": {
            "train_pool": len(pool.source.rows),
            "train_pool_labeled": sum(len(c) for c in split.candidates),
            "train_pool_per_class": {names[c]: len(split.candidates[c]) for c in range(pool.k)},
            "train": len(splits["train"]),
            "train_per_class": per_class(splits["train"]),
            "dev": len(splits["dev"]),
            "dev_per_class": per_class(splits["dev"]),
            "test": len(splits["test"]),
            "test_total": test_total,
            "test_per_class": per_class(splits["test"]),
            **more_counts,
        },
    }


# ----------------------------------------------------------------------------- what a run is told

def _warn_no_test(cfg: TextDataConfig, src: dict, path: Optional[str]) -> None:
    """Without a test file the run goes on, with no test scores: a warning says where one is looked for."""
    if src["test"] is not None:
        return
    if src["kind"].startswith("hub:"):
        why = f"hub dataset '{cfg.hub_id}' has no 'test' split"
    elif src["kind"] == "single file":
        why = f"--data.path '{path}' is a single file, read as the training pool"
    else:
        why = f"--data.train_file '{cfg.train_file}' is given without --data.path or --data.test_file"
    _say("warning", f"no test set was found ({why}): the run goes on, and its results have no test scores. To "
                    f"evaluate on a test set, pass --data.test_file FILE, or give --data.path a folder holding the "
                    f"train file and a test file (test.jsonl, test.csv, test.tsv, test.json or test.parquet, "
                    f"optionally gzipped)")


def _labelled_in_test(src: dict, pool: _Pool, splits: dict) -> int:
    """How many labelled examples of the training pool have a text that is also in the test file (all of
    it, not only a data.max_test subset); a warning gives the count, and how many were trained on."""
    if src["test"] is None:
        return 0
    ref = np.sort(src["test"].checks[2])
    labelled = np.flatnonzero(np.array(pool.labels, dtype=np.int64) >= 0)
    n = int(is_in_sorted(pool.source.checks[2][labelled], ref).sum())
    if n:
        def in_test(rows: list[dict]) -> int:
            hashes = np.array([text_hash(r["text"]) for r in rows], dtype="S16")
            return int(is_in_sorted(hashes, ref).sum()) if len(rows) else 0

        _say("warning", f"{n} of the {len(labelled)} labelled examples of the training pool '{pool.source.name}' "
                        f"have a text that is also in the test set '{src['test'].name}' ({in_test(splits['train'])} "
                        f"of the {len(splits['train'])} trained on, {in_test(splits['dev'])} of the "
                        f"{len(splits['dev'])} dev examples): test scores count them as unseen texts. Remove them "
                        f"from one of the files if the test set must be held out")
    return n


def _note_unlabelled_rows(cfg: TextDataConfig, pool: _Pool, counts: dict) -> None:
    """Training-pool rows without a label (null, empty, NaN or -1) are unlabelled texts: they join the
    unlabelled pool (always, whatever data.unlabeled_from_train says), with the unlabelled file's checks.
    One line says how many there are and how many joined."""
    n = counts["train_pool_unlabeled_rows"]
    if n:
        joined = counts["unlabeled_from_train_unlabeled_rows"]
        _say("note", f"{n} rows of the training pool '{pool.source.name}' have no label (null, empty or -1): they "
                     f"are read as unlabelled texts and join the unlabelled pool ({joined} did; {n - joined} were "
                     f"skipped: empty, shorter than --data.min_unlabeled_chars {cfg.min_unlabeled_chars}, or also a "
                     f"dev or test text)")


# ----------------------------------------------------------------------------- main entry

def load_text_classification(cfg: TextDataConfig, seed: int) -> TextClassificationData:
    """Load sources (see module doc) and build the labelled subset, dev, test and unlabelled pool."""
    t0 = time.perf_counter()
    path = resolve_data_path(cfg)
    src = _read_sources(cfg, path)
    _warn_no_test(cfg, src, path)
    pool = _label_pool(cfg, src)
    split = _split_pool(cfg, src, pool, seed, path)
    train = pool.examples(split.train_idx)
    test, test_total = _test_rows(cfg, src["test"], pool, seed)
    unlabeled, unlabeled_counts = _unlabeled_pool(cfg, src, pool, split, seed)
    splits = {"train": train, "dev": split.dev_rows, "test": test}
    counts = {**unlabeled_counts, "train_pool_unlabeled_rows": sum(1 for y in pool.labels if y < 0),
              "train_pool_labeled_in_test": _labelled_in_test(src, pool, splits)}
    _note_unlabelled_rows(cfg, pool, counts)
    info = _data_info(cfg, seed, src, path, pool, split, splits, test_total, counts)
    info["load_seconds"] = round(time.perf_counter() - t0, 3)
    return TextClassificationData(label_names=pool.lm.names, train=train, dev=split.dev_rows, test=test,
                                  unlabeled=unlabeled, info=info)
