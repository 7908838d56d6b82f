"""Augmented copies made ahead of time (e.g. back-translation), looked up by the original text.

File format: one json object a line (plain ``.jsonl`` or gzip ``.jsonl.gz``)::

    {"text": "<original>", "augmented": ["<copy 1>", "<copy 2>", ...], "id": "<optional>"}

Lookup is by exact original text, through its 16-byte hash (:func:`uda.io.text_hash`). The file is
converted once into an Arrow table of (hash, copies) that stays on disk, memory-mapped
(:mod:`uda.arrow_cache`); in memory there are only the sorted hashes and their rows (24 bytes a text).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from uda.arrow_cache import MappedPages, cached_table, file_key, hash_array, is_in_sorted
from uda.io import BadLine, atomic_open, iter_jsonl, text_hash

__all__ = ["PrecomputedAugmenter", "MissingAugmentationError", "write_precomputed", "precomputed_writer"]


class MissingAugmentationError(KeyError):
    """A text has no entry in the precomputed augmentation file (a ``KeyError``/``LookupError``)."""

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


def _records(path: str) -> Iterator[dict]:
    """The file's lines as {"hash", "augmented"}, checked; a bad line is a ValueError naming it."""
    try:
        for lineno, rec in iter_jsonl(path):
            text, aug = rec.get("text"), rec.get("augmented")
            if not isinstance(text, str):
                raise ValueError(f'{path}, line {lineno}: "text" must be a string')
            if not isinstance(aug, list) or not aug or not all(isinstance(a, str) for a in aug):
                raise ValueError(f'{path}, line {lineno}: "augmented" must be a non-empty list of strings')
            yield {"hash": text_hash(text), "augmented": aug}
    except BadLine as b:
        raise ValueError(f"{path}, line {b.lineno}: {b.kind.lower()}: {b.reason}") from None


class PrecomputedAugmenter:
    """Returns, for each text, one of its precomputed augmented copies, chosen uniformly with ``rng``."""

    def __init__(self, path: str | os.PathLike):
        import pyarrow as pa

        self.path = os.fspath(path)
        self.name = f"precomputed:{os.path.basename(self.path)}"
        schema = pa.schema([("hash", pa.binary(16)), ("augmented", pa.list_(pa.string()))])
        table = cached_table("precomputed", file_key(self.path), lambda: _records(self.path), schema)
        self._copies = table.data.column("augmented")  # on disk; a row is read when its text is drawn
        self._pages = MappedPages(table)  # what a read mapped is given back after it
        hashes = hash_array(table.data.column("hash"), self._pages)
        # a stable sort keeps the lines of a repeated original in file order: their copies are pooled in that order
        self._rows = np.argsort(hashes, kind="stable")
        self._sorted = hashes[self._rows]

    def __len__(self) -> int:
        """Number of distinct original texts in the file."""
        return int(len(self._sorted) and 1 + np.count_nonzero(self._sorted[1:] != self._sorted[:-1]))

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and bool(is_in_sorted(np.array([text_hash(text)], dtype="S16"), self._sorted)[0])

    def missing(self, hashes: np.ndarray) -> np.ndarray:
        """Positions of the ``hashes`` (numpy ``S16``, :func:`uda.io.text_hash`) that have no copies."""
        return np.flatnonzero(~is_in_sorted(hashes, self._sorted))

    def _pool(self, text: str, lo: int, hi: int) -> list[str]:
        if lo == hi:
            snippet = text[:80].replace("\n", " ")
            raise MissingAugmentationError(
                f"{self.path} has no augmented copies for the text {snippet!r}"
                f"{'...' if len(text) > 80 else ''}; regenerate the file for this data "
                f"(its originals must match the texts given exactly)"
            )
        return [c for r in self._rows[lo:hi] for c in self._copies[int(r)].as_py()]

    def _pools(self, texts: Sequence[str]) -> list[list[str]]:
        hashes = np.array([text_hash(t) for t in texts], dtype="S16")
        lo, hi = np.searchsorted(self._sorted, hashes, "left"), np.searchsorted(self._sorted, hashes, "right")
        try:
            return [self._pool(t, int(a), int(b)) for t, a, b in zip(texts, lo, hi)]
        finally:
            self._pages.release()

    def copies(self, text: str) -> list[str]:
        """All precomputed copies of ``text`` (raises :class:`MissingAugmentationError`)."""
        return self._pools([text])[0]

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        pools = self._pools(texts)
        if not pools:
            return []
        sizes = np.fromiter((len(c) for c in pools), dtype=np.int64, count=len(pools))
        picks = rng.integers(0, sizes)  # one uniform draw per text, in a single call
        return [c[i] for c, i in zip(pools, picks.tolist())]


@contextmanager
def precomputed_writer(path: str | os.PathLike) -> Iterator[Callable[..., None]]:
    """Write the precomputed-augmentation format line by line: yields ``write(text, copies[, id])``
    (``copies`` a non-empty list of strings). gzip when ``path`` ends in ``.gz``; the lines go to a
    temporary name renamed into place when the block ends without an error, so a reader never sees part
    of a file."""
    with atomic_open(path, "w", fsync=False) as f:
        n = 0

        def write(text: str, copies: Sequence[str], rid: Any = _NO_ID) -> None:
            nonlocal n
            copies = _checked(n, copies)
            rec: dict = {"text": text, "augmented": copies} if rid is _NO_ID else {"id": rid, "text": text,
                                                                                   "augmented": copies}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1

        yield write


_NO_ID = object()  # write() without an id: the line has no "id" field


def _checked(n: int, copies: Sequence[str]) -> list[str]:
    copies = list(copies)
    if not copies or not all(isinstance(c, str) for c in copies):
        raise ValueError(f"entry {n}: need a non-empty list of strings, got {copies!r}")
    return copies


def write_precomputed(
    path: str | os.PathLike,
    originals: Iterable[str],
    copies_per_text: Iterable[Sequence[str]],
    ids: Iterable[str] | None = None,
) -> None:
    """Write the precomputed-augmentation format; gzip when ``path`` ends in ``.gz``.

    ``copies_per_text`` is aligned with ``originals`` (one non-empty list of copies each); ``ids``, if
    given, is aligned too. The file is written to a temporary name and renamed into place
    (:func:`precomputed_writer`, which writes it line by line).
    """
    sentinel = object()
    with precomputed_writer(path) as write:
        id_iter = iter(ids) if ids is not None else None
        copies_iter = iter(copies_per_text)
        for n, text in enumerate(originals):
            copies = next(copies_iter, sentinel)
            if copies is sentinel:
                raise ValueError(f"copies_per_text is shorter than originals ({n} entries)")
            copies = _checked(n, copies)
            rid = _NO_ID
            if id_iter is not None:
                rid = next(id_iter, sentinel)
                if rid is sentinel:
                    raise ValueError(f"ids is shorter than originals ({n} entries)")
            write(text, copies, rid)
        if next(copies_iter, sentinel) is not sentinel:
            raise ValueError("copies_per_text is longer than originals")
