"""Large data files as Arrow tables on disk: each file is converted once, then memory-mapped by
``datasets`` (pages are read when a row is used and shared by every process on the machine), so a
pool of millions of texts costs disk, not memory.

Why our own conversion rather than ``datasets.load_dataset("json"/"csv", ...)``: its readers infer
column types (a CSV id ``007`` becomes the integer 7; a label column mixing integers and names does
not load) and their errors do not name the line, while our readers (``uda.data.iter_table``,
``uda.io.iter_jsonl``) keep the project's messages and semantics. And why not
``Dataset.from_generator``: its cache key is a hash of the generator's code and arguments, which
cannot see that the file changed. So a file is read by our reader and written batch by batch (memory
bounded by one batch) to an Arrow stream file named by a hash of the file's identity (path, inode,
size, modification time and its first and last 64 KiB), the reading options and
:data:`FORMAT_VERSION`, which ``datasets.Dataset.from_file`` then opens memory-mapped.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np

from uda.io import atomic_open, cache_home

if TYPE_CHECKING:
    import datasets
    import pyarrow as pa

FORMAT_VERSION = 1  # bump when what a conversion writes changes, so that old cache files are not used
BATCH_ROWS = 10_000


def cache_root() -> Path:
    """``$UDA_CACHE/data``, default ``~/.cache/uda/data``: safe to delete (files are converted again)."""
    return cache_home() / "data"


def file_key(path: str | os.PathLike) -> dict:
    """What identifies a file's content without reading it all. Size and modification time alone can
    miss a same-size rewrite within the file system's timestamp granularity; the two 64 KiB samples
    catch that (a file rewritten to the same size at the same instant with only its middle changed
    would still be missed)."""
    p = Path(path).resolve()
    st = p.stat()
    sample = hashlib.blake2b(digest_size=16)
    with open(p, "rb") as f:
        sample.update(f.read(1 << 16))
        f.seek(max(st.st_size - (1 << 16), 0))
        sample.update(f.read(1 << 16))
    return {"file": str(p), "inode": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "sample": sample.hexdigest()}


def cached_table(kind: str, key: dict, rows: Callable[[], Iterable[dict]], schema: "pa.Schema") -> "datasets.Dataset":
    """The memory-mapped ``datasets.Dataset`` of ``rows()`` (dicts with the ``schema``'s columns) for
    ``key``, converting only when the cache has no table for it. ``rows()`` may raise (a bad line): then
    nothing is cached. The table is written to a temporary file and renamed, so readers never see part
    of one, and processes converting the same file at once each write a whole, identical table."""
    import datasets
    import pyarrow as pa

    blob = json.dumps({"kind": kind, "version": FORMAT_VERSION, "schema": schema.to_string(), **key},
                      sort_keys=True, default=str)
    path = cache_root() / f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:32]}.arrow"
    if not path.is_file():
        with atomic_open(path, "wb", fsync=False) as f, pa.ipc.new_stream(f, schema) as writer:
            batch: list[dict] = []
            for row in rows():
                batch.append(row)
                if len(batch) == BATCH_ROWS:
                    writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=schema))
                    batch = []
            if batch:
                writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=schema))
    return datasets.Dataset.from_file(str(path))


def hash_array(column: "pa.ChunkedArray | pa.Array") -> np.ndarray:
    """A ``binary(16)`` column (text hashes, :func:`uda.io.text_hash`) as a numpy ``S16`` array,
    read straight from the Arrow buffers (no Python object per row)."""
    chunks = column.chunks if hasattr(column, "chunks") else [column]
    parts = [np.frombuffer(c.buffers()[1], dtype="S16", count=len(c), offset=c.offset * 16) for c in chunks]
    return np.concatenate(parts) if parts else np.empty(0, dtype="S16")


def take_pylist(column: "pa.ChunkedArray | pa.Array", rows: "np.ndarray | list[int]") -> list:
    """``column.take(rows).to_pylist()``, taken a chunk at a time: on a column of several chunks of strings,
    pyarrow's ``take`` first concatenates all of them, so a few rows of a memory-mapped pool would cost the
    whole column in memory."""
    chunks = column.chunks if hasattr(column, "chunks") else [column]
    rows = np.asarray(rows, dtype=np.int64)
    if len(chunks) == 1:
        return chunks[0].take(rows).to_pylist()
    offsets = np.cumsum([0] + [len(c) for c in chunks])
    which = np.searchsorted(offsets, rows, "right") - 1
    out: list = [None] * len(rows)
    for k in np.unique(which):
        at = np.flatnonzero(which == k)
        for i, v in zip(at.tolist(), chunks[int(k)].take(rows[at] - offsets[k]).to_pylist()):
            out[i] = v
    return out


def is_in_sorted(values: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """``values[i] in sorted_keys`` for each i (``sorted_keys`` sorted), vectorised by binary search."""
    found = np.zeros(len(values), dtype=bool)
    if len(sorted_keys) == 0:
        return found
    # searching in sorted order walks the keys' memory in order: several times faster on millions of values
    order = np.argsort(values)
    ordered = values[order]
    found[order] = sorted_keys[np.searchsorted(sorted_keys, ordered).clip(max=len(sorted_keys) - 1)] == ordered
    return found
