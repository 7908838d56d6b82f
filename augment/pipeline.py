"""Augment a whole text set: chunks, worker processes or ranks, a cache, resume, and an ordered merge.

How a run works (:func:`augment_texts`):

1. Texts are de-duplicated (first occurrence order) and cut into chunks of ``chunk_size``. Copy ``j``
   of a chunk is made by one augmenter call with ``np.random.default_rng([seed, j, *digest(chunk)])``,
   so the result depends on the seed and the chunk's content only: not on the number of workers or
   ranks, nor on whether the run was interrupted.
2. The cache is a folder per augmenter setting (method, options, seed, chunk size, and the corpus for
   TF-IDF) under ``cache_dir``. Each finished (chunk, copy) is appended to this process's own file as
   one json line (flushed and fsync-ed), so a killed run loses at most the chunks in flight and a torn
   last line is ignored on reading. A rerun (or a resumed run) loads the folder and computes only what
   is missing; a repeated run is free.
3. Chunks are spread over ``workers`` processes (spawned; each builds the augmenter once) and over
   ``world_size`` ranks (``RANK``/``WORLD_SIZE`` of torchrun or ``accelerate launch``: rank r takes the
   chunks c with c % world_size == r). Rank 0 waits for the others' done-markers, computes anything
   still missing, and merges in the original order.
4. A chunk whose augmenter call raises is retried text by text; a text that still fails is reported as
   a skip (with the error) and is not cached, so a later run retries it.

:func:`augment_file` wraps this for files: it reads any input the core reads (json/jsonl/csv/tsv/parquet
files, or the unlabelled pool of a task's data config), writes the precomputed format of
:mod:`augment.precomputed` (one line per kept input row, in input order, with its id) and a report
(counts, skips with row numbers and reasons, speed, the augmenter's counters).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import re
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from augment.registry import NEEDS_CORPUS, make_augmenter, parse_method
from uda.data import DataError, read_table
from uda.io import BadLine, iter_jsonl, text_hash

__all__ = [
    "AugmentOutcome",
    "InputRow",
    "augment_texts",
    "augment_file",
    "read_input_rows",
    "default_cache_dir",
    "default_output_name",
]

# 2: TF-IDF and uniform replacement tokenise as the reference does (augment/text_ops.py)
CACHE_FORMAT = "uda-augment-cache/2"


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


class ChunkCache:
    """Append-only json-lines files of finished (chunk, copy) records in one settings folder.

    Each process appends to its own file, so concurrent writers never interleave; readers take every
    file and skip torn lines (a run killed mid-write).
    """

    def __init__(self, folder: Path):
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self._file = None
        self.torn_lines = 0

    def load(self, wanted: set[str]) -> dict[tuple[str, int], str]:
        found: dict[tuple[str, int], str] = {}
        self.torn_lines = 0
        for path in sorted(self.folder.glob("*.jsonl")):
            with open(path, "rb") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                        j, keys, outs = int(rec["j"]), rec["keys"], rec["out"]
                        if len(keys) != len(outs):
                            raise ValueError
                    except (ValueError, KeyError, TypeError):
                        self.torn_lines += 1
                        continue
                    for k, o in zip(keys, outs):
                        if o is not None and k in wanted:
                            found[(k, j)] = o
        return found

    def append(self, j: int, keys: Sequence[str], outs: Sequence[Optional[str]]) -> None:
        if self._file is None:
            name = f"{socket.gethostname()}-{os.getpid()}-{time.time_ns()}.jsonl"
            self._file = open(self.folder / _safe(name), "ab")
        line = json.dumps({"j": j, "keys": list(keys), "out": list(outs)}, ensure_ascii=False) + "\n"
        self._file.write(line.encode("utf-8"))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

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
    """Returns (task, {j: outputs (None where failed)}, {index: error message}, stats delta, seconds)."""
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
    return task, outs, errors, dict(+delta), time.perf_counter() - t0


def _run_task_in_worker(args: tuple) -> tuple:
    task, seed = args
    return _run_task(task, seed)


# --------------------------------------------------------------------------------------------
# augment_texts
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
    """Make ``copies`` augmented copies of every text with ``method`` (see :mod:`augment.registry`).

    ``rank``/``world_size`` default to the ``RANK``/``WORLD_SIZE`` environment variables (torchrun,
    accelerate). Only rank 0 returns the copies; the other ranks return after their share is cached.
    ``tfidf_stats`` is fitted on ``texts`` when the method needs corpus statistics and none is given.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies}")
    if chunk_size < 1 or workers < 1:
        raise ValueError("chunk_size and workers must be >= 1")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    env_rank, env_world = _env_rank()
    rank = env_rank if rank is None else rank
    world = env_world if world_size is None else world_size
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} outside world size {world}")
    options = dict(options or {})
    stages = parse_method(method)

    keys = [text_key(t) for t in texts]
    unique: dict[str, str] = {}
    for k, t in zip(keys, texts):
        unique.setdefault(k, t)
    ukeys = list(unique)
    corpus_digest = None
    if NEEDS_CORPUS & set(stages):
        if tfidf_stats is None:
            from augment.word_replace import fit_tfidf_stats

            tfidf_stats = fit_tfidf_stats(texts)
        corpus_digest = _digest(ukeys).hex()
    aug = make_augmenter(method, options, tfidf_stats)
    # a deterministic chain (Apertium, beam-search Marian) gives every copy of a text the same output:
    # compute copy 0 only and repeat it
    made = 1 if copies > 1 and is_deterministic(aug) else copies
    if made < copies:
        log(f"[augment] {aug.name} is deterministic, so its {copies} copies of a text are identical: computing "
            f"one and repeating it (follow it with a word-level method, e.g. {method}+tf_idf, for distinct copies)")
    skey = _settings_key(method, options, aug.name, seed, chunk_size, corpus_digest)
    folder = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    cache = ChunkCache(folder / f"{_safe(aug.name)}-s{seed}-c{chunk_size}-{skey}")
    chunks = [ukeys[i:i + chunk_size] for i in range(0, len(ukeys), chunk_size)]
    run_key = hashlib.sha256((skey + _digest(ukeys).hex() + f"/{world}").encode()).hexdigest()[:16]

    totals: Counter = Counter()
    errors: dict[str, str] = {}
    t_start = time.perf_counter()

    def compute(my_chunks: list[int], cached: dict) -> None:
        tasks = []
        for c in my_chunks:
            missing_by_j: dict[tuple[str, ...], list[int]] = {}
            for j in range(made):
                miss = tuple(k for k in chunks[c] if (k, j) not in cached)
                if miss:
                    missing_by_j.setdefault(miss, []).append(j)
            for miss, js in missing_by_j.items():
                tasks.append(_Task(c, list(miss), [unique[k] for k in miss], js))
        n_pairs = sum(len(t.keys) * len(t.copies) for t in tasks)
        totals["texts_computed"] += len({k for t in tasks for k in t.keys})
        if not tasks:
            return
        bar = _progress(n_pairs // made or 1, progress, f"{aug.name} (rank {rank})" if world > 1 else aug.name)
        done_pairs = shown = 0
        t0 = time.perf_counter()

        def handle(result: tuple) -> None:
            nonlocal done_pairs, shown
            task, outs, errs, delta, _secs = result
            for j in task.copies:
                cache.append(j, task.keys, outs[j])
                for k, o in zip(task.keys, outs[j]):
                    if o is not None:
                        cached[(k, j)] = o
            for i, msg in errs.items():
                errors[task.keys[i]] = msg
            totals.update(delta)
            done_pairs += len(task.keys) * len(task.copies)
            now = done_pairs // made
            if bar is not None:
                bar.update(now - shown)
            shown = now

        try:
            if workers == 1:
                for task in tasks:
                    handle(_run_task(task, seed, aug))
            else:
                threads = max(1, (os.cpu_count() or 1) // workers)
                ctx = mp.get_context("spawn")
                with ctx.Pool(workers, initializer=_init_worker,
                              initargs=(method, options, tfidf_stats, threads)) as pool:
                    for result in pool.imap_unordered(_run_task_in_worker, [(t, seed) for t in tasks]):
                        handle(result)
        finally:
            if bar is not None:
                bar.close()
        totals["compute_seconds"] += time.perf_counter() - t0

    try:
        cached = cache.load(set(ukeys))
        hits = sum(1 for k in ukeys if all((k, j) in cached for j in range(made)))
        log(f"[augment] {len(texts)} texts ({len(ukeys)} unique), {hits} fully cached in {cache.folder}"
            + (f", {cache.torn_lines} torn cache lines ignored" if cache.torn_lines else ""))
        totals["cache_hits"] = hits
        compute([c for c in range(len(chunks)) if c % world == rank], cached)
        if world > 1:
            cache.mark_done(run_key, rank, world)
            if rank != 0:
                cache.close()
                return AugmentOutcome([None] * len(texts), aug.name, str(cache.folder), dict(totals), rank_only=True)
            waited = time.perf_counter()
            while len(cache.ranks_done(run_key, world)) < world:
                if wait_timeout is not None and time.perf_counter() - waited > wait_timeout:
                    log(f"[augment] ranks {sorted(set(range(world)) - cache.ranks_done(run_key, world))} not done "
                        f"after {wait_timeout}s; computing their share here")
                    break
                time.sleep(2.0)
            cached = cache.load(set(ukeys))
            compute(list(range(len(chunks))), cached)  # whatever another rank did not leave behind
    finally:
        cache.close()

    out: list[Optional[list[str]]] = []
    for k in keys:
        got = [cached.get((k, j if j < made else 0)) for j in range(copies)]
        out.append(None if any(g is None for g in got) else got)  # type: ignore[misc]
    totals["wall_seconds"] = time.perf_counter() - t_start
    stats = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in totals.items()}
    stats["distinct_copies_computed"] = made
    stats["errors"] = errors
    return AugmentOutcome(out, aug.name, str(cache.folder), stats)


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
# inputs
# --------------------------------------------------------------------------------------------


@dataclass
class InputRow:
    row: int  # position among all input rows (0-based, over all inputs in order)
    id: str
    text: Optional[str]
    source: str


def _read_jsonl_lenient(path: Path, text_column: str, id_column: Optional[str]) -> tuple[list[dict], list[dict]]:
    """Line-by-line jsonl reading that turns bad lines into reported skips instead of failing the file."""
    rows: list[dict] = []
    bad: list[dict] = []
    bad_lines: list[BadLine] = []
    stem = path.name.split(".")[0]
    seen_column = False
    for lineno, rec in iter_jsonl(path, on_bad="skip", bad=bad_lines):
        if text_column not in rec:
            bad.append({"line": lineno, "kind": "missing text column", "reason": f"no '{text_column}' field"})
            continue
        seen_column = True
        rid = rec.get(id_column) if id_column else None
        t = rec[text_column]
        rows.append({"id": str(rid) if rid not in (None, "") else f"{stem}-{lineno - 1}",
                     "text": t if t is None or isinstance(t, str) else str(t), "line": lineno})
    bad.extend({"line": b.lineno, "kind": b.kind, "reason": b.reason} for b in bad_lines)
    bad.sort(key=lambda b: b["line"])
    if not seen_column:
        raise DataError(f"data file '{path}' has no row with a text column '{text_column}'; "
                        f"set --text_column to the right one")
    return rows, bad


def read_input_rows(paths: Sequence[str | os.PathLike], text_column: str = "text", id_column: Optional[str] = "id",
                    on_bad_line: str = "error") -> tuple[list[InputRow], list[dict]]:
    """Read files the core reads (``uda.data.read_table``). Returns (rows, skipped).

    ``on_bad_line="skip"`` reads json-lines files line by line instead, skipping (and reporting, with
    the line number) lines that are not UTF-8, not valid json, not an object, or lack the text field.
    Other formats are always read strictly. Missing files and columns raise a ``DataError``.
    """
    if on_bad_line not in ("error", "skip"):
        raise ValueError(f"on_bad_line must be 'error' or 'skip', got {on_bad_line!r}")
    rows: list[InputRow] = []
    skipped: list[dict] = []
    for p in paths:
        path = Path(p).expanduser()
        name = path.name.lower()
        if on_bad_line == "skip" and (name.endswith(".jsonl") or name.endswith(".jsonl.gz")):
            if not path.is_file():
                raise DataError(f"data file '{path}' does not exist")
            recs, bad = _read_jsonl_lenient(path, text_column, id_column)
            for b in bad:
                skipped.append({"row": None, "id": None, "source": str(path), **b})
        else:
            recs = read_table(path, text_column, None, id_column, require_label=False)
        for r in recs:
            rows.append(InputRow(len(rows), r["id"], r["text"], str(path)))
    return rows, skipped


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
    rows: Optional[Sequence[tuple[str, str]]] = None,
    input_name: Optional[str] = None,
    source: Optional[str] = None,
    limit: Optional[int] = None,
    log: Any = None,
    **scale: Any,
) -> dict:
    """Augment ``inputs`` (files) or ``rows`` ((id, text) pairs, e.g. a task's unlabelled pool, named
    ``input_name`` and described by ``source``) and write the precomputed file. ``scale``: the
    options of :func:`augment_texts` that say how the work is done (chunk_size, workers, cache_dir,
    rank, world_size, progress), passed on as they are.

    Returns the report (also written next to the output as ``<name>.report.json``): counts, skipped
    rows with reasons, speed, cache hits, and the augmenter's counters. On ranks > 0 nothing is written
    and the report has ``"rank_only": True``. ``limit`` keeps the first rows only (for trials).
    """
    from augment.precomputed import write_precomputed

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    if (inputs is None) == (rows is None):
        raise ValueError("give either inputs (files) or rows ((id, text) pairs), not both or neither")
    if inputs is not None:
        read, skipped = read_input_rows(inputs, text_column, id_column, on_bad_line)
        input_name = input_name or _input_name(inputs)
        sources = [str(p) for p in inputs]
    else:
        src = source or "rows"
        read = [InputRow(i, str(rid), text, src) for i, (rid, text) in enumerate(rows)]
        skipped = []
        input_name = input_name or "rows"
        sources = [src]
    if limit is not None:
        read = read[:limit]
    usable: list[InputRow] = []
    for r in read:
        if r.text is None or not r.text.strip():
            skipped.append({"row": r.row, "id": r.id, "source": r.source, "kind": "empty text",
                            "reason": "empty or whitespace-only text"})
        else:
            usable.append(r)
    if not usable:
        raise DataError(f"no non-empty texts to augment in {', '.join(sources)}")
    unknown = set(scale) - {"chunk_size", "workers", "cache_dir", "rank", "world_size", "progress"}
    if unknown:
        raise TypeError(f"augment_file() got unexpected keyword arguments {sorted(unknown)}")
    outcome = augment_texts([r.text for r in usable], method, options, copies=copies, seed=seed, log=log, **scale)
    out_path = Path(output) if output is not None else Path(output_dir) / default_output_name(
        input_name, outcome.name, seed, copies)
    report: dict[str, Any] = {
        "output": str(out_path),
        "inputs": sources,
        "method": method,
        "augmenter": outcome.name,
        "options": dict(options or {}),
        "copies": copies,
        "seed": seed,
        "chunk_size": scale.get("chunk_size", 128),
        "workers": scale.get("workers", 1),
        "cache_folder": outcome.cache_folder,
    }
    if outcome.rank_only:
        report["rank_only"] = True
        return report
    errors = outcome.stats.pop("errors", {})
    kept_rows, kept_copies = [], []
    for r, cps in zip(usable, outcome.copies):
        if cps is None:
            msg = errors.get(text_key(r.text), "augmentation failed")  # type: ignore[arg-type]
            skipped.append({"row": r.row, "id": r.id, "source": r.source, "kind": "augmenter error", "reason": msg})
        else:
            kept_rows.append(r)
            kept_copies.append(cps)
    write_precomputed(out_path, [r.text for r in kept_rows], kept_copies, ids=[r.id for r in kept_rows])
    n_unchanged = sum(1 for r, cps in zip(kept_rows, kept_copies) for c in cps if c == r.text)
    wall = time.perf_counter() - t0
    computed = outcome.stats.get("texts_computed", 0)
    compute_s = outcome.stats.get("compute_seconds", 0.0)
    skip_reasons = Counter(s["kind"] for s in skipped)
    report.update({
        "rows_read": len(read),
        "bad_lines": sum(1 for s in skipped if s.get("row") is None),
        "rows_written": len(kept_rows),
        "rows_skipped": len(skipped),
        "skip_reasons": dict(skip_reasons),
        "skipped": skipped[:1000],
        "unique_texts": len({text_key(r.text) for r in usable}),  # type: ignore[arg-type]
        "texts_fully_cached": outcome.stats.get("cache_hits", 0),
        "texts_computed": computed,
        "copies_identical_to_original": n_unchanged,
        "augmenter_stats": {k: v for k, v in outcome.stats.items()
                            if k not in ("cache_hits", "texts_computed", "compute_seconds", "wall_seconds")},
        "compute_seconds": round(compute_s, 2),
        "texts_per_second": round(computed / compute_s, 2) if compute_s > 0 else None,
        "wall_seconds": round(wall, 2),
    })
    rp = report_path_for(out_path)
    rp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    report["report"] = str(rp)
    log(f"[augment] wrote {len(kept_rows)} rows x {copies} copies to {out_path} in {wall:.1f}s "
        f"({len(skipped)} skipped: {dict(skip_reasons) or 'none'}); report {rp}")
    return report
