"""Data reading every task shares: tables from local files, and the error bad data raises.

``read_table`` reads json, jsonl, csv and tsv (each optionally gzipped) and parquet into rows
``{"id", "text", "label"}`` (``iter_table``: the same rows, read as they are needed); every problem raises :class:`DataError` with a message that names the
file, row or option and says what to do. Task-specific loading (which rows are labelled, dev, test,
unlabelled) lives with each task.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

from uda.io import BadLine, iter_jsonl


class DataError(ValueError):
    """bad data; message names the file/row/option and says what to do"""



SUPPORTED_EXTENSIONS = (
    ".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv", ".csv.gz", ".tsv", ".tsv.gz", ".parquet",
)

def resolve_data_path(cfg: Any) -> Optional[str]:
    """``cfg.path``, else the ``UDA_DATA_PATH`` environment variable, else None (use the hub)."""
    if cfg.path:
        return str(cfg.path)
    env = os.environ.get("UDA_DATA_PATH", "").strip()
    return env or None


def file_extension(path: str | os.PathLike) -> Optional[str]:
    name = Path(path).name.lower()
    for ext in sorted(SUPPORTED_EXTENSIONS, key=len, reverse=True):
        if name.endswith(ext):
            return ext
    return None


def file_stem(path: str | os.PathLike) -> str:
    name = Path(path).name
    ext = file_extension(path)
    return name[: len(name) - len(ext)] if ext else name.split(".")[0]


# ----------------------------------------------------------------------------- readers

_READ_ERRORS = (OSError, EOFError, gzip.BadGzipFile)


def _unreadable(path: Path, e: Exception) -> DataError:
    return DataError(f"cannot read data file '{path}': {e}; check that it is a complete, valid file")


def read_bytes(path: Path) -> bytes:
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except _READ_ERRORS as e:
        raise _unreadable(path, e) from None


def decode_text(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataError(
            f"data file '{path}' is not valid UTF-8 (line {line}, byte {e.start}: {data[e.start:e.start + 1]!r}); "
            f"re-save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
        ) from None


def _records_from_json(text: str, path: Path) -> Iterable[dict]:
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
    return _records_from_jsonl(path)


def _records_from_jsonl(path: Path) -> Iterator[dict]:
    bad_utf8 = "re-save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
    try:
        for _, rec in iter_jsonl(path):
            yield rec
    except BadLine as b:
        if b.kind == "not UTF-8":
            raise DataError(f"data file '{path}' is not valid UTF-8 (line {b.lineno}, {b.detail} "
                            f"of the line); {bad_utf8}") from None
        if b.kind == "invalid JSON":
            raise DataError(f"data file '{path}', line {b.lineno}: {b.reason}; each line must be one JSON object") \
                from None
        raise DataError(f"data file '{path}', line {b.lineno}: expected a JSON object, got {b.detail}; each line "
                        f"must be one JSON object like {{\"text\": ..., \"label\": ...}}") from None
    except _READ_ERRORS as e:
        raise _unreadable(path, e) from None


def _records_from_csv(path: Path) -> Iterator[dict]:
    """Rows of a csv/tsv file (gzip or not), read as it goes. On bytes that are not UTF-8 the whole
    file is decoded once more, only to raise the message that names their line and byte."""
    delimiter = "\t" if ".tsv" in path.name.lower() else ","
    try:
        opener = gzip.open if path.name.lower().endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
            yield from csv.DictReader(f, delimiter=delimiter)
    except UnicodeDecodeError:
        decode_text(read_bytes(path), path)
        raise
    except csv.Error as e:
        raise DataError(f"data file '{path}' is not valid CSV: {e}; fix the file") from None
    except _READ_ERRORS as e:
        raise _unreadable(path, e) from None


def _records_from_parquet(path: Path, wanted: Sequence[str]) -> tuple[Iterator[dict], list[str]]:
    def broken(e: Exception) -> DataError:  # pyarrow raises several error types for broken files
        return DataError(f"cannot read parquet file '{path}': {e}; check that it is a complete parquet file")

    try:
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        columns = list(pf.schema_arrow.names)
    except ImportError:
        raise DataError(f"reading '{path}' needs pyarrow; `pip install pyarrow` or convert the file to jsonl") \
            from None
    except Exception as e:
        raise broken(e) from None

    def records() -> Iterator[dict]:
        try:
            for batch in pf.iter_batches(batch_size=10_000, columns=[c for c in wanted if c in columns]):
                yield from batch.to_pylist()
        except Exception as e:
            raise broken(e) from None

    return records(), columns


# The options that set a file and its columns, as messages name them (a command with options of its own,
# such as uda-augment, passes its names).
DATA_OPTIONS = {"path": "--data.path / --data.*_file", "text_column": "--data.text_column",
                "label_column": "--data.label_column"}


def check_data_file(p: Path, options: dict = DATA_OPTIONS) -> str:
    """The file's extension, after checking that ``p`` is a file of a supported kind."""
    if not p.exists():
        raise DataError(f"data file '{p}' does not exist; check {options['path']}")
    if p.is_dir():
        raise DataError(f"'{p}' is a folder where a data file was expected; name a file")
    ext = file_extension(p)
    if ext is None:
        raise DataError(f"data file '{p}' has an unsupported extension; use one of {', '.join(SUPPORTED_EXTENSIONS)}")
    return ext


def _kind_of(value: Any) -> str:
    """How a message names a value that should have been a text."""
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, (int, float)) or type(value).__module__ == "numpy":
        return f"a number ({value!r})"
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    if isinstance(value, (list, tuple)):
        return f"a list ({shown})"
    if isinstance(value, dict):
        return f"an object ({shown})"
    return f"a {type(value).__name__} ({shown})"


def iter_table(path: str | os.PathLike, text_column: str = "text", label_column: Optional[str] = "label",
               id_column: Optional[str] = "id", *, require_label: bool = True,
               options: dict = DATA_OPTIONS, require_text_column: bool = False) -> Iterator[dict]:
    """The rows of :func:`read_table`, read as they are needed (a large file is never held whole, except a
    one-document ``.json``). The same checks and errors; those about the whole file (no rows, a missing
    column) come at the first row. ``options``: the option names the messages tell the user to check
    (``options["bad_row"]``, when given, is added to what a bad row's message says to do). A text that is not a string (a
    number, a list, an object, a boolean; an integer parquet column) is an error naming the row; so is,
    with ``require_text_column``, a row without the text column (else its text is None, as an empty one)."""
    p = Path(path)
    ext = check_data_file(p, options)
    columns: Optional[list] = None  # None: the keys of the first record
    if ext == ".parquet":
        records, columns = _records_from_parquet(p, [c for c in (text_column, label_column, id_column) if c])
    elif ext in (".jsonl", ".jsonl.gz"):
        records = _records_from_jsonl(p)
    elif ext.startswith((".csv", ".tsv")):
        records = _records_from_csv(p)
    else:
        records = _records_from_json(decode_text(read_bytes(p), p), p)
    records = iter(records)
    first = next(records, None)
    if first is None:
        raise DataError(f"data file '{p}' is empty (no rows); give a file with at least one example")
    if columns is None:
        columns = [c for c in first if c is not None]  # csv: None holds a row's extra fields
    if text_column not in columns:
        raise DataError(f"data file '{p}' has no text column '{text_column}' (columns: {columns}); "
                        f"set {options['text_column']} to the right one")
    has_label = bool(label_column) and label_column in columns
    if require_label and not has_label:
        raise DataError(f"data file '{p}' has no label column '{label_column}' (columns: {columns}); "
                        f"set {options['label_column']} to the right one")
    has_id = bool(id_column) and id_column in columns
    stem = file_stem(p)
    for i, rec in enumerate(itertools.chain([first], records)):
        t = rec.get(text_column)
        rid = rec.get(id_column) if has_id else None
        if (t is not None and not isinstance(t, str)) or (require_text_column and text_column not in rec):
            row = f"data file '{p}', row {i + 1}" + (f" (id '{rid}')" if rid not in (None, "") else "")
            more = options.get("bad_row", "")
            if text_column in rec:
                raise DataError(f"{row}: the text (column '{text_column}') is {_kind_of(t)}, not a string; write "
                                f"it as a string (in JSON, in quotes; in parquet, a string column) or remove the "
                                f"row{more}")
            raise DataError(f"{row}: no text column '{text_column}' (the row has {[c for c in rec if c is not None]}); "
                            f"add its text or remove the row{more}")
        yield {
            "id": str(rid) if rid is not None and rid != "" else f"{stem}-{i}",
            "text": t,
            "label": rec.get(label_column) if has_label else None,
        }


def read_table(path: str | os.PathLike, text_column: str = "text", label_column: Optional[str] = "label",
               id_column: Optional[str] = "id", *, require_label: bool = True) -> list[dict]:
    """Read a json / jsonl / jsonl.gz / json.gz / csv(.gz) / tsv(.gz) / parquet file.

    Returns one dict per row: ``{"id": str, "text": str | None, "label": raw value or None}``. The id comes from
    ``id_column`` when the file has it, else ``"<filestem>-<row>"`` (row counted from 0). Labels are returned
    as stored (int, label name, or None when missing); :func:`load_text_classification` maps them.
    ``require_label=False`` allows a file without the label column (unlabelled data).
    """
    return list(iter_table(path, text_column, label_column, id_column, require_label=require_label))
