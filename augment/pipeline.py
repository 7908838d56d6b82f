"""Augment a whole text set as a stream: chunks, worker processes or ranks, a cache, resume, and an output
written in input order as the chunks finish.

How a run works (:class:`_Run`, behind :func:`augment_file` and :func:`augment_texts`):

1. The texts' 16-byte hashes (:func:`uda.io.text_hash`; for files and a task's pool they were computed when
   the data was converted to Arrow) are de-duplicated with numpy: each distinct text gets a rank in
   first-occurrence order, and the ranks are cut into chunks of ``chunk_size``. Copy ``j`` of a chunk is made
   by one augmenter call with ``np.random.default_rng([seed, j, *digest(chunk)])``, so the result depends on
   the seed and the chunk's content only: not on the number of workers or ranks, nor on whether the run was
   interrupted. What stays in memory is numpy arrays of about 50 bytes a text with 2 copies (hashes, ranks,
   which cache file holds each copy; more for a moment while de-duplicating) and the texts of the chunks
   in flight: a text is read from the input when its chunk is computed and when its row is written, and
   not kept.
2. The cache is a folder per augmenter setting (method, options, seed, chunk size, and the corpus for
   TF-IDF) under ``cache_dir``. Each finished work unit (the texts of a chunk still missing and the copies to
   make) is one small Arrow file of (text hash, copy, output), written to a temporary name, fsync-ed and
   renamed, so a killed run loses at most the units in flight and never leaves half a file. A run indexes
   the folder first (the hashes and copy numbers of each file, not the outputs) and computes only the
   copies no file holds, text by text: texts cached by an earlier run, even of other inputs, are not
   computed again, and a repeated run is free.
3. Chunks are spread over ``workers`` processes (spawned; each builds the augmenter once; two units per
   worker in flight at most) and over ``world_size`` ranks (``RANK``/``WORLD_SIZE`` of torchrun or
   ``accelerate launch``: rank r takes the chunks c with c % world_size == r).
4. Rank 0 writes the output: a row as soon as its text's chunk is finished, its copies read back from the
   cache. With several ranks it computes its share, waits for the others' done-markers, computes anything
   still missing, and writes the rest.
5. A chunk whose augmenter call raises is retried text by text; a text that still fails is reported as a
   skip (with the error) and is not cached, so a later run retries it.

:func:`augment_file` wraps this for files: it reads any input the core reads (json/jsonl/csv/tsv/parquet
files through their Arrow tables, :mod:`augment.inputs`, or the unlabelled pool of a task's data config),
writes the precomputed format of :mod:`augment.precomputed` line by line (one line per kept input row, in
input order, with its id) and a report (counts, skips with row numbers and reasons, speed, the augmenter's
counters).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import multiprocessing as mp
import os
import re
import shutil
import sys
import time
from collections import Counter, OrderedDict
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

from augment.inputs import InputRow, ListRows, SequenceRows, open_inputs, read_input_rows
from augment.registry import NEEDS_CORPUS, make_augmenter, parse_method
from uda.arrow_cache import hash_array
from uda.data import DataError
from uda.io import atomic_open, pid_lock, remove_stale_temporaries, text_hash

__all__ = [
    "AugmentOutcome",
    "InputRow",
    "augment_texts",
    "augment_file",
    "read_input_rows",
    "default_cache_dir",
    "default_output_name",
]

# 3: one Arrow file per finished work unit, indexed by text hash (2: json lines appended by each process).
# The format is part of a cache folder's settings key, so folders of other formats are never read.
CACHE_FORMAT = "uda-augment-cache/3"
_IN_FLIGHT_PER_WORKER = 2
_FILES_KEPT = 4  # cache files whose outputs the writer keeps decoded (rows mostly come chunk after chunk)


# --------------------------------------------------------------------------------------------
# keys, digests, rng
# --------------------------------------------------------------------------------------------


def text_key(text: str) -> str:
    return text_hash(text).hex()


def _digest(keys: Iterable[str]) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for k in keys:
        h.update(k.encode("ascii"))
    return h.digest()


def chunk_rng(seed: int, copy: int, keys: Sequence[str]) -> np.random.Generator:
    """The generator for copy ``copy`` of the texts with ``keys``: depends on the content only."""
    words = np.frombuffer(_digest(keys), dtype=np.uint32).tolist()
    return np.random.default_rng([int(seed), int(copy), *words])


def _hex_keys(keys: np.ndarray) -> list[str]:
    """The hex of each key of an ``S16`` array, read from its bytes (an item would lose trailing zero bytes)."""
    raw = np.ascontiguousarray(keys).tobytes().hex()
    return [raw[i:i + 32] for i in range(0, len(raw), 32)]


def default_cache_dir() -> Path:
    """``$UDA_AUGMENT_CACHE``, else ``~/.cache/uda/augment``."""
    env = os.environ.get("UDA_AUGMENT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "uda" / "augment"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("_")[:120] or "augmenter"


def _stats_of(aug: Any) -> Counter:
    """Sum of the ``stats`` counters (``collections.Counter``) of an augmenter and of its stages."""
    total: Counter = Counter()
    for a in getattr(aug, "augmenters", [aug]):
        s = getattr(a, "stats", None)
        if isinstance(s, Counter):
            total.update(s)
    return total


# --------------------------------------------------------------------------------------------
# the cache
# --------------------------------------------------------------------------------------------


def _unit_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("key", pa.binary(16)), ("copy", pa.int32()), ("out", pa.string())])


class ChunkCache:
    """Finished work units of one settings folder, one Arrow file each: a row (text hash, copy, output) per
    text and copy, the output null where the augmenter failed.

    A file is written under a temporary name and renamed, so readers only ever see whole files; its name is
    a digest of its keys and copies, which determine its outputs, so processes and ranks that compute the
    same unit write the same file. Files are numbered in the order this process first sees them.
    """

    def __init__(self, folder: Path):
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(self.folder)  # files a killed run was writing
        self._paths: list[Path] = []
        self._ids: dict[str, int] = {}
        self.unreadable = 0

    @staticmethod
    def _table(path: Path) -> Any:
        import pyarrow as pa

        return pa.ipc.open_stream(pa.memory_map(str(path))).read_all()

    def scan(self) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
        """(file id, keys, copies, output present) of each file not seen before; the outputs are not read."""
        for path in sorted(self.folder.glob("*.arrow")):
            if path.name in self._ids:
                continue
            try:
                t = self._table(path)
                keys = hash_array(t.column("key")).copy()
                copies = t.column("copy").to_numpy().astype(np.int64)
                ok = t.column("out").is_valid().to_numpy(zero_copy_only=False)
            except (OSError, ValueError, KeyError):  # not written by this code (renamed files are whole)
                self._ids[path.name] = -1
                self.unreadable += 1
                continue
            self._ids[path.name] = len(self._paths)
            self._paths.append(path)
            yield self._ids[path.name], keys, copies, ok

    def write(self, keys: Sequence[str], copies: Sequence[int], outs: Mapping[int, Sequence[Optional[str]]]) -> int:
        """Store a finished unit (``outs[j]``: the outputs of copy j, aligned with the hex ``keys``); its file id."""
        import pyarrow as pa

        name = hashlib.blake2b(json.dumps([list(copies), list(keys)]).encode(), digest_size=16).hexdigest() + ".arrow"
        raw = [bytes.fromhex(k) for k in keys]
        table = pa.table({"key": pa.array(raw * len(copies), pa.binary(16)),
                          "copy": pa.array([j for j in copies for _ in keys], pa.int32()),
                          "out": pa.array([o for j in copies for o in outs[j]], pa.string())}, schema=_unit_schema())
        with atomic_open(self.folder / name, "wb", fsync=True, clean=False) as f, \
                pa.ipc.new_stream(f, table.schema) as w:
            w.write_table(table)
        if self._ids.get(name, -1) >= 0:  # the same unit again (a rank computed it too): the same outputs
            return self._ids[name]
        self._ids[name] = len(self._paths)
        self._paths.append(self.folder / name)
        return self._ids[name]

    def read(self, file_id: int) -> tuple[np.ndarray, np.ndarray, list[Optional[str]]]:
        """(keys, copies, outputs) of a file."""
        t = self._table(self._paths[file_id])
        return (hash_array(t.column("key")).copy(), t.column("copy").to_numpy().astype(np.int64),
                t.column("out").to_pylist())

    def mark_done(self, run_key: str, rank: int, world: int) -> None:
        (self.folder / f"done-{run_key}-{rank}-of-{world}").write_text("done\n", encoding="utf-8")

    def ranks_done(self, run_key: str, world: int) -> set[int]:
        return {r for r in range(world) if (self.folder / f"done-{run_key}-{r}-of-{world}").exists()}


# --------------------------------------------------------------------------------------------
# work units (run in this process or in a worker)
# --------------------------------------------------------------------------------------------

_WORKER_AUG: Any = None


def _init_worker(method: str, options: dict, tfidf_stats: Any, threads: int) -> None:
    global _WORKER_AUG
    from augment.nlpaug_adapter import uses_torch

    if "marian" in method or uses_torch(method):  # share the cores between the workers' torch thread pools
        import torch

        torch.set_num_threads(max(1, threads))
    _WORKER_AUG = make_augmenter(method, options, tfidf_stats)


@dataclass
class _Task:
    chunk: int
    keys: list[str]
    texts: list[str]
    copies: list[int]  # which copies j to make


def _run_task(task: _Task, seed: int, aug: Any = None) -> tuple:
    """Returns ({j: outputs (None where failed)}, {index: error message}, stats delta, seconds)."""
    aug = aug if aug is not None else _WORKER_AUG
    t0 = time.perf_counter()
    before = _stats_of(aug)
    outs: dict[int, list[Optional[str]]] = {}
    errors: dict[int, str] = {}
    for j in task.copies:
        try:
            got = aug(list(task.texts), chunk_rng(seed, j, task.keys))
            if len(got) != len(task.texts) or not all(isinstance(g, str) for g in got):
                raise ValueError(f"augmenter {aug.name!r} returned {len(got)} items for {len(task.texts)} texts")
            outs[j] = list(got)
        except Exception:  # isolate the text(s) that break the augmenter; the rest go on
            single: list[Optional[str]] = []
            for i, (k, t) in enumerate(zip(task.keys, task.texts)):
                try:
                    g = aug([t], chunk_rng(seed, j, [k]))
                    if len(g) != 1 or not isinstance(g[0], str):
                        raise ValueError(f"augmenter {aug.name!r} returned {g!r}")
                    single.append(g[0])
                except Exception as e:  # noqa: BLE001  (reported per text)
                    single.append(None)
                    errors[i] = f"{type(e).__name__}: {e}"[:300]
            outs[j] = single
    delta = _stats_of(aug)
    delta.subtract(before)
    return outs, errors, dict(+delta), time.perf_counter() - t0


def _run_task_in_worker(args: tuple) -> tuple:
    task, seed = args
    return _run_task(task, seed)


# --------------------------------------------------------------------------------------------
# a run
# --------------------------------------------------------------------------------------------


@dataclass
class AugmentOutcome:
    """``copies[i]``: the augmented copies of ``texts[i]`` (None when it failed; on ranks > 0 all None)."""

    copies: list[Optional[list[str]]]
    name: str
    cache_folder: str
    stats: dict = field(default_factory=dict)
    rank_only: bool = False  # True on ranks > 0: their share is in the cache, rank 0 merges


def _settings_key(method: str, options: Mapping[str, Any], name: str, seed: int, chunk_size: int,
                  corpus_digest: Optional[str]) -> str:
    payload = {"format": CACHE_FORMAT, "method": method, "options": dict(sorted(options.items())), "name": name,
               "seed": seed, "chunk_size": chunk_size, "corpus": corpus_digest}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _env_rank() -> tuple[int, int]:
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


Emit = Callable[[int, Optional[list[str]], Optional[str]], None]  # (text index, copies or None, error)


class _Run:
    """The augmentation of ``n`` texts known by their hashes (``hashes``, numpy ``S16``): ``texts()`` reads
    them in order (once, for corpus statistics) and ``texts_at(positions)`` reads those of a chunk. The
    constructor checks the options, de-duplicates, fits the statistics and makes the augmenter (so its name,
    for the output's, is known); :meth:`run` does the work and hands each text's copies to ``emit`` in text
    order (on rank 0)."""

    def __init__(self, hashes: np.ndarray, texts: Callable[[], Iterable[str]],
                 texts_at: Callable[[np.ndarray], list[str]], method: str, options: Optional[Mapping[str, Any]] = None,
                 *, copies: int = 2, seed: int = 0, chunk_size: int = 128, workers: int = 1,
                 cache_dir: str | os.PathLike | None = None, rank: Optional[int] = None,
                 world_size: Optional[int] = None, tfidf_stats: Any = None, progress: bool = True,
                 wait_timeout: Optional[float] = None, log: Any = None, shard: Optional[tuple[int, int]] = None):
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        if copies < 1:
            raise ValueError(f"copies must be >= 1, got {copies}")
        if chunk_size < 1 or workers < 1:
            raise ValueError("chunk_size and workers must be >= 1")
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        env_rank, env_world = _env_rank()
        self.rank = env_rank if rank is None else rank
        self.world = env_world if world_size is None else world_size
        if not 0 <= self.rank < self.world:
            raise ValueError(f"rank {self.rank} outside world size {self.world}")
        self.method, self.options = method, dict(options or {})
        stages = parse_method(method)
        self.copies, self.seed, self.chunk_size, self.workers = copies, seed, chunk_size, workers
        self.progress, self.wait_timeout, self.texts_at = progress, wait_timeout, texts_at
        content = self.content_digest = self._rank_texts(hashes)
        self.shard = shard or (0, 1)
        if not 0 <= self.shard[0] < self.shard[1]:
            raise ValueError(f"shard {self.shard[0]}/{self.shard[1]}: K must be in 0..N-1 for --shard K/N")
        # this shard's chunks: c % N == K (chunks of distinct texts, so a text and its copies are in one shard)
        self.mine = np.arange(self.n_chunks) % self.shard[1] == self.shard[0]
        self.shard_chunks = np.flatnonzero(self.mine).tolist()

        corpus_digest = None
        if NEEDS_CORPUS & set(stages):
            if tfidf_stats is None:
                from augment.word_replace import fit_tfidf_stats

                tfidf_stats = fit_tfidf_stats(texts())  # one pass, as the texts are read
            corpus_digest = content
        self.tfidf_stats = tfidf_stats
        self.aug = make_augmenter(method, self.options, tfidf_stats)
        self.name = self.aug.name
        # a deterministic chain (Apertium, beam-search Marian) gives every copy of a text the same output:
        # compute copy 0 only and repeat it
        self.made = 1 if copies > 1 and is_deterministic(self.aug) else copies
        if self.made < copies:
            self.log(f"[augment] {self.name} is deterministic, so its {copies} copies of a text are identical: "
                     f"computing one and repeating it (follow it with a word-level method, e.g. {method}+tf_idf, "
                     f"for distinct copies)")
        skey = _settings_key(method, self.options, self.name, seed, chunk_size, corpus_digest)
        folder = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        self.cache = ChunkCache(folder / f"{_safe(self.name)}-s{seed}-c{chunk_size}-{skey}")
        part = f"/{self.shard[0]}of{self.shard[1]}" if self.shard[1] > 1 else ""
        self.run_key = hashlib.sha256((skey + content + f"/{self.world}" + part).encode()).hexdigest()[:16]

        self.where = np.full((self.U, self.made), -1, dtype=np.int32)  # (rank, copy) -> cache file, -1: none
        self.done = np.zeros(self.n_chunks, dtype=bool)  # chunks finished (or failed) in this run
        self.errors: dict[int, str] = {}  # rank -> why the augmenter failed on it
        self.totals: Counter = Counter()
        self._pending: dict[int, int] = {}  # chunk -> its units still in flight
        self._decoded: OrderedDict[int, dict] = OrderedDict()  # file id -> {(rank, copy): output}
        self._next = 0  # the next text to hand to emit
        self._write_s = 0.0  # time spent handing texts on (writing the output)

    # ---------------------------------------------------------------- keys and the cache index

    def _rank_texts(self, hashes: np.ndarray) -> str:
        """De-duplicate the texts: rank u = the u-th distinct text in first-occurrence order (``uniq`` is
        sorted, ``order[u]`` its place there). Returns the digest of the content (= :func:`_digest` of every
        distinct key, in rank order)."""
        self.n = len(hashes)
        idx = np.int32 if self.n < 2**31 else np.int64
        uniq, first, inverse = np.unique(np.asarray(hashes, dtype="S16"), return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        self.uniq, self.order = uniq, order.astype(idx)
        self.rank_of = np.empty(len(uniq), dtype=idx)  # place in uniq -> rank
        self.rank_of[order] = np.arange(len(uniq), dtype=idx)
        self.row_rank = self.rank_of[inverse.reshape(-1)]  # text -> rank
        self.first_row = first[order].astype(idx)  # rank -> its first text
        del first, inverse, order
        self.U = len(uniq)
        self.n_chunks = -(-self.U // self.chunk_size)
        h = hashlib.blake2b(digest_size=16)
        for s in range(0, self.U, 1 << 16):
            h.update(self._keys(np.arange(s, min(s + (1 << 16), self.U))).tobytes().hex().encode("ascii"))
        return h.hexdigest()

    def _keys(self, ranks: np.ndarray) -> np.ndarray:
        return self.uniq[self.order[ranks]]

    def _ranks_of(self, keys: np.ndarray) -> np.ndarray:
        """The rank of each key, -1 for keys of texts not in this run."""
        if not self.U:
            return np.full(len(keys), -1, dtype=np.int64)
        pos = np.searchsorted(self.uniq, keys).clip(max=self.U - 1)
        return np.where(self.uniq[pos] == keys, self.rank_of[pos], -1)

    def _index(self) -> None:
        """Take in the cache files not seen yet, then mark the chunks they complete."""
        for fid, keys, js, ok in self.cache.scan():
            ranks = self._ranks_of(keys)
            m = (ranks >= 0) & ok & (js >= 0) & (js < self.made)
            r, j = ranks[m], js[m]
            free = self.where[r, j] < 0  # the first file seen wins
            self.where[r[free], j[free]] = fid
        if self.U:
            complete = (self.where >= 0).all(axis=1)
            self.done |= np.logical_and.reduceat(complete, np.arange(0, self.U, self.chunk_size))

    def _chunk(self, c: int) -> np.ndarray:
        return np.arange(c * self.chunk_size, min((c + 1) * self.chunk_size, self.U))

    # ---------------------------------------------------------------- computing

    def _units(self, chunks: list[int]) -> Iterator[tuple[np.ndarray, _Task]]:
        """The work units of ``chunks``: per chunk, its texts missing for each copy (copies missing for the
        same texts share a unit), read from the input only now."""
        for c in chunks:
            ranks = self._chunk(c)
            by_missing: dict[tuple[int, ...], list[int]] = {}
            for j in range(self.made):
                miss = ranks[self.where[ranks, j] < 0]
                if len(miss):
                    by_missing.setdefault(tuple(miss.tolist()), []).append(j)
            if not by_missing:  # completed meanwhile (by another rank)
                self.done[c] = True
                continue
            self._pending[c] = len(by_missing)
            for miss, js in by_missing.items():
                r = np.array(miss, dtype=np.int64)
                yield r, _Task(c, _hex_keys(self._keys(r)), self.texts_at(self.first_row[r]), js)

    def _compute(self, chunks: list[int], emit: Optional[Emit]) -> None:
        todo = [c for c in chunks if not self.done[c]]
        if self.U:
            wanted = np.zeros(self.n_chunks, dtype=bool)
            wanted[todo] = True
            missing = self.where[wanted[np.arange(self.U) // self.chunk_size]] < 0  # (texts of todo, made)
            n_pairs = int(missing.sum())
            self.totals["texts_computed"] += int(missing.any(axis=1).sum())
            del missing, wanted
        else:
            n_pairs = 0
            self.totals["texts_computed"] += 0
        self._advance(emit)
        if not n_pairs:
            return
        desc = f"{self.name} (rank {self.rank})" if self.world > 1 else self.name
        bar = _progress(n_pairs // self.made or 1, self.progress, desc)
        done_pairs = shown = 0
        t0, written_s = time.perf_counter(), self._write_s

        def handle(ranks: np.ndarray, task: _Task, result: tuple) -> None:
            nonlocal done_pairs, shown
            outs, errs, delta, _secs = result
            fid = self.cache.write(task.keys, task.copies, outs)
            for j in task.copies:
                ok = np.fromiter((o is not None for o in outs[j]), dtype=bool, count=len(ranks))
                self.where[ranks[ok], j] = fid
            for i, msg in errs.items():
                self.errors[int(ranks[i])] = msg
            self.totals.update(delta)
            done_pairs += len(task.keys) * len(task.copies)
            now = done_pairs // self.made
            if bar is not None:
                bar.update(now - shown)
            shown = now
            self._pending[task.chunk] -= 1
            if not self._pending[task.chunk]:
                del self._pending[task.chunk]
                self.done[task.chunk] = True
                self._advance(emit)

        try:
            if self.workers == 1:
                for ranks, task in self._units(todo):
                    handle(ranks, task, _run_task(task, self.seed, self.aug))
            else:
                self._compute_in_pool(todo, handle)
        finally:
            if bar is not None:
                bar.close()
        # the time of augmenting and caching: the output written meanwhile is not counted
        self.totals["compute_seconds"] += time.perf_counter() - t0 - (self._write_s - written_s)

    def _compute_in_pool(self, todo: list[int], handle: Callable[[np.ndarray, _Task, tuple], None]) -> None:
        """Compute the units of the chunks ``todo`` in ``workers`` spawned processes, handing each result to
        ``handle`` as it comes."""
        threads = max(1, (os.cpu_count() or 1) // self.workers)
        with ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                                 initargs=(self.method, self.options, self.tfidf_stats, threads)) as pool:
            inflight: dict = {}

            def collect(block: Any) -> None:
                finished, _ = wait(list(inflight), return_when=block)
                for fut in finished:
                    handle(*inflight.pop(fut), fut.result())

            for ranks, task in self._units(todo):  # a bounded window: the input is read as the work goes
                inflight[pool.submit(_run_task_in_worker, (task, self.seed))] = (ranks, task)
                if len(inflight) >= _IN_FLIGHT_PER_WORKER * self.workers:
                    collect(FIRST_COMPLETED)
            while inflight:
                collect(FIRST_COMPLETED)

    # ---------------------------------------------------------------- writing

    def _outputs(self, fid: int) -> dict:
        got = self._decoded.get(fid)
        if got is None:
            keys, js, outs = self.cache.read(fid)
            got = {(int(r), int(j)): o for r, j, o in zip(self._ranks_of(keys).tolist(), js.tolist(), outs)
                   if r >= 0 and o is not None}
            self._decoded[fid] = got
            if len(self._decoded) > _FILES_KEPT:
                self._decoded.popitem(last=False)
        else:
            self._decoded.move_to_end(fid)
        return got

    def _copies_of(self, u: int) -> Optional[list[str]]:
        got = []
        for j in range(self.copies):
            jj = j if j < self.made else 0
            fid = int(self.where[u, jj])
            if fid < 0:
                return None
            got.append(self._outputs(fid)[(u, jj)])
        return got

    def _advance(self, emit: Optional[Emit]) -> None:
        """Hand on, in order, every text whose chunk is finished."""
        if emit is None:
            return
        t0 = time.perf_counter()
        while self._next < self.n:
            u = int(self.row_rank[self._next])
            if not self.mine[u // self.chunk_size]:  # another shard's text
                self._next += 1
                continue
            if not self.done[u // self.chunk_size]:
                break
            emit(self._next, self._copies_of(u), self.errors.get(u))
            self._next += 1
        self._write_s += time.perf_counter() - t0

    # ---------------------------------------------------------------- the whole run

    @property
    def writes(self) -> bool:
        """Whether this process writes the output (rank 0)."""
        return self.rank == 0 or self.world == 1

    def run(self, emit: Optional[Emit]) -> dict:
        """Compute what the cache lacks and (rank 0) hand every text's copies to ``emit`` in order. Returns
        the counters: cache_hits, texts_computed, compute_seconds, the augmenter's, wall_seconds, ..."""
        t_start = time.perf_counter()
        emit = emit if self.writes else None
        self._index()
        ours = self.mine[np.arange(self.U) // self.chunk_size]
        hits = int((self.where[ours] >= 0).all(axis=1).sum()) if self.U else 0
        self.log(f"[augment] {self.n} texts ({self.U} unique), {hits} fully cached in {self.cache.folder}"
                 + (f", {self.cache.unreadable} unreadable cache files ignored" if self.cache.unreadable else ""))
        self.totals["cache_hits"] = hits
        self._compute(self.shard_chunks[self.rank::self.world], emit)
        if self.world > 1:
            self.cache.mark_done(self.run_key, self.rank, self.world)
            if self.rank != 0:
                return self._stats(t_start)
            waited = time.perf_counter()
            while len(self.cache.ranks_done(self.run_key, self.world)) < self.world:
                if self.wait_timeout is not None and time.perf_counter() - waited > self.wait_timeout:
                    missing = sorted(set(range(self.world)) - self.cache.ranks_done(self.run_key, self.world))
                    self.log(f"[augment] ranks {missing} not done after {self.wait_timeout}s; computing their share "
                             f"here")
                    break
                time.sleep(2.0)
                self._index()
                self._advance(emit)
            self._index()
            self._compute(self.shard_chunks, emit)  # whatever another rank did not leave behind
        if emit is not None and self._next != self.n:
            raise RuntimeError(f"internal error: {self.n - self._next} texts were not handed on")
        return self._stats(t_start)

    def takes(self, pos: int) -> bool:
        """Whether text ``pos`` belongs to this shard."""
        return bool(self.mine[int(self.row_rank[pos]) // self.chunk_size])

    def _stats(self, t_start: float) -> dict:
        self.totals["wall_seconds"] = time.perf_counter() - t_start
        stats = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.totals.items()}
        stats["distinct_copies_computed"] = self.made
        return stats


def is_deterministic(aug: Any) -> bool:
    """True when ``aug`` ignores its rng, so every copy of a text is the same: a chain of back-translations
    whose engines are all deterministic (Apertium; Marian with beam search)."""
    parts = getattr(aug, "augmenters", None)
    if parts is not None:
        return all(is_deterministic(a) for a in parts)
    engine = getattr(aug, "engine", None)
    return bool(getattr(engine, "deterministic", False))


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="text", smoothing=0.05, dynamic_ncols=True, file=sys.stderr,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                           "[{elapsed}<{remaining}, {rate_fmt}]")


# --------------------------------------------------------------------------------------------
# augment_texts
# --------------------------------------------------------------------------------------------


def augment_texts(
    texts: Sequence[str],
    method: str,
    options: Optional[Mapping[str, Any]] = None,
    *,
    copies: int = 2,
    seed: int = 0,
    chunk_size: int = 128,
    workers: int = 1,
    cache_dir: str | os.PathLike | None = None,
    rank: Optional[int] = None,
    world_size: Optional[int] = None,
    tfidf_stats: Any = None,
    progress: bool = True,
    wait_timeout: Optional[float] = None,
    log: Any = None,
) -> AugmentOutcome:
    """Make ``copies`` augmented copies of every text with ``method`` (see :mod:`augment.registry`): the
    texts in memory, the copies returned in a list. :func:`augment_file` streams instead.

    ``rank``/``world_size`` default to the ``RANK``/``WORLD_SIZE`` environment variables (torchrun,
    accelerate). Only rank 0 returns the copies; the other ranks return after their share is cached.
    ``tfidf_stats`` is fitted on ``texts`` when the method needs corpus statistics and none is given.
    """
    hashes = np.array([text_hash(t) for t in texts], dtype="S16") if len(texts) else np.empty(0, dtype="S16")
    run = _Run(hashes, lambda: iter(texts), lambda pos: [texts[int(i)] for i in pos], method, options,
               copies=copies, seed=seed, chunk_size=chunk_size, workers=workers, cache_dir=cache_dir, rank=rank,
               world_size=world_size, tfidf_stats=tfidf_stats, progress=progress, wait_timeout=wait_timeout, log=log)
    out: list[Optional[list[str]]] = [None] * len(texts)

    def emit(i: int, cps: Optional[list[str]], _error: Optional[str]) -> None:
        out[i] = cps

    stats = run.run(emit)
    stats["errors"] = {_hex_keys(run._keys(np.array([u])))[0]: msg for u, msg in run.errors.items()}
    return AugmentOutcome(out, run.name, str(run.cache.folder), stats, rank_only=not run.writes)


# --------------------------------------------------------------------------------------------
# augment_file
# --------------------------------------------------------------------------------------------


def default_output_name(input_name: str, aug_name: str, seed: int, copies: int) -> str:
    """``<input>.<augmenter and settings>.s<seed>.x<copies>.jsonl.gz``."""
    return f"{_safe(input_name)}.{_safe(aug_name)}.s{seed}.x{copies}.jsonl.gz"


def _input_name(paths: Sequence[str | os.PathLike]) -> str:
    names = []
    for p in paths:
        base = Path(p).name
        for ext in (".gz", ".jsonl", ".json", ".csv", ".tsv", ".parquet"):
            base = base[: -len(ext)] if base.lower().endswith(ext) else base
        names.append(base)
    return "+".join(names)


def report_path_for(output: str | os.PathLike) -> Path:
    out = Path(output)
    name = out.name
    for ext in (".jsonl.gz", ".jsonl", ".gz"):
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    return out.with_name(name + ".report.json")


def check_output_options(output: str | os.PathLike | None, output_dir: str | os.PathLike) -> None:
    """--output must name a file, --output_dir a folder (or paths that can be made): checked before any work."""
    if output is not None:
        _check_output_path(Path(output), "--output")
    elif Path(output_dir).exists() and not Path(output_dir).is_dir():
        raise DataError(f"--output_dir '{output_dir}' is a file, not a folder; choose another --output_dir "
                        f"or name the output with --output")


def _check_output_path(out: Path, what: str) -> None:
    """The output (and its report beside it) must be files, in a folder that exists or can be made."""
    if out.is_dir():
        raise DataError(f"{what} '{out}' is a folder; name a file, such as --output "
                        f"{out / 'augmented.jsonl.gz'}, or pass the folder as --output_dir")
    if report_path_for(out).is_dir():
        raise DataError(f"the report of {what} '{out}' would be '{report_path_for(out)}', which is a folder; "
                        f"choose another --output")
    folder = next((p for p in out.parents if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise DataError(f"{what} '{out}': '{folder}' is a file, not a folder; choose another --output")


class _Skips:
    """Skipped rows of one kind: how many, and the first ``keep`` of them for the report."""

    def __init__(self, keep: int = 1000):
        self.keep, self.first, self.kinds = keep, [], Counter()

    def add(self, entry: dict) -> None:
        self.kinds[entry["kind"]] += 1
        if len(self.first) < self.keep:
            self.first.append(entry)

    @property
    def count(self) -> int:
        return sum(self.kinds.values())


_SCALE_OPTIONS = {"chunk_size", "workers", "cache_dir", "rank", "world_size", "progress"}


def _open_table(inputs: Optional[Sequence[str | os.PathLike]], rows: Any, text_column: str,
                id_column: Optional[str], on_bad_line: str, input_name: Optional[str], source: Optional[str],
                limit: Optional[int]) -> tuple[Any, str, list[str]]:
    """The rows to augment as a table (files or ``rows``), the input's name (for the default output name)
    and the sources the report names."""
    if inputs is not None:
        table = open_inputs(inputs, text_column, id_column, on_bad_line, limit)
        return table, input_name or _input_name(inputs), [str(p) for p in inputs]
    src = source or "rows"
    table = SequenceRows(rows, src, limit) if hasattr(rows, "text_hashes") else ListRows(rows, src, limit)
    return table, input_name or "rows", [src]


def _start_report(out_path: Path, sources: list[str], method: str, run: _Run, options: Optional[Mapping[str, Any]],
                  copies: int, seed: int, scale: Mapping[str, Any]) -> dict:
    """The report's settings: what is augmented, how, and where to."""
    return {
        "output": str(out_path),
        "inputs": sources,
        "method": method,
        "augmenter": run.name,
        "options": dict(options or {}),
        "copies": copies,
        "seed": seed,
        "chunk_size": scale.get("chunk_size", 128),
        "workers": scale.get("workers", 1),
        "cache_folder": str(run.cache.folder),
    }


def _write_rows(run: _Run, table: Any, blank: np.ndarray, out_path: Path) -> tuple[dict, int, int, tuple]:
    """Run the augmentation and write each non-empty row of ``table`` to ``out_path`` as its copies are
    ready, in input order. Returns the run's counters, the rows written, the copies identical to their
    original, and the skips (bad lines, empty texts, augmenter errors)."""
    from augment.precomputed import precomputed_writer

    bad, empty, failed = _Skips(), _Skips(), _Skips()
    first_shard = run.shard[0] == 0  # the skips of the whole input are reported once, by shard 0
    for b in table.bad_lines() if first_shard else ():
        bad.add(b)

    def usable_rows() -> Iterator[tuple[int, int, str, str, str]]:
        """(text position, row, id, text, source) of each row augmented, noting the empty ones passed over."""
        pos = 0
        for i, (rid, text, src) in enumerate(table.rows()):
            if not blank[i]:
                yield pos, i, rid, text, src
                pos += 1
            elif first_shard:
                empty.add({"row": i, "id": rid, "source": src, "kind": "empty text",
                           "reason": "empty or whitespace-only text"})

    rows_iter = usable_rows()
    written = unchanged = 0
    with precomputed_writer(out_path) as write:

        def emit(k: int, cps: Optional[list[str]], error: Optional[str]) -> None:
            nonlocal written, unchanged
            pos, i, rid, text, src = next(rows_iter)
            while pos < k:  # another shard's rows
                pos, i, rid, text, src = next(rows_iter)
            if cps is None:
                failed.add({"row": i, "id": rid, "source": src, "kind": "augmenter error",
                            "reason": error or "augmentation failed"})
            else:
                write(text, cps, rid)
                written += 1
                unchanged += sum(1 for c in cps if c == text)

        stats = run.run(emit)
        for pos, *_ in rows_iter:  # the empty rows (and other shards' rows) after the last text
            if run.takes(pos):
                raise RuntimeError("internal error: more rows than texts handed on")
    return stats, written, unchanged, (bad, empty, failed)


def _finish_report(report: dict, out_path: Path, rows_read: int, unique: int, stats: dict, written: int,
                   unchanged: int, skips: tuple, wall: float, copies: int, log: Any) -> None:
    """Add the counts, skips and speed to ``report``, write it next to the output and log a summary."""
    bad, empty, failed = skips
    computed = stats.get("texts_computed", 0)
    compute_s = stats.get("compute_seconds", 0.0)
    skip_reasons = bad.kinds + empty.kinds + failed.kinds
    n_skipped = bad.count + empty.count + failed.count
    report.update({
        "rows_read": rows_read,
        "bad_lines": bad.count,
        "rows_written": written,
        "rows_skipped": n_skipped,
        "skip_reasons": dict(skip_reasons),
        "skipped": (bad.first + empty.first + failed.first)[:1000],
        "unique_texts": unique,
        "texts_fully_cached": stats.get("cache_hits", 0),
        "texts_computed": computed,
        "copies_identical_to_original": unchanged,
        "augmenter_stats": {k: v for k, v in stats.items()
                            if k not in ("cache_hits", "texts_computed", "compute_seconds", "wall_seconds")},
        "compute_seconds": round(compute_s, 2),
        "texts_per_second": round(computed / compute_s, 2) if compute_s > 0 else None,
        "wall_seconds": round(wall, 2),
        "finished": True,
    })
    rp = _write_report(out_path, report)
    report["report"] = str(rp)
    log(f"[augment] wrote {written} rows x {copies} copies to {out_path} in {wall:.1f}s "
        f"({n_skipped} skipped: {dict(skip_reasons) or 'none'}); report {rp}")


def augment_file(
    inputs: Optional[Sequence[str | os.PathLike]] = None,
    output: str | os.PathLike | None = None,
    *,
    method: str = "tf_idf",
    options: Optional[Mapping[str, Any]] = None,
    copies: int = 2,
    seed: int = 0,
    output_dir: str | os.PathLike = "runs/augment",
    text_column: str = "text",
    id_column: Optional[str] = "id",
    on_bad_line: str = "error",
    rows: Any = None,
    input_name: Optional[str] = None,
    source: Optional[str] = None,
    limit: Optional[int] = None,
    log: Any = None,
    shard: Optional[tuple[int, int]] = None,
    **scale: Any,
) -> dict:
    """Augment ``inputs`` (files) or ``rows`` and write the precomputed file, reading and writing as it goes.
    ``rows``: (id, text) pairs, or a sequence of ``{"id", "text"}`` dicts with ``text_hashes()`` and
    ``texts()`` such as a task's unlabelled pool (``tasks.text.data.UnlabeledPool``, read from disk as
    needed), named ``input_name`` and described by ``source``. ``scale``: the options of
    :func:`augment_texts` that say how the work is done (chunk_size, workers, cache_dir, rank, world_size,
    progress), passed on as they are. ``shard=(K, N)``: augment only part K of N (:func:`shard_part_path`;
    join the parts with :func:`join_shards`); a finished part with the same settings is not redone.

    Returns the report (also written next to the output as ``<name>.report.json``): counts, skipped
    rows with reasons, speed, cache hits, and the augmenter's counters. On ranks > 0 nothing is written
    and the report has ``"rank_only": True``. ``limit`` keeps the first rows only (for trials).
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    if (inputs is None) == (rows is None):
        raise ValueError("give either inputs (files) or rows ((id, text) pairs), not both or neither")
    check_output_options(output, output_dir)
    table, input_name, sources = _open_table(inputs, rows, text_column, id_column, on_bad_line, input_name,
                                             source, limit)
    blank = table.blank()
    usable = np.flatnonzero(~blank).astype(np.int32 if len(blank) < 2**31 else np.int64)  # the rows augmented
    if not len(usable):
        raise DataError(f"no non-empty texts to augment in {', '.join(sources)}")
    unknown = set(scale) - _SCALE_OPTIONS
    if unknown:
        raise TypeError(f"augment_file() got unexpected keyword arguments {sorted(unknown)}")

    def usable_texts() -> Iterator[str]:
        return (t for t, b in zip(table.texts(), blank) if not b)

    run = _Run(table.text_hashes()[usable], usable_texts, lambda pos: table.texts_at(usable[pos]), method, options,
               copies=copies, seed=seed, log=log, shard=shard, **scale)
    out_path = Path(output) if output is not None else Path(output_dir) / default_output_name(
        input_name, run.name, seed, copies)
    if shard is not None:
        out_path = shard_part_path(out_path, *shard)
    _check_output_path(out_path, "--output" if output is not None else "the output")  # before any work
    report = _start_report(out_path, sources, method, run, options, copies, seed, scale)
    if shard is not None:
        report.update(shard={"index": shard[0], "count": shard[1]}, input_digest=run.content_digest)
        if run.writes and _part_done(out_path, report, log):
            return json.loads(report_path_for(out_path).read_text(encoding="utf-8"))
    if not run.writes:
        run.run(None)
        report["rank_only"] = True
        return report
    out_path.parent.mkdir(parents=True, exist_ok=True)
    # a second identical command into the same output would redo the whole work beside this one: refused
    with pid_lock(out_path.with_name(out_path.name + ".lock"), f"output '{out_path}'", "choose another --output",
                  holder="uda-augment", held="it"):
        if shard is not None:  # a part stopped before its end says so in its report
            _write_report(out_path, {**report, "finished": False})
        stats, written, unchanged, skips = _write_rows(run, table, blank, out_path)
    _finish_report(report, out_path, len(table), run.U, stats, written, unchanged, skips,
                   time.perf_counter() - t0, copies, log)
    return report


# --------------------------------------------------------------------------------------------
# shards: parts of one output made by separate jobs, then joined
# --------------------------------------------------------------------------------------------

# the report entries two parts of one output must share (the input by its content, so paths may differ)
_PART_SETTINGS = ("method", "augmenter", "options", "copies", "seed", "chunk_size", "input_digest")


def _write_report(out_path: Path, report: dict) -> Path:
    rp = report_path_for(out_path)
    tmp = rp.with_name(rp.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, rp)
    return rp


def parse_shard(value: str) -> tuple[int, int]:
    """``"K/N"`` -> ``(K, N)`` with 0 <= K < N."""
    k, sep, n = value.partition("/")
    try:
        kk, nn = int(k), int(n)
    except ValueError:
        kk = nn = -1
    if not sep or nn < 1 or not 0 <= kk < nn:
        raise ValueError(f"--shard {value!r}: expected K/N with 0 <= K < N, e.g. --shard 0/4")
    return kk, nn


def shard_part_path(output: str | os.PathLike, k: int, n: int) -> Path:
    """Part K of N of ``output``: ``<output without .jsonl.gz>.shard-K-of-N.jsonl.gz``."""
    base = report_path_for(output).name[: -len(".report.json")]
    return Path(output).with_name(f"{base}.shard-{k}-of-{n}.jsonl.gz")


def _read_report(path: Path) -> Optional[dict]:
    rp = report_path_for(path)
    try:
        return json.loads(rp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _part_done(out_path: Path, report: dict, log: Any) -> bool:
    """Whether ``out_path`` is a finished part made with the settings of ``report``."""
    old = _read_report(out_path)
    if not out_path.exists() or not old or not old.get("finished") or old.get("shard") != report["shard"]:
        return False
    if any(old.get(k) != json.loads(json.dumps(report.get(k), default=str)) for k in _PART_SETTINGS):
        return False
    log(f"[augment] {out_path}: already done (shard {report['shard']['index']}/{report['shard']['count']}, "
        f"same settings); delete it to redo it")
    return True


def _check_part(path: Path, k: int, n: int, first: Optional[dict]) -> dict:
    """The report of part ``k`` of ``n``; DataError naming the part when it is missing, unfinished, or
    made for another shard or with other settings than ``first`` (part 0's report)."""
    if not path.exists():
        raise DataError(f"part {k} of {n} is missing: '{path}'; run the same command with --shard {k}/{n}, then "
                        f"join again")
    rep = _read_report(path)
    if rep is None or not rep.get("finished"):
        raise DataError(f"part {k} of {n} '{path}' did not finish (its report {report_path_for(path)} "
                        f"{'is missing or unreadable' if rep is None else 'says finished: false'}); rerun it "
                        f"with --shard {k}/{n}")
    claim = rep.get("shard") or {}
    if claim != {"index": k, "count": n}:
        raise DataError(f"part '{path}' was made as shard {claim.get('index')}/{claim.get('count')}, not {k}/{n} "
                        f"(a duplicated or renamed part); remake it with --shard {k}/{n}")
    for key in _PART_SETTINGS if first is not None else ():
        if rep.get(key) != first.get(key):
            raise DataError(f"part {k} of {n} '{path}' was made with another {key} than part 0 "
                            f"({rep.get(key)!r} vs {first.get(key)!r}); remake it with part 0's settings")
    return rep


def _stray_parts(out: Path, n: int) -> list[Path]:
    """Parts of ``out`` beside it made for another number of shards."""
    base = shard_part_path(out, 0, 1).name[: -len("0-of-1.jsonl.gz")]
    return sorted(p for p in out.parent.glob(f"{base}*-of-*.jsonl.gz")
                  if not p.name.endswith(f"-of-{n}.jsonl.gz"))


def join_shards(output: str | os.PathLike, shards: int, log: Any = None) -> dict:
    """Write ``output`` from its ``shards`` parts (:func:`shard_part_path`), in shard order, after checking
    that every part is there, finished, made for its own shard of ``shards`` and with the same settings.
    Returns the joined report (also written beside ``output``)."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out = Path(output)
    _check_output_path(out, "--join")
    if shards < 1:
        raise ValueError(f"--shards must be at least 1, got {shards}")
    stray = _stray_parts(out, shards)
    if stray:
        raise DataError(f"part '{stray[0]}' was made for another number of shards than --shards {shards}; "
                        f"join with that number, or delete the parts of the other split")
    parts = [shard_part_path(out, k, shards) for k in range(shards)]
    reports: list[dict] = []
    for k, path in enumerate(parts):
        reports.append(_check_part(path, k, shards, reports[0] if reports else None))
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as dst:  # gzip members one after another make one gzip stream
        for path in parts:
            with (open(path, "rb") if out.name.endswith(".gz") else gzip.open(path, "rb")) as src:
                shutil.copyfileobj(src, dst, 1 << 20)
    os.replace(tmp, out)
    report = _joined_report(out, parts, reports)
    report["report"] = str(_write_report(out, report))
    log(f"[augment] joined {shards} parts into {out}: {report['rows_written']} rows; report {report['report']}")
    return report


def _joined_report(out: Path, parts: list[Path], reports: list[dict]) -> dict:
    first = reports[0]
    report = {k: first.get(k) for k in ("inputs", "method", "augmenter", "options", "copies", "seed",
                                        "chunk_size", "input_digest", "rows_read", "bad_lines")}
    report.update(output=str(out), parts=[str(p) for p in parts], shards=len(parts), finished=True)
    for key in ("rows_written", "rows_skipped", "unique_texts", "texts_fully_cached", "texts_computed",
                "copies_identical_to_original", "compute_seconds"):
        report[key] = sum(r.get(key) or 0 for r in reports)
    reasons: Counter = Counter()
    for r in reports:
        reasons.update(r.get("skip_reasons") or {})
    report["skip_reasons"] = dict(reasons)
    report["skipped"] = [e for r in reports for e in r.get("skipped") or []][:1000]
    return report
