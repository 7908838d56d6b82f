"""The rows ``uda-augment`` reads, served as it goes: input files converted once to Arrow tables on disk
(:func:`uda.arrow_cache.cached_table`, the path training reads its data through), a task's unlabelled pool,
or (id, text) pairs already in memory.

A file is read by the core's readers (:func:`uda.data.iter_table`, or with ``on_bad_line="skip"`` line by
line with :func:`uda.io.iter_jsonl`), so its errors name the file and line as before; each row is stored
with its text hash and blankness, and a skipped bad line as a row with its line number, kind and reason
(so that a second run over the same file reports it without reading the file again). In memory there
are only per-row numpy arrays (a text's 16-byte hash and blank flag) and one batch of rows at a time.

Every source gives the same few methods (:class:`TableRows`, :class:`SequenceRows`, :class:`ListRows`):
``len``, ``blank()``, ``text_hashes()``, ``texts()`` (in order, read as consumed), ``texts_at(positions)``
(only those rows), ``rows()`` ((id, text, source) in order) and ``bad_lines()`` (skip entries).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from uda.arrow_cache import MappedPages, cached_table, file_key, hash_array, numpy_column, take_pylist
from uda.data import DataError, check_data_file, iter_table
from uda.io import BadLine, iter_jsonl, text_hash

__all__ = ["InputRow", "TableRows", "SequenceRows", "ListRows", "open_inputs", "read_input_rows"]

BATCH = 1024  # rows read from a table at a time


@dataclass
class InputRow:
    row: int  # position among all input rows (0-based, over all inputs in order)
    id: str
    text: Optional[str]
    source: str


def _is_blank(text: Optional[str]) -> bool:
    return text is None or not text.strip()


# --------------------------------------------------------------------------------------------
# files -> Arrow tables
# --------------------------------------------------------------------------------------------


def _schema() -> Any:
    """A converted input file: its rows (id, text, text hash, blankness, line number when read line by line)
    and, as rows with ``kind`` set, the lines skipped with ``on_bad_line="skip"``."""
    import pyarrow as pa

    return pa.schema([("id", pa.string()), ("text", pa.string()), ("hash", pa.binary(16)), ("blank", pa.bool_()),
                      ("line", pa.int64()), ("kind", pa.string()), ("reason", pa.string())])


_OPTIONS = {"path": "--input", "text_column": "--text_column", "label_column": "--label_column"}  # in messages


def _row(rid: str, text: Optional[str], path: Path, where: str, line: Optional[int] = None) -> dict:
    try:
        h = text_hash(text) if text is not None else bytes(16)
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape: Arrow cannot store it either
        raise DataError(f"data file '{path}', {where}: the text is not valid Unicode (a lone surrogate escape such "
                        f"as \\ud800); fix the row") from None
    return {"id": rid, "text": text, "hash": h, "blank": _is_blank(text), "line": line, "kind": None, "reason": None}


def _bad_row(line: int, kind: str, reason: str) -> dict:
    return {"id": None, "text": None, "hash": bytes(16), "blank": True, "line": line, "kind": kind, "reason": reason}


def _strict_rows(path: Path, text_column: str, id_column: Optional[str]) -> Iterator[dict]:
    """``--on_bad_line error``: a row without the text column, or whose text is not a string, stops the
    command with an error naming the file and row (the core's reader raises it)."""
    skip = path.name.lower().endswith((".jsonl", ".jsonl.gz"))  # the files --on_bad_line skip reads line by line
    options = {**_OPTIONS, "bad_row": ", or pass --on_bad_line skip to skip such rows (the report lists them)"
               if skip else ""}
    rows = iter_table(path, text_column, None, id_column, require_label=False, options=options,
                      require_text_column=True)
    for i, r in enumerate(rows):
        yield _row(r["id"], r["text"], path, f"row {i + 1}")


def _lenient_rows(path: Path, text_column: str, id_column: Optional[str]) -> Iterator[dict]:
    """Line-by-line jsonl reading that turns bad lines (not UTF-8, not json, not an object, without the text
    field or with a text that is not a string) into skip rows (in line order) instead of failing the file; a
    file where no line has the text column is an error."""
    bad: list[BadLine] = []
    stem = path.name.split(".")[0]
    seen_column = False
    for lineno, rec in iter_jsonl(path, on_bad="skip", bad=bad):
        for b in bad:  # lines skipped before this one
            yield _bad_row(b.lineno, b.kind, b.reason)
        bad.clear()
        if text_column not in rec:
            yield _bad_row(lineno, "missing text column", f"no '{text_column}' field")
            continue
        seen_column = True
        rid = rec.get(id_column) if id_column else None
        t = rec[text_column]
        if t is not None and not isinstance(t, str):
            yield _bad_row(lineno, "text not a string", f"'{text_column}' is a {type(t).__name__}, not a string")
            continue
        yield _row(str(rid) if rid not in (None, "") else f"{stem}-{lineno - 1}", t, path, f"line {lineno}", lineno)
    for b in bad:
        yield _bad_row(b.lineno, b.kind, b.reason)
    if not seen_column:
        raise DataError(f"data file '{path}' has no row with a text column '{text_column}'; "
                        f"set --text_column to the right one")


def _file_table(p: str | os.PathLike, text_column: str, id_column: Optional[str], on_bad_line: str) -> Any:
    path = Path(p).expanduser()
    name = path.name.lower()
    lenient = on_bad_line == "skip" and (name.endswith(".jsonl") or name.endswith(".jsonl.gz"))
    if lenient:
        if not path.is_file():
            raise DataError(f"data file '{path}' does not exist; check --input")
        rows = lambda: _lenient_rows(path, text_column, id_column)  # noqa: E731
    else:
        check_data_file(path, _OPTIONS)
        rows = lambda: _strict_rows(path, text_column, id_column)  # noqa: E731
    # checks 2: a row without the text column (strict) or with a text that is not a string is refused
    key = {**file_key(path), "text_column": text_column, "id_column": id_column, "lenient": lenient, "checks": 2}
    return cached_table("augment-input", key, rows, _schema())


def open_inputs(paths: Sequence[str | os.PathLike], text_column: str = "text", id_column: Optional[str] = "id",
                on_bad_line: str = "error", limit: Optional[int] = None) -> "TableRows":
    """The rows of ``paths`` (files the core reads: json/jsonl/csv/tsv, optionally gzipped, or parquet), in
    order. Each file is converted to an Arrow table on its first use, then read from the cache while it is
    unchanged. ``on_bad_line="skip"`` reads json-lines files line by line, skipping (and reporting, with the
    line number) lines that are not UTF-8, not valid json, not an object, or lack the text field; other
    formats are always read strictly. Missing files and columns raise a ``DataError``."""
    if on_bad_line not in ("error", "skip"):
        raise ValueError(f"on_bad_line must be 'error' or 'skip', got {on_bad_line!r}")
    tables = [(str(Path(p).expanduser()), _file_table(p, text_column, id_column, on_bad_line)) for p in paths]
    return TableRows(tables, limit)


def read_input_rows(paths: Sequence[str | os.PathLike], text_column: str = "text", id_column: Optional[str] = "id",
                    on_bad_line: str = "error") -> tuple[list[InputRow], list[dict]]:
    """Every row of ``paths`` in memory, as (rows, skipped): for small inputs and tests. :func:`open_inputs`
    (the same reading and errors) serves the rows as they are needed."""
    t = open_inputs(paths, text_column, id_column, on_bad_line)
    rows = [InputRow(i, rid, text, src) for i, (rid, text, src) in enumerate(t.rows())]
    return rows, list(t.bad_lines())


class TableRows:
    """The rows of converted input files (their memory-mapped Arrow tables), the first ``limit`` only."""

    def __init__(self, tables: Sequence[tuple[str, Any]], limit: Optional[int] = None):
        self._parts: list[tuple[str, Any, Optional[np.ndarray], int]] = []  # (source, table, good rows, rows used)
        self._bad: list[tuple[str, Any, np.ndarray]] = []
        self._pages = [MappedPages(ds) for _, ds in tables]  # what a read mapped is given back after it
        left = limit
        for k, (name, ds) in enumerate(tables):
            table = ds.data
            bad = numpy_column(table.column("kind").is_valid(), self._pages[k])
            good = np.flatnonzero(~bad) if bad.any() else None
            if good is not None:
                self._bad.append((name, table, np.flatnonzero(bad)))
            count = len(good) if good is not None else len(table)
            used = count if left is None else max(0, min(count, left))
            left = None if left is None else left - used
            self._parts.append((name, table, good, used))
        self._starts = np.cumsum([0] + [p[3] for p in self._parts])

    def __len__(self) -> int:
        return int(self._starts[-1])

    def _rows_of(self, part: int) -> np.ndarray | slice:
        _, _, good, used = self._parts[part]
        return good[:used] if good is not None else slice(0, used)

    def _column(self, name: str) -> Iterator[tuple[int, list]]:
        """(part, values) of column ``name`` over the rows used, a batch at a time."""
        for k, (_, table, good, used) in enumerate(self._parts):
            col = table.column(name)
            for start in range(0, used, BATCH):
                end = min(start + BATCH, used)
                values = (col.slice(start, end - start).to_pylist() if good is None
                          else take_pylist(col, good[start:end]))
                self._pages[k].release()
                yield k, values

    def blank(self) -> np.ndarray:
        parts = [numpy_column(t.column("blank"), self._pages[k])[self._rows_of(k)]
                 for k, (_, t, _, _) in enumerate(self._parts)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)

    def text_hashes(self) -> np.ndarray:
        parts = [hash_array(t.column("hash"), self._pages[k])[self._rows_of(k)]
                 for k, (_, t, _, _) in enumerate(self._parts)]
        return np.concatenate(parts) if parts else np.empty(0, dtype="S16")

    def texts(self) -> Iterator[Optional[str]]:
        for _, batch in self._column("text"):
            yield from batch

    def rows(self) -> Iterator[tuple[str, Optional[str], str]]:
        for (k, ids), (_, texts) in zip(self._column("id"), self._column("text")):
            src = self._parts[k][0]
            yield from ((rid, text, src) for rid, text in zip(ids, texts))

    def texts_at(self, positions: np.ndarray) -> list[str]:
        positions = np.asarray(positions, dtype=np.int64)
        out: list = [None] * len(positions)
        part = np.searchsorted(self._starts, positions, "right") - 1
        for k in np.unique(part):
            at = np.flatnonzero(part == k)
            local = positions[at] - self._starts[k]
            _, table, good, _ = self._parts[k]
            got = take_pylist(table.column("text"), good[local] if good is not None else local)
            self._pages[k].release()
            for i, t in zip(at.tolist(), got):
                out[i] = t
        return out

    def bad_lines(self) -> Iterator[dict]:
        """The skipped lines (``on_bad_line="skip"``) of every file, in file and line order, all of them
        (``limit`` counts rows only)."""
        for name, table, rows in self._bad:
            for start in range(0, len(rows), BATCH):
                at = rows[start:start + BATCH]
                cols = [take_pylist(table.column(c), at) for c in ("line", "kind", "reason")]
                for line, kind, reason in zip(*cols):
                    yield {"row": None, "id": None, "source": name, "line": line, "kind": kind, "reason": reason}


# --------------------------------------------------------------------------------------------
# a task's pool, pairs in memory
# --------------------------------------------------------------------------------------------


class SequenceRows:
    """A sequence of ``{"id", "text"}`` dicts that gives its texts' hashes (``text_hashes()``), its texts in
    order (``texts()``) and, optionally, the texts at given positions (``texts_at``), as
    ``tasks.text.data.UnlabeledPool`` does: read as it goes, never held."""

    def __init__(self, pool: Any, source: str, limit: Optional[int] = None):
        self.pool, self.source = pool, source
        self._n = len(pool) if limit is None else max(0, min(len(pool), limit))

    def __len__(self) -> int:
        return self._n

    def blank(self) -> np.ndarray:
        return np.fromiter((_is_blank(t) for t in self.texts()), dtype=bool, count=self._n)

    def text_hashes(self) -> np.ndarray:
        return np.asarray(self.pool.text_hashes(), dtype="S16")[:self._n]

    def texts(self) -> Iterator[Optional[str]]:
        return itertools.islice(self.pool.texts(), self._n)

    def rows(self) -> Iterator[tuple[str, Optional[str], str]]:
        return ((str(ex["id"]), ex["text"], self.source) for ex in itertools.islice(iter(self.pool), self._n))

    def texts_at(self, positions: np.ndarray) -> list[str]:
        if hasattr(self.pool, "texts_at"):
            return list(self.pool.texts_at(positions))
        return [self.pool[int(i)]["text"] for i in positions]

    def bad_lines(self) -> Iterator[dict]:
        return iter(())


class ListRows:
    """(id, text) pairs in memory (the caller holds them already)."""

    def __init__(self, pairs: Sequence[tuple[Any, Optional[str]]], source: str, limit: Optional[int] = None):
        self.pairs = pairs if isinstance(pairs, list) else list(pairs)
        self.source = source
        self._n = len(self.pairs) if limit is None else max(0, min(len(self.pairs), limit))

    def __len__(self) -> int:
        return self._n

    def blank(self) -> np.ndarray:
        return np.fromiter((_is_blank(t) for t in self.texts()), dtype=bool, count=self._n)

    def text_hashes(self) -> np.ndarray:
        return np.array([text_hash(t) if t is not None else bytes(16) for t in self.texts()], dtype="S16") \
            if self._n else np.empty(0, dtype="S16")

    def texts(self) -> Iterator[Optional[str]]:
        return (t for _, t in itertools.islice(self.pairs, self._n))

    def rows(self) -> Iterator[tuple[str, Optional[str], str]]:
        return ((str(rid), t, self.source) for rid, t in itertools.islice(self.pairs, self._n))

    def texts_at(self, positions: np.ndarray) -> list[str]:
        return [self.pairs[int(i)][1] for i in positions]

    def bad_lines(self) -> Iterator[dict]:
        return iter(())
