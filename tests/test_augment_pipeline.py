"""The augmentation pipeline (augment.pipeline, uda-augment = scripts/uda_augment.py): determinism across workers and
ranks, cache hits, resume after a killed run, alignment under skips, the unlabelled-pool input."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from augment import registry
from augment.pipeline import augment_file, augment_texts, read_input_rows
from augment.precomputed import PrecomputedAugmenter
from augment.word_level import RandomSwap
from uda.data import DataError
from tests.conftest import REPO, make_review, write_jsonl


def make_texts(n: int, seed: int = 0) -> list[str]:
    import random

    rng = random.Random(seed)
    return [make_review(rng, i % 2, 10 + i % 7) for i in range(n)]


def read_output(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


class Boom(RandomSwap):
    """Swap that fails on any batch holding a text with 'BOOM'."""

    def __call__(self, texts, rng):
        if any("BOOM" in t for t in texts):
            raise ValueError("cannot augment BOOM")
        return super().__call__(texts, rng)


# ---------------------------------------------------------------------------------- determinism, cache


def test_same_output_for_any_worker_count_and_cache_hits(tmp_path):
    texts = make_texts(60) + make_texts(5)  # 5 duplicates at the end
    one = augment_texts(texts, "swap", {"p": 0.3}, copies=2, seed=1, chunk_size=8, cache_dir=tmp_path / "c1",
                        progress=False)
    two = augment_texts(texts, "swap", {"p": 0.3}, copies=2, seed=1, chunk_size=8, workers=2,
                        cache_dir=tmp_path / "c2", progress=False)
    assert one.copies == two.copies
    assert one.stats["texts_computed"] == 60 and one.stats["cache_hits"] == 0
    assert all(len(c) == 2 and c[0] != c[1] for c in one.copies)
    assert one.copies[60:] == one.copies[:5]  # a duplicate text gets the same copies
    again = augment_texts(texts, "swap", {"p": 0.3}, copies=2, seed=1, chunk_size=8, cache_dir=tmp_path / "c1",
                          progress=False)
    assert again.copies == one.copies
    assert again.stats["texts_computed"] == 0 and again.stats["cache_hits"] == 60
    other_seed = augment_texts(texts, "swap", {"p": 0.3}, copies=2, seed=2, chunk_size=8,
                               cache_dir=tmp_path / "c1", progress=False)
    assert other_seed.stats["texts_computed"] == 60 and other_seed.copies != one.copies
    # more copies later: the first two come from the cache, only the third is computed
    three = augment_texts(texts, "swap", {"p": 0.3}, copies=3, seed=1, chunk_size=8, cache_dir=tmp_path / "c1",
                          progress=False)
    assert [c[:2] for c in three.copies] == one.copies


def test_ranks_share_the_work_and_rank0_merges(tmp_path):
    texts = make_texts(40)
    ref = augment_texts(texts, "delete", {"p": 0.2}, copies=2, seed=3, chunk_size=6, cache_dir=tmp_path / "ref",
                        progress=False)
    r1 = augment_texts(texts, "delete", {"p": 0.2}, copies=2, seed=3, chunk_size=6, cache_dir=tmp_path / "r",
                       rank=1, world_size=2, progress=False)
    assert r1.rank_only and r1.stats["texts_computed"] == 18  # chunks 1, 3, 5 of 7
    r0 = augment_texts(texts, "delete", {"p": 0.2}, copies=2, seed=3, chunk_size=6, cache_dir=tmp_path / "r",
                       rank=0, world_size=2, progress=False)
    assert r0.copies == ref.copies and r0.stats["texts_computed"] == 22


# ---------------------------------------------------------------------------------- resume


def test_resume_after_kill_equals_uninterrupted_run(tmp_path):
    texts = make_texts(80)
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": f"u{i}", "text": t} for i, t in enumerate(texts)])
    cache = tmp_path / "cache"
    code = f"""
import sys, time
sys.path.insert(0, {str(REPO)!r})
from augment import registry
from augment.word_level import RandomSwap
class Slow(RandomSwap):
    def __call__(self, texts, rng):
        time.sleep(0.2)
        return super().__call__(texts, rng)
registry.METHODS["slow_swap"] = lambda o, s: Slow(o["p"])
from augment.pipeline import augment_file
augment_file([{str(inp)!r}], {str(tmp_path / 'killed.jsonl.gz')!r}, method="slow_swap", options={{"p": 0.3}},
             copies=2, seed=7, chunk_size=8, cache_dir={str(cache)!r}, progress=False)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    units = 0  # one cache file per finished chunk (both copies)
    while time.time() < deadline and units < 2:
        time.sleep(0.05)
        units = len(list(cache.glob("*/*.arrow")))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 2 <= units < 10, "the run should have been killed part-way"
    assert not (tmp_path / "killed.jsonl.gz").exists()
    unit = next(cache.glob("*/*.arrow"))
    # a damaged cache file (files are renamed into place whole, so only outside harm makes one): ignored
    (unit.parent / "damaged.arrow").write_bytes(unit.read_bytes()[:40])

    def slow_swap(o, s):  # same settings, no sleep: must give the very same copies
        return RandomSwap(o["p"])

    registry.METHODS["slow_swap"] = slow_swap
    try:
        resumed = augment_file([inp], tmp_path / "resumed.jsonl.gz", method="slow_swap", options={"p": 0.3},
                               copies=2, seed=7, chunk_size=8, cache_dir=cache, progress=False)
        fresh = augment_file([inp], tmp_path / "fresh.jsonl.gz", method="slow_swap", options={"p": 0.3},
                             copies=2, seed=7, chunk_size=8, cache_dir=tmp_path / "fresh_cache", progress=False)
    finally:
        del registry.METHODS["slow_swap"]
    assert 0 < resumed["texts_fully_cached"] < 80
    assert resumed["texts_computed"] == 80 - resumed["texts_fully_cached"]
    assert read_output(tmp_path / "resumed.jsonl.gz") == read_output(tmp_path / "fresh.jsonl.gz")
    assert fresh["rows_written"] == 80


# ---------------------------------------------------------------------------------- bad input


def write_bad_input(path: Path) -> Path:
    lines = [
        json.dumps({"id": "a", "text": "good movie here, really good"}).encode(),
        json.dumps({"id": "b", "text": "   "}).encode(),
        b'{"id": "c", "text": "caf\xe9 with latin-1 bytes"}',
        json.dumps({"id": "d", "text": "BOOM goes this text"}).encode(),
        b'{"id": "e", "text": "not json',
        json.dumps({"id": "f", "body": "no text column"}).encode(),
        json.dumps({"id": "g", "text": "the last good one of them"}).encode(),
        json.dumps({"id": "h", "text": "good movie here, really good"}).encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_bad_lines_skipped_reported_and_alignment_kept(tmp_path, monkeypatch):
    monkeypatch.setitem(registry.METHODS, "boom", lambda o, s: Boom(o["p"]))
    inp = write_bad_input(tmp_path / "bad.jsonl")
    out = tmp_path / "out.jsonl.gz"
    report = augment_file([inp], out, method="boom", options={"p": 0.5}, copies=2, seed=0, chunk_size=4,
                          on_bad_line="skip", cache_dir=tmp_path / "cache", progress=False)
    rows = read_output(out)
    assert [r["id"] for r in rows] == ["a", "g", "h"]
    assert [r["text"] for r in rows] == ["good movie here, really good", "the last good one of them",
                                         "good movie here, really good"]
    assert rows[0]["augmented"] == rows[2]["augmented"] and len(rows[1]["augmented"]) == 2
    assert report["skip_reasons"] == {"not UTF-8": 1, "invalid JSON": 1, "missing text column": 1,
                                      "empty text": 1, "augmenter error": 1}
    by_kind = {s["kind"]: s for s in report["skipped"]}
    assert by_kind["not UTF-8"]["line"] == 3 and by_kind["invalid JSON"]["line"] == 5
    assert by_kind["augmenter error"]["id"] == "d" and "cannot augment BOOM" in by_kind["augmenter error"]["reason"]
    saved = json.loads((tmp_path / "out.report.json").read_text())
    assert saved["rows_written"] == 3 and saved["rows_skipped"] == 5
    # each written copy is the augmentation of the original on its own line
    for r in rows:
        for c in r["augmented"]:
            assert sorted(c.replace(",", "").split()) == sorted(r["text"].replace(",", "").split())
    pre = PrecomputedAugmenter(out)
    assert pre(["the last good one of them"], np.random.default_rng(0))[0] in rows[1]["augmented"]


def test_bad_input_strict_errors_name_the_problem(tmp_path):
    inp = write_bad_input(tmp_path / "bad.jsonl")
    with pytest.raises(DataError, match="not valid UTF-8"):
        read_input_rows([inp])
    good = write_jsonl(tmp_path / "good.jsonl", [{"id": "1", "body": "x"}])
    with pytest.raises(DataError, match="no text column 'text'"):
        read_input_rows([good])
    with pytest.raises(DataError, match="does not exist"):
        read_input_rows([tmp_path / "missing.jsonl"])
    with pytest.raises(ValueError, match="unknown augmentation method"):
        augment_texts(["a b"], "nonsense", progress=False, cache_dir=tmp_path)


# ---------------------------------------------------------------------------------- pool and CLI


def test_pool_input_covers_every_unlabelled_text_of_training(tmp_path, tiny_text_data):
    from tasks.text.data import load_text_classification
    from uda.config import build_config

    from tasks.cli import unlabeled_pool

    overrides = {"data.path": str(tiny_text_data), "data.dev_size": 20, "data.min_unlabeled_chars": 0}
    rows, info = unlabeled_pool("text_classification", None, overrides)
    report = augment_file(None, None, method="tf_idf", options={"p": 0.2}, copies=2, seed=0,
                          output_dir=tmp_path / "out", rows=rows, input_name=f"{info['task']}-unlabeled",
                          cache_dir=tmp_path / "cache", progress=False)
    assert Path(report["output"]).name == "text_classification-unlabeled.tf_idf-0.2.s0.x2.jsonl.gz"
    cfg = build_config("text_classification", None, overrides)
    pool = load_text_classification(cfg.data, cfg.seed).unlabeled
    pre = PrecomputedAugmenter(report["output"])
    assert all(u["text"] in pre for u in pool) and report["rows_written"] == len(pool)


def test_cli_help_and_error(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    helped = subprocess.run([sys.executable, "scripts/uda_augment.py", "--help"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0
    for word in ("apertium", "marian", "wordnet", "swap", "delete", "embedding", "--workers", "--cache_dir",
                 "--on_bad_line", "--temperature", "resumes"):
        assert word in helped.stdout
    bad = write_jsonl(tmp_path / "x.jsonl", [{"body": "no text"}])
    failed = subprocess.run([sys.executable, "scripts/uda_augment.py", "--input", str(bad), "--method", "swap",
                             "--cache_dir", str(tmp_path / "c"), "--output_dir", str(tmp_path)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 2 and "no text column 'text'" in failed.stderr


# ---------------------------------------------------------------------------------- deterministic chains


class CountingEngine:
    """A deterministic 'translation' (upper-casing) that counts the sentences it is given."""

    name = "upper"

    def __init__(self, deterministic: bool):
        self.deterministic = deterministic
        self.calls = 0

    def round_trip(self, units, rng):
        self.calls += len(units)
        return [u.upper() for u in units]


def test_deterministic_chain_computes_one_copy_and_repeats_it(tmp_path, monkeypatch):
    from augment.backtranslate import BackTranslation
    from augment.pipeline import is_deterministic

    engine = CountingEngine(deterministic=True)
    monkeypatch.setitem(registry.METHODS, "upper_bt", lambda o, s: BackTranslation(engine, memo_size=0))
    texts = [f"Sentence number {i} is here. And a second one for {i}." for i in range(6)]
    out = augment_texts(texts, "upper_bt", copies=3, seed=0, chunk_size=4, cache_dir=tmp_path / "c", progress=False)
    assert engine.calls == 12  # 6 texts x 2 sentences, once: not once per copy
    assert all(cps == [t.upper()] * 3 for t, cps in zip(texts, out.copies))
    assert out.stats["distinct_copies_computed"] == 1
    # the same texts with 1 copy come from the cache (the copies share one cache entry)
    again = augment_texts(texts, "upper_bt", copies=1, seed=0, chunk_size=4, cache_dir=tmp_path / "c", progress=False)
    assert engine.calls == 12 and again.stats["cache_hits"] == 6
    # a word-level method after it draws from the rng: copies differ again and are all computed
    chained = augment_texts(texts, "upper_bt+swap", {"p": 0.5}, copies=3, seed=0, chunk_size=4,
                            cache_dir=tmp_path / "c", progress=False)
    assert chained.stats["distinct_copies_computed"] == 3
    assert any(len(set(cps)) > 1 for cps in chained.copies)
    assert not is_deterministic(BackTranslation(CountingEngine(deterministic=False)))
