"""The augmentation pipeline as a stream (augment.pipeline, augment.inputs): the same bytes as the pipeline
that held everything in memory, resume that computes only the missing chunks, memory that does not grow
with the input, a task's pool read from disk, and old caches never read.

The golden files in tests/data/augment_golden/ were written by that earlier pipeline (which read its
inputs into lists and merged the copies in memory) from the inputs built here."""

from __future__ import annotations

import gzip
import json
import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from augment import registry
from augment.pipeline import augment_file, augment_texts
from augment.word_level import RandomSwap
from tests.conftest import make_review, write_jsonl
from tests.test_augment_pipeline import Boom, write_bad_input

GOLDEN = Path(__file__).parent / "data" / "augment_golden"
STABLE = ("rows_read", "bad_lines", "rows_written", "rows_skipped", "skip_reasons", "skipped", "unique_texts",
          "texts_fully_cached", "texts_computed", "copies_identical_to_original", "augmenter_stats")
POOL_OVERRIDES = {"data.dev_size": 10, "data.min_unlabeled_chars": 0}


def golden_rows() -> list[dict]:
    """300 rows: short reviews, every 6th a repeat of an earlier text, a few blank, one without an id."""
    rng = random.Random(11)
    rows, texts = [], []
    for i in range(300):
        if i % 50 == 7:
            text = "   "
        elif i % 6 == 5 and texts:
            text = texts[rng.randrange(len(texts))]
        else:
            text = make_review(rng, i % 2, 6 + i % 9)
            texts.append(text)
        rows.append({"id": f"g{i}", "text": text} if i != 13 else {"text": text})
    return rows


def write_pool_folder(d: Path) -> Path:
    """train/test/unsup files of a text classification task; unsup repeats some of its texts."""
    d.mkdir(parents=True, exist_ok=True)
    rng = random.Random(4)
    write_jsonl(d / "train.jsonl", [{"id": f"train_{i}", "text": make_review(rng, i % 2), "label": i % 2}
                                    for i in range(80)])
    write_jsonl(d / "test.jsonl", [{"id": f"test_{i}", "text": make_review(rng, i % 2), "label": i % 2}
                                   for i in range(20)])
    unsup = [{"id": f"unsup_{i}", "text": make_review(rng, rng.randrange(2), 8), "label": -1} for i in range(150)]
    unsup += [dict(unsup[i], id=f"unsup_dup_{i}") for i in range(0, 150, 10)]
    write_jsonl(d / "unsup.jsonl", unsup)
    return d


def unzipped(path: Path) -> bytes:
    with gzip.open(path, "rb") as f:
        return f.read()


def stable(report: dict) -> dict:
    out = json.loads(json.dumps({k: report[k] for k in STABLE}))
    for s in out["skipped"]:
        s["source"] = Path(s["source"]).name
    return out


@pytest.fixture
def golden_input(tmp_path) -> Path:
    return write_jsonl(tmp_path / "golden.jsonl", golden_rows())


# ---------------------------------------------------------------------------------- same bytes as before


@pytest.mark.parametrize("method,workers", [("tf_idf", 1), ("swap", 1), ("swap", 2)])
def test_output_is_byte_identical_to_the_in_memory_pipeline(tmp_path, golden_input, method, workers):
    out = tmp_path / "out.jsonl.gz"
    report = augment_file([golden_input], out, method=method, options={"p": 0.3}, copies=2, seed=5, chunk_size=16,
                          workers=workers, cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    want = json.loads((GOLDEN / "reports.json").read_text())[f"golden_{method}"]
    assert unzipped(out) == unzipped(GOLDEN / f"golden_{method}.jsonl.gz")
    assert stable(report) == want
    # again, every copy from the cache: the same bytes, nothing computed
    again = augment_file([golden_input], tmp_path / "again.jsonl.gz", method=method, options={"p": 0.3}, copies=2,
                         seed=5, chunk_size=16, cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    assert unzipped(tmp_path / "again.jsonl.gz") == unzipped(out)
    assert again["texts_computed"] == 0 and again["texts_fully_cached"] == want["unique_texts"]


def test_bad_lines_limit_and_two_files_as_before(tmp_path, golden_input, monkeypatch):
    monkeypatch.setitem(registry.METHODS, "boom", lambda o, s: Boom(o["p"]))
    bad = write_bad_input(tmp_path / "bad.jsonl")
    out = tmp_path / "out.jsonl.gz"
    report = augment_file([bad, golden_input], out, method="boom", options={"p": 0.5}, copies=2, seed=0, chunk_size=4,
                          on_bad_line="skip", cache_dir=tmp_path / "cache", progress=False, limit=250,
                          log=lambda m: None)
    assert unzipped(out) == unzipped(GOLDEN / "golden_bad_boom.jsonl.gz")
    assert stable(report) == json.loads((GOLDEN / "reports.json").read_text())["golden_bad_boom"]


def test_task_pool_streams_from_disk_with_the_same_bytes(tmp_path, monkeypatch):
    """uda-augment --task: the UnlabeledPool itself goes to the pipeline (no list of its texts)."""
    import augment.pipeline as pipeline
    from tasks.cli import augment_main
    from tasks.text.data import UnlabeledPool

    folder = write_pool_folder(tmp_path / "pool")
    cfg = tmp_path / "pool.yaml"
    cfg.write_text("task: text_classification\ndata:\n  dev_size: 10\n  min_unlabeled_chars: 0\n", encoding="utf-8")
    given = []
    real = pipeline.augment_file

    def spy(*args, **kwargs):
        given.append(kwargs["rows"])
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "augment_file", spy)
    out = tmp_path / "pool.jsonl.gz"
    code = augment_main(["--task", "text_classification", "--config", str(cfg), "--data_path", str(folder),
                         "--method", "tf_idf", "--p", "0.3", "--seed", "5", "--chunk_size", "16", "--output", str(out),
                         "--cache_dir", str(tmp_path / "cache"), "--no_progress"])
    assert code == 0 and len(given) == 1 and isinstance(given[0], UnlabeledPool)
    assert unzipped(out) == unzipped(GOLDEN / "golden_pool_tf_idf.jsonl.gz")


def test_pool_texts_at_reads_the_items_asked_for(tmp_path):
    from tasks.cli import unlabeled_pool

    pool, _ = unlabeled_pool("text_classification", None,
                             {"data.path": str(write_pool_folder(tmp_path / "pool")), **POOL_OVERRIDES})
    at = np.array([5, 0, len(pool) - 1, 5])
    assert pool.texts_at(at) == [pool[int(i)]["text"] for i in at]


def test_an_old_cache_folder_is_never_read(tmp_path, golden_input):
    """A cache of the format before (json lines) under the folder name it had: not this format's folder."""
    old = tmp_path / "cache" / "swap-0.3-s5-c16-38f9d3695520cc59"  # where the earlier pipeline cached these settings
    old.mkdir(parents=True)
    rows = [r for r in golden_rows() if r["text"].strip()]
    from augment.pipeline import text_key

    keys = list(dict.fromkeys(text_key(r["text"]) for r in rows))
    (old / "host-1-1.jsonl").write_text("".join(json.dumps({"j": j, "keys": keys, "out": ["WRONG"] * len(keys)}) + "\n"
                                                for j in range(2)), encoding="utf-8")
    out = tmp_path / "out.jsonl.gz"
    report = augment_file([golden_input], out, method="swap", options={"p": 0.3}, copies=2, seed=5, chunk_size=16,
                          cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    assert Path(report["cache_folder"]) != old and report["texts_fully_cached"] == 0
    assert unzipped(out) == unzipped(GOLDEN / "golden_swap.jsonl.gz")
    assert sorted(p.name for p in old.iterdir()) == ["host-1-1.jsonl"]  # left alone


# ---------------------------------------------------------------------------------- resume


class Stop(BaseException):
    """Not an Exception: the per-text retry does not catch it, so the run ends here, like a kill."""


class CountingSwap(RandomSwap):
    """Swap that counts the texts it is given and stops the run at its ``stop_at``-th call."""

    def __init__(self, p: float, stop_at: int | None, seen: list):
        super().__init__(p)
        self.stop_at, self.seen = stop_at, seen

    def __call__(self, texts, rng):
        if self.stop_at is not None and len(self.seen) == self.stop_at:
            raise Stop
        self.seen.append(len(texts))
        return super().__call__(texts, rng)


def test_stopped_run_resumes_computing_only_the_missing_chunks(tmp_path, golden_input, monkeypatch):
    seen: list = []
    monkeypatch.setitem(registry.METHODS, "counting_swap", lambda o, s: CountingSwap(o["p"], 10, seen))
    kw = dict(method="counting_swap", options={"p": 0.3}, copies=2, seed=5, chunk_size=16,
              cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    out = tmp_path / "out.jsonl.gz"
    with pytest.raises(Stop):  # 10 calls: chunks 0-4, both copies; stopped at chunk 5
        augment_file([golden_input], out, **kw)
    assert not out.exists() and not list(tmp_path.glob(".out.jsonl.gz*"))  # no output, not even a part of one
    assert len(list((tmp_path / "cache").glob("*/*.arrow"))) == 5

    seen.clear()
    monkeypatch.setitem(registry.METHODS, "counting_swap", lambda o, s: CountingSwap(o["p"], None, seen))
    resumed = augment_file([golden_input], out, **kw)
    unique = json.loads((GOLDEN / "reports.json").read_text())["golden_swap"]["unique_texts"]  # 246: 16 chunks
    assert resumed["texts_fully_cached"] == 5 * 16 and resumed["texts_computed"] == unique - 5 * 16
    assert sum(seen) == 2 * (unique - 5 * 16) and len(seen) == 2 * 11  # chunks 5-15, each copy once
    assert unzipped(out) == unzipped(GOLDEN / "golden_swap.jsonl.gz")  # as if never stopped


def test_more_copies_later_computes_only_the_new_copy(tmp_path):
    seen: list = []
    texts = [make_review(random.Random(i), i % 2) for i in range(40)]
    registry.METHODS["counting_swap2"] = lambda o, s: CountingSwap(o["p"], None, seen)
    try:
        kw = dict(seed=1, chunk_size=8, cache_dir=tmp_path / "c", progress=False, log=lambda m: None)
        two = augment_texts(texts, "counting_swap2", {"p": 0.3}, copies=2, **kw)
        seen.clear()
        three = augment_texts(texts, "counting_swap2", {"p": 0.3}, copies=3, **kw)
    finally:
        del registry.METHODS["counting_swap2"]
    assert seen == [8] * 5 and [c[:2] for c in three.copies] == two.copies


# ---------------------------------------------------------------------------------- memory


class Upper:
    """A cheap augmenter: the pipeline's own memory is what is measured."""

    name = "upper"

    def __call__(self, texts, rng):
        return [t.upper() for t in texts]


def long_text(i: int) -> str:
    return f"text number {i} " + "lorem ipsum dolor sit amet " * 80  # about 2 KB


class GeneratedPool:
    """A pool like tasks.text.data.UnlabeledPool that holds no text: each is made when it is read."""

    def __init__(self, n: int):
        from uda.io import text_hash

        self.n = n
        self.hashes = np.array([text_hash(long_text(i)) for i in range(n)], dtype="S16")

    def __len__(self):
        return self.n

    def __iter__(self):
        return ({"id": f"u{i}", "text": long_text(i)} for i in range(self.n))

    def texts(self):
        return (long_text(i) for i in range(self.n))

    def text_hashes(self):
        return self.hashes

    def texts_at(self, positions):
        return [long_text(int(i)) for i in positions]


def peak_mib(run) -> float:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("source", ["file", "pool"])
def test_memory_does_not_grow_with_the_input(tmp_path, monkeypatch, source):
    """Four times the texts (about 6 MiB, then 24 MiB of text): the same peak of traced memory, well under
    the text. (At the sizes of a real pool: benchmarks/pool_memory.py --augment.)"""
    from augment.inputs import open_inputs

    monkeypatch.setitem(registry.METHODS, "upper", lambda o, s: Upper())
    peaks, volume = {}, {}
    for n in (3_000, 12_000):
        if source == "file":
            path = tmp_path / f"pool-{n}.jsonl.gz"
            with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as f:
                for i in range(n):
                    f.write(json.dumps({"id": f"u{i}", "text": long_text(i)}) + "\n")
            open_inputs([path])  # converted to Arrow once (batch by batch, uda.arrow_cache); measured: the run
            kw = {"inputs": [path]}
        else:
            kw = {"rows": GeneratedPool(n)}
        volume[n] = sum(len(long_text(i)) for i in range(n)) / 2**20
        peaks[n] = peak_mib(lambda: augment_file(output=tmp_path / f"out-{n}.jsonl.gz", method="upper", copies=2,
                                                 chunk_size=128, cache_dir=tmp_path / "cache", progress=False,
                                                 log=lambda m: None, **kw))
    assert volume[12_000] > 20
    assert peaks[12_000] - peaks[3_000] < 2.5, (peaks, volume)  # the input grew by 18 MiB
    assert peaks[12_000] < volume[12_000] / 2, (peaks, volume)
    with gzip.open(tmp_path / "out-12000.jsonl.gz", "rt", encoding="utf-8") as f:
        last = json.loads(f.readlines()[-1])
    assert last == {"id": "u11999", "text": long_text(11_999), "augmented": [long_text(11_999).upper()] * 2}


def test_take_pylist_reads_chunk_by_chunk_with_take_s_result():
    """pyarrow's take on a chunked string column concatenates every chunk first (the whole column of a
    memory-mapped pool in memory); take_pylist takes from each chunk instead, with the same result."""
    import pyarrow as pa

    from uda.arrow_cache import take_pylist

    col = pa.chunked_array([["a", "b", None], [], ["c"], ["d", "e"]], type=pa.string())
    rows = [5, 0, 3, 3, 2, 4]
    assert take_pylist(col, rows) == col.take(rows).to_pylist() == ["e", "a", "c", "c", None, "d"]
    assert take_pylist(col, []) == [] and take_pylist(col.chunk(0), [1]) == ["b"]


def test_texts_cached_by_a_run_of_other_inputs_are_not_computed_again(tmp_path):
    """Augmenting unsup, then unsup + train (docs/augmentation.md): only the new texts are computed, and
    unsup's rows get the copies they had."""
    rng = random.Random(2)
    unsup = [{"id": f"u{i}", "text": make_review(rng, i % 2)} for i in range(50)]
    train = [{"id": f"t{i}", "text": make_review(rng, i % 2)} for i in range(30)] + unsup[:5]  # 5 seen before
    a, b = write_jsonl(tmp_path / "unsup.jsonl", unsup), write_jsonl(tmp_path / "train.jsonl", train)
    kw = dict(method="swap", options={"p": 0.3}, copies=2, seed=3, chunk_size=8, cache_dir=tmp_path / "cache",
              progress=False, log=lambda m: None)
    first = augment_file([a], tmp_path / "a.jsonl.gz", **kw)
    both = augment_file([a, b], tmp_path / "ab.jsonl.gz", **kw)
    assert first["texts_computed"] == 50 and both["texts_computed"] == 30 and both["texts_fully_cached"] == 50
    lines = unzipped(tmp_path / "ab.jsonl.gz").splitlines(keepends=True)
    assert b"".join(lines[:50]) == unzipped(tmp_path / "a.jsonl.gz") and len(lines) == 85
