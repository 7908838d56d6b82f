"""Augmented copies made ahead of time (e.g. back-translation), looked up by the original text.

File format: one json object a line (plain ``.jsonl`` or gzip ``.jsonl.gz``)::

    {"text": "<original>", "augmented": ["<copy 1>", "<copy 2>", ...], "id": "<optional>"}

Lookup is by exact original text. Only a 16-byte hash of each original is kept in memory.
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Sequence

import numpy as np

from uda.io import BadLine, atomic_open, iter_jsonl, text_hash

__all__ = ["PrecomputedAugmenter", "MissingAugmentationError", "write_precomputed"]


class MissingAugmentationError(KeyError):
    """A text has no entry in the precomputed augmentation file (a ``KeyError``/``LookupError``)."""

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


class PrecomputedAugmenter:
    """Returns, for each text, one of its precomputed augmented copies, chosen uniformly with ``rng``."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.name = f"precomputed:{os.path.basename(self.path)}"
        self._copies: dict[bytes, list[str]] = {}
        try:
            for lineno, rec in iter_jsonl(self.path):
                text, aug = rec.get("text"), rec.get("augmented")
                if not isinstance(text, str):
                    raise ValueError(f'{self.path}, line {lineno}: "text" must be a string')
                if not isinstance(aug, list) or not aug or not all(isinstance(a, str) for a in aug):
                    raise ValueError(
                        f'{self.path}, line {lineno}: "augmented" must be a non-empty list of strings'
                    )
                # The same original may appear more than once: its copies are pooled.
                self._copies.setdefault(text_hash(text), []).extend(aug)
        except BadLine as b:
            raise ValueError(f"{self.path}, line {b.lineno}: {b.kind.lower()}: {b.reason}") from None

    def __len__(self) -> int:
        """Number of distinct original texts in the file."""
        return len(self._copies)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and text_hash(text) in self._copies

    def copies(self, text: str) -> list[str]:
        """All precomputed copies of ``text`` (raises :class:`MissingAugmentationError`)."""
        found = self._copies.get(text_hash(text))
        if found is None:
            snippet = text[:80].replace("\n", " ")
            raise MissingAugmentationError(
                f"{self.path} has no augmented copies for the text {snippet!r}"
                f"{'...' if len(text) > 80 else ''}; regenerate the file for this data "
                f"(its originals must match the texts given exactly)"
            )
        return list(found)

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        pools = []
        for text in texts:
            found = self._copies.get(text_hash(text))
            if found is None:
                self.copies(text)  # raises with the full message
            pools.append(found)
        if not pools:
            return []
        sizes = np.fromiter((len(c) for c in pools), dtype=np.int64, count=len(pools))
        picks = rng.integers(0, sizes)  # one uniform draw per text, in a single call
        return [c[i] for c, i in zip(pools, picks.tolist())]


def write_precomputed(
    path: str | os.PathLike,
    originals: Iterable[str],
    copies_per_text: Iterable[Sequence[str]],
    ids: Iterable[str] | None = None,
) -> None:
    """Write the precomputed-augmentation format; gzip when ``path`` ends in ``.gz``.

    ``copies_per_text`` is aligned with ``originals`` (one non-empty list of copies each); ``ids``, if
    given, is aligned too. The file is written to a temporary name and renamed into place.
    """
    sentinel = object()
    with atomic_open(path, "w", fsync=False) as f:
        id_iter = iter(ids) if ids is not None else None
        copies_iter = iter(copies_per_text)
        for n, text in enumerate(originals):
            copies = next(copies_iter, sentinel)
            if copies is sentinel:
                raise ValueError(f"copies_per_text is shorter than originals ({n} entries)")
            copies = list(copies)
            if not copies or not all(isinstance(c, str) for c in copies):
                raise ValueError(f"entry {n}: need a non-empty list of strings, got {copies!r}")
            rec: dict = {"text": text, "augmented": copies}
            if id_iter is not None:
                rid = next(id_iter, sentinel)
                if rid is sentinel:
                    raise ValueError(f"ids is shorter than originals ({n} entries)")
                rec = {"id": rid, **rec}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        if next(copies_iter, sentinel) is not sentinel:
            raise ValueError("copies_per_text is longer than originals")
