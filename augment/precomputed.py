"""Augmented copies made ahead of time (e.g. back-translation), looked up by the original text.

File format: one json object a line (plain ``.jsonl`` or gzip ``.jsonl.gz``)::

    {"text": "<original>", "augmented": ["<copy 1>", "<copy 2>", ...], "id": "<optional>"}

Lookup is by exact original text. Only a 16-byte hash of each original is kept in memory.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from typing import IO, Iterable, Sequence

import numpy as np

__all__ = ["PrecomputedAugmenter", "MissingAugmentationError", "write_precomputed"]


class MissingAugmentationError(KeyError):
    """A text has no entry in the precomputed augmentation file (a ``KeyError``/``LookupError``)."""

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _open_text(path: str) -> IO[str]:
    if _is_gzip(path):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


class PrecomputedAugmenter:
    """Returns, for each text, one of its precomputed augmented copies, chosen uniformly with ``rng``."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.name = f"precomputed:{os.path.basename(self.path)}"
        self._copies: dict[bytes, list[str]] = {}
        with _open_text(self.path) as f:
            for lineno, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{self.path}, line {lineno}: invalid json ({e.msg})") from e
                if not isinstance(rec, dict):
                    raise ValueError(f"{self.path}, line {lineno}: expected a json object")
                text, aug = rec.get("text"), rec.get("augmented")
                if not isinstance(text, str):
                    raise ValueError(f'{self.path}, line {lineno}: "text" must be a string')
                if not isinstance(aug, list) or not aug or not all(isinstance(a, str) for a in aug):
                    raise ValueError(
                        f'{self.path}, line {lineno}: "augmented" must be a non-empty list of strings'
                    )
                # The same original may appear more than once: its copies are pooled.
                self._copies.setdefault(_key(text), []).extend(aug)

    def __len__(self) -> int:
        """Number of distinct original texts in the file."""
        return len(self._copies)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and _key(text) in self._copies

    def copies(self, text: str) -> list[str]:
        """All precomputed copies of ``text`` (raises :class:`MissingAugmentationError`)."""
        found = self._copies.get(_key(text))
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
            found = self._copies.get(_key(text))
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
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".precomputed-", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; give it the usual permissions
    sentinel = object()
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(tmp, "wt", encoding="utf-8") as f:
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
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
