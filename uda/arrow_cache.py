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
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

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


def hash_array(column: "pa.ChunkedArray | pa.Array", pages: Optional["MappedPages"] = None) -> np.ndarray:
    """A ``binary(16)`` column (text hashes, :func:`uda.io.text_hash`) as a numpy ``S16`` array,
    read straight from the Arrow buffers (no Python object per row); ``pages`` released after each chunk."""
    return numpy_column(column, pages, lambda c: np.frombuffer(c.buffers()[1], dtype="S16", count=len(c),
                                                               offset=c.offset * 16), "S16")


def numpy_column(column: "pa.ChunkedArray | pa.Array", pages: Optional["MappedPages"] = None,
                 convert: Optional[Callable[[Any], np.ndarray]] = None, dtype: Any = None) -> np.ndarray:
    """A column as one numpy array, converted a chunk at a time (``convert``, default ``to_numpy``) with
    ``pages`` (:class:`MappedPages`) released after each, so that reading a column of a large memory-mapped
    table never holds more than a chunk's pages."""
    chunks = column.chunks if hasattr(column, "chunks") else [column]
    convert = convert or (lambda c: c.to_numpy(zero_copy_only=False))
    parts = []
    for c in chunks:
        parts.append(convert(c))  # concatenate copies: nothing below points into the mapping
        if pages is not None:
            pages.release()
    if parts:
        return np.concatenate(parts)
    return np.empty(0, dtype=dtype if dtype is not None else column.type.to_pandas_dtype())


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


MADV_DONTNEED = 4  # <sys/mman.h> on Linux


class MappedPages:
    """The pages of a memory-mapped table file that this process has mapped, given back on :meth:`release`.

    Why this exists: on Linux a page fault on a file whose page-cache pages are large folios (the
    default for recently written or read-ahead files since kernel 6.x) maps the whole folio, up to 2 MiB,
    even under ``madvise(MADV_RANDOM)``. Drawing one 1 KiB review from a memory-mapped pool then adds
    about 1 MiB to the process's RSS, and the pages stay mapped until the table is closed: resident
    memory grows with every text read (measured: +472 MiB after 480 random rows of a 500,000-text pool,
    warm cache). ``madvise(MADV_DONTNEED)`` on the file's mapping unmaps them (they stay in the page
    cache; a later read maps them again), so a reader calls :meth:`release` after each batch of rows and
    the process holds none of the pool. Neither pyarrow nor datasets exposes this.

    Only read-only mappings of the table's own cache files are touched, found in ``/proc/self/maps`` at
    construction by the address of the table's buffers (``MADV_DONTNEED`` on anonymous memory would
    zero it). The mapping stays alive while this object holds the table. A no-op off Linux and for
    tables in memory."""

    def __init__(self, dataset: Any):
        self._table = getattr(dataset, "data", dataset)  # keeps the mapping alive
        self._ranges: list[tuple[int, int]] = []
        files = {os.path.realpath(f["filename"]) for f in getattr(dataset, "cache_files", ()) or ()}
        if not files or not os.path.exists("/proc/self/maps"):
            return
        addresses = set()
        for column in self._table.columns:
            for chunk in column.chunks:
                addresses.update(b.address for b in chunk.buffers() if b is not None and b.size)
        if not addresses:
            return
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) < 6 or "w" in parts[1] or os.path.realpath(parts[5].strip()) not in files:
                    continue
                start, end = (int(x, 16) for x in parts[0].split("-"))
                if any(start <= a < end for a in addresses):
                    self._ranges.append((start, end))
        if self._ranges:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            self._madvise = libc.madvise
            self._madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)

    def release(self) -> None:
        for start, end in self._ranges:
            self._madvise(start, end - start, MADV_DONTNEED)  # a failure only leaves pages mapped

    def __bool__(self) -> bool:
        return bool(self._ranges)
