"""Tests for tasks/text/data.py: readers, selection, determinism, errors, and one check on the real IMDB data."""

from __future__ import annotations

import csv
import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from tasks.text import data as text_data
from tasks.text.data import (
    DataError,
    load_text_classification,
    read_aclimdb,
    read_table,
    resolve_data_path,
)
from tasks.text.config import TextDataConfig as DataConfig

REPO = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- helpers

def _rows(n_per_class: int, k: int = 2, prefix: str = "train", names: list[str] | None = None,
          start: int = 0) -> list[dict]:
    rows = []
    for c in range(k):
        for j in range(n_per_class):
            n = start + j
            rows.append({"id": f"{prefix}_{c}_{n}.txt", "text": f"{prefix} review {c} {n} " + "x" * 20,
                         "label": names[c] if names else c})
    return rows


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    data = "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


def _write_csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _imdb_like(folder: Path, n_train: int = 30, n_test: int = 10, n_unsup: int = 20, ext: str = ".jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    _write_jsonl(folder / f"train{ext}", _rows(n_train))
    _write_jsonl(folder / f"test{ext}", _rows(n_test, prefix="test"))
    unsup = [{"id": f"unsup_{i}.txt", "text": ("long " * 30 if i % 2 == 0 else "short"), "label": -1}
             for i in range(n_unsup)]
    _write_jsonl(folder / f"unsup{ext}", unsup)
    return folder


def _cfg(**kw) -> DataConfig:
    kw.setdefault("num_labeled", 4)
    kw.setdefault("dev_size", 6)
    kw.setdefault("min_unlabeled_chars", 50)
    return DataConfig(**kw)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("UDA_DATA_PATH", raising=False)


# ----------------------------------------------------------------------------- readers

def test_read_table_formats(tmp_path):
    rows = _rows(3)
    expected = [(r["id"], r["text"], r["label"]) for r in rows]
    jl = _write_jsonl(tmp_path / "a.jsonl", rows)
    jgz = _write_jsonl(tmp_path / "b.jsonl.gz", rows)
    jjson = tmp_path / "c.json"
    jjson.write_text(json.dumps(rows), encoding="utf-8")
    jjgz = tmp_path / "c2.json.gz"
    with gzip.open(jjgz, "wt", encoding="utf-8") as f:
        f.write(json.dumps(rows))
    cs = _write_csv(tmp_path / "d.csv", rows)
    pq = tmp_path / "e.parquet"
    import pyarrow as pa
    import pyarrow.parquet as papq

    papq.write_table(pa.Table.from_pylist(rows), pq)
    for p in (jl, jgz, jjson, jjgz, cs, pq):
        got = read_table(p, "text", "label", "id")
        norm = [(r["id"], r["text"], int(r["label"])) for r in got]
        assert norm == expected, p


def test_read_table_default_ids_and_optional_label(tmp_path):
    p = _write_jsonl(tmp_path / "unsup.jsonl.gz", [{"text": "a"}, {"text": "b"}])
    got = read_table(p, "text", "label", "id", require_label=False)
    assert [r["id"] for r in got] == ["unsup-0", "unsup-1"]
    assert all(r["label"] is None for r in got)


def test_read_aclimdb(tmp_path):
    root = _acl(tmp_path / "aclImdb")
    out = read_aclimdb(root)
    assert [r["id"] for r in out["train"]][:3] == ["neg_2_1.txt", "neg_10_3.txt", "pos_1_9.txt"]
    assert [r["label"] for r in out["train"]] == [0, 0, 1, 1]
    assert len(out["test"]) == 4 and len(out["unsup"]) == 2
    assert all(r["label"] == -1 for r in out["unsup"])


def _acl(root: Path) -> Path:
    files = {
        "train/neg/10_3.txt": "bad movie " * 10, "train/neg/2_1.txt": "awful film " * 10,
        "train/pos/1_9.txt": "great movie " * 10, "train/pos/5_10.txt": "superb film " * 10,
        "test/neg/0_2.txt": "test bad a", "test/neg/1_4.txt": "test bad b",
        "test/pos/0_8.txt": "test good a", "test/pos/3_7.txt": "test good b",
        "train/unsup/0_0.txt": "unlabelled review " * 10, "train/unsup/1_0.txt": "tiny",
    }
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


# ----------------------------------------------------------------------------- loading

def test_load_folder_jsonl(tmp_path):
    folder = _imdb_like(tmp_path / "d")
    d = load_text_classification(_cfg(path=str(folder)), seed=1)
    assert d.label_names == ["neg", "pos"]  # int labels + default hub_id stanfordnlp/imdb
    assert sorted(r["label"] for r in d.train) == [0, 0, 1, 1]
    assert len(d.dev) == 6 and sorted(r["label"] for r in d.dev) == [0, 0, 0, 1, 1, 1]
    assert len(d.test) == 20
    dev_ids = {r["id"] for r in d.dev}
    assert not dev_ids & {r["id"] for r in d.train}
    assert not dev_ids & {r["id"] for r in d.unlabeled}
    assert not {r["text"] for r in d.dev} & {r["text"] for r in d.unlabeled}
    # 10 long unsup texts + 60 - 6 training-pool texts
    assert d.info["counts"]["unlabeled_from_file"] == 10
    assert d.info["counts"]["unlabeled_skipped_short"] == 10
    assert len(d.unlabeled) == 10 + 54
    assert set(d.unlabeled[0]) == {"id", "text"}
    json.dumps(d.info)


def test_load_gz_csv_parquet_folders(tmp_path):
    a = load_text_classification(_cfg(path=str(_imdb_like(tmp_path / "gz", ext=".jsonl.gz"))), seed=3)
    b_dir = tmp_path / "csv"
    b_dir.mkdir()
    _write_csv(b_dir / "train.csv", _rows(30))
    _write_csv(b_dir / "test.csv", _rows(10, prefix="test"))
    b = load_text_classification(_cfg(path=str(b_dir)), seed=3)
    import pyarrow as pa
    import pyarrow.parquet as papq

    c_dir = tmp_path / "pq"
    c_dir.mkdir()
    papq.write_table(pa.Table.from_pylist(_rows(30)), c_dir / "train.parquet")
    papq.write_table(pa.Table.from_pylist(_rows(10, prefix="test")), c_dir / "test.parquet")
    c = load_text_classification(_cfg(path=str(c_dir)), seed=3)
    assert a.train == b.train == c.train
    assert a.dev == b.dev == c.dev
    assert a.test == b.test == c.test


def test_load_aclimdb_folder(tmp_path):
    root = _acl(tmp_path / "aclImdb")
    d = load_text_classification(_cfg(path=str(tmp_path), num_labeled=2, dev_size=2, min_unlabeled_chars=10),
                                  seed=0)
    assert d.label_names == ["neg", "pos"]
    assert d.info["source"] == "aclImdb"
    assert len(d.train) == 2 and len(d.dev) == 2 and len(d.test) == 4
    assert "unsup_0_0.txt" in {r["id"] for r in d.unlabeled}
    assert "unsup_1_0.txt" not in {r["id"] for r in d.unlabeled}  # too short
    d2 = load_text_classification(_cfg(path=str(root), num_labeled=2, dev_size=2, min_unlabeled_chars=10), seed=0)
    assert d2.train == d.train


def test_three_classes_string_labels(tmp_path):
    names = ["bad", "meh", "good"]
    folder = tmp_path / "three"
    folder.mkdir()
    _write_jsonl(folder / "train.jsonl", _rows(10, k=3, names=names))
    _write_jsonl(folder / "test.jsonl", _rows(4, k=3, prefix="test", names=names))
    d = load_text_classification(_cfg(path=str(folder), num_labeled=6, dev_size=3), seed=5)
    assert d.label_names == ["bad", "good", "meh"]  # sorted unique names
    assert sorted(r["label"] for r in d.train) == [0, 0, 1, 1, 2, 2]
    assert sorted(r["label"] for r in d.dev) == [0, 1, 2]
    d2 = load_text_classification(_cfg(path=str(folder), num_labeled=6, dev_size=3, label_names=names), seed=5)
    assert d2.label_names == names
    assert {r["text"]: names[r["label"]] for r in d2.test} == {r["text"]: d.label_names[r["label"]] for r in d.test}


def test_three_classes_int_labels_default_names(tmp_path):
    folder = tmp_path / "three"
    folder.mkdir()
    _write_jsonl(folder / "train.jsonl", _rows(10, k=3))
    _write_jsonl(folder / "test.jsonl", _rows(4, k=3, prefix="test"))
    d = load_text_classification(_cfg(path=str(folder), num_labeled=3, dev_size=3), seed=5)
    assert d.label_names == ["0", "1", "2"]
    with pytest.raises(DataError, match="data.num_labeled"):
        load_text_classification(_cfg(path=str(folder), num_labeled=4), seed=5)


def test_single_file_pool_with_unlabelled_rows_and_dev_file(tmp_path):
    rows = _rows(10) + [{"id": f"u{i}", "text": "unlabelled " * 10, "label": -1} for i in range(5)]
    pool = _write_jsonl(tmp_path / "pool.jsonl", rows)
    dev = _write_jsonl(tmp_path / "mydev.jsonl", _rows(8, prefix="dev"))
    d = load_text_classification(_cfg(path=str(pool), dev_file=str(dev), dev_size=4), seed=2)
    assert d.test == [] and d.info["files"]["dev"] == str(dev)
    assert len(d.dev) == 4 and {r["id"] for r in d.dev} <= {r["id"] for r in _rows(8, prefix="dev")}
    assert d.info["counts"]["train_pool_labeled"] == 20
    assert d.info["counts"]["unlabeled_from_train_unlabeled_rows"] == 5
    assert not {r["id"] for r in d.train} & {f"u{i}" for i in range(5)}
    assert len(d.unlabeled) == 5 + 20  # the -1 rows + the whole labelled pool (dev is a separate file)
    d_all = load_text_classification(_cfg(path=str(pool), dev_file=str(dev), dev_size=0), seed=2)
    assert len(d_all.dev) == 16


def test_overrides_and_env_path(tmp_path, monkeypatch):
    folder = _imdb_like(tmp_path / "d")
    other_test = _write_jsonl(tmp_path / "t2.jsonl", _rows(2, prefix="other"))
    monkeypatch.setenv("UDA_DATA_PATH", str(folder))
    cfg = _cfg(test_file=str(other_test), unlabeled_from_train=False)
    assert resolve_data_path(cfg) == str(folder)
    assert resolve_data_path(_cfg(path="/x")) == "/x"
    d = load_text_classification(cfg, seed=0)
    assert [r["id"] for r in d.test][0].startswith("other_")
    assert len(d.unlabeled) == 10
    monkeypatch.delenv("UDA_DATA_PATH")
    assert resolve_data_path(_cfg()) is None


def test_id_order_selection(tmp_path):
    folder = _imdb_like(tmp_path / "d")
    order = tmp_path / "order.txt"
    # official-style names (no split prefix), unknown ids and unsup ids mixed in
    lines = ["unsup_3.txt", "1_5.txt", "0_7.txt", "nope.txt", "0_2.txt", "1_1.txt", "1_9.txt", "0_0.txt"]
    order.write_text("\n".join(lines) + "\n", encoding="utf-8")
    d = load_text_classification(_cfg(path=str(folder), id_order_file=str(order)), seed=0)
    assert [r["id"] for r in d.train] == ["train_1_5.txt", "train_0_7.txt", "train_0_2.txt", "train_1_1.txt"]
    assert [r["label"] for r in d.train] == [1, 0, 0, 1]
    # seed does not change an id-ordered selection, and dev never overlaps it
    d2 = load_text_classification(_cfg(path=str(folder), id_order_file=str(order)), seed=9)
    assert d2.train == d.train
    assert not {r["id"] for r in d2.dev} & {r["id"] for r in d2.train}
    with pytest.raises(DataError, match="order.txt"):
        load_text_classification(_cfg(path=str(folder), id_order_file=str(order), num_labeled=8), seed=0)


def test_determinism_and_seed_effect(tmp_path):
    folder = _imdb_like(tmp_path / "d", n_train=50)
    cfg = _cfg(path=str(folder), max_unlabeled=15, max_test=6)
    a = load_text_classification(cfg, seed=11)
    b = load_text_classification(cfg, seed=11)
    assert (a.train, a.dev, a.test, a.unlabeled) == (b.train, b.dev, b.test, b.unlabeled)
    assert len(a.unlabeled) == 15 and len(a.test) == 6
    assert sorted(r["label"] for r in a.test) == [0, 0, 0, 1, 1, 1]
    others = [load_text_classification(cfg, seed=s) for s in range(12, 16)]
    assert any(o.train != a.train for o in others)
    assert any(o.dev != a.dev for o in others)


# ----------------------------------------------------------------------------- errors

def _bad(tmp_path: Path, name: str, content: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(content)
    return p


@pytest.mark.parametrize("name,content,pattern", [
    ("empty.jsonl", b"", r"empty.jsonl' is empty"),
    ("bad.jsonl", b'{"text": "a", "label": 0}\n{"text": oops}\n', r"bad.jsonl', line 2: invalid JSON"),
    ("latin.jsonl", b'{"text": "a", "label": 0}\n{"text": "caf\xe9", "label": 1}\n', r"not valid UTF-8 \(line 2"),
    ("nocol.jsonl", b'{"review": "a", "label": 0}\n', r"no text column 'text' \(columns: \['review', 'label'\]\)"),
    ("nolab.csv", b"text,stars\na,1\n", r"no label column 'label' \(columns: \['text', 'stars'\]\)"),
    ("data.xlsx", b"x", r"unsupported extension"),
])
def test_reader_errors(tmp_path, name, content, pattern):
    p = _bad(tmp_path, name, content)
    with pytest.raises(DataError, match=pattern):
        read_table(p, "text", "label", "id")


def test_missing_paths(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_text_classification(_cfg(path=str(tmp_path / "nowhere")), seed=0)
    empty = tmp_path / "emptydir"
    empty.mkdir()
    with pytest.raises(DataError, match="no train file.*--data.train_file"):
        load_text_classification(_cfg(path=str(empty)), seed=0)
    folder = _imdb_like(tmp_path / "d")
    with pytest.raises(DataError, match="data.id_order_file"):
        load_text_classification(_cfg(path=str(folder), id_order_file=str(tmp_path / "x.txt")), seed=0)
    with pytest.raises(DataError, match="data.test_file"):
        load_text_classification(_cfg(path=str(folder), test_file="missing.jsonl"), seed=0)


def test_label_errors(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    _write_jsonl(folder / "train.jsonl", _rows(10))
    _write_jsonl(folder / "test.jsonl", _rows(2, prefix="test") + [{"id": "t9", "text": "z", "label": 2}])
    with pytest.raises(DataError, match=r"test.jsonl', row 5 \(id 't9'\): label 2 is out of range"):
        load_text_classification(_cfg(path=str(folder)), seed=0)
    _write_jsonl(folder / "test.jsonl", _rows(2, prefix="test", names=["neg", "pos"]) +
                 [{"id": "t9", "text": "z", "label": "meh"}])
    with pytest.raises(DataError, match=r"row 5 \(id 't9'\): unknown label 'meh'"):
        load_text_classification(_cfg(path=str(folder), label_names=["neg", "pos"]), seed=0)
    _write_jsonl(folder / "train.jsonl", _rows(10) + [{"id": "e", "text": "  ", "label": 1}])
    _write_jsonl(folder / "test.jsonl", _rows(2, prefix="test"))
    with pytest.raises(DataError, match=r"train.jsonl', row 21 \(id 'e'\): empty text"):
        load_text_classification(_cfg(path=str(folder)), seed=0)
    _write_jsonl(folder / "train.jsonl", _rows(10) + [{"id": "e", "text": "a", "label": 7}])
    with pytest.raises(DataError, match=r"row 21 \(id 'e'\): label 7 is out of range.*data.label_names"):
        load_text_classification(_cfg(path=str(folder), label_names=["neg", "pos"]), seed=0)


def test_pool_too_small_errors(tmp_path):
    folder = _imdb_like(tmp_path / "d", n_train=3)
    with pytest.raises(DataError, match="data.num_labeled=20 asks for 10 per class"):
        load_text_classification(_cfg(path=str(folder), num_labeled=20), seed=0)
    with pytest.raises(DataError, match="data.dev_size=6"):
        load_text_classification(_cfg(path=str(folder), num_labeled=4), seed=0)


def test_hub_unreachable_and_mocked(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError) as e:
        load_text_classification(_cfg(), seed=0)
    assert "no local data given and the hub is unreachable" in str(e.value)
    assert "--data.path /path/to/imdb" in str(e.value) and "UDA_DATA_PATH" in str(e.value)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)

    import datasets

    def fake_load(hub_id):
        feats = datasets.Features({"text": datasets.Value("string"),
                                   "label": datasets.ClassLabel(names=["neg", "pos"])})
        tr = _rows(10)
        te = _rows(3, prefix="test")
        un = [{"text": "unsupervised " * 10, "label": -1} for _ in range(4)]
        mk = lambda rows, f: datasets.Dataset.from_dict(  # noqa: E731
            {"text": [r["text"] for r in rows], "label": [r["label"] for r in rows]}, features=f)
        un_feats = datasets.Features({"text": datasets.Value("string"), "label": datasets.Value("int64")})
        return datasets.DatasetDict({"train": mk(tr, feats), "test": mk(te, feats), "unsupervised": mk(un, un_feats)})

    monkeypatch.setattr(text_data, "hub_reachable", lambda *a, **k: True)
    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    d = load_text_classification(_cfg(hub_id="some/dataset"), seed=0)
    assert d.label_names == ["neg", "pos"]
    assert len(d.train) == 4 and len(d.test) == 6 and len(d.dev) == 6
    assert d.info["counts"]["unlabeled_from_file"] == 4
    assert d.train[0]["id"].startswith("train-")


# ----------------------------------------------------------------------------- through Arrow, as before

def pool_files(folder: Path, ext: str) -> Path:
    """Synthetic IMDB-like train/test/unsup files: labelled and -1 training rows, unsup texts of every
    length (some blank, some short), and test texts repeated in train and unsup."""
    import random

    rng = random.Random(0)
    words = ["good", "bad", "film", "plot", "actors", "the", "a", "dull", "great", "ending", "café", "naïve"]
    say = lambda n: " ".join(rng.choice(words) for _ in range(n))  # noqa: E731
    test = [{"id": f"test_{i}.txt", "text": say(12) + f" t{i}", "label": i % 2} for i in range(20)]
    train = [{"id": f"train_{i}.txt", "text": say(rng.randint(5, 40)), "label": rng.choice([0, 1, 1, 0, -1])}
             for i in range(90)]
    train[3]["text"] = test[0]["text"]
    train[50]["text"] = train[10]["text"]  # a repeated training text
    unsup = [{"text": say(rng.randint(1, 30)) if i % 9 else "   "} for i in range(120)]
    unsup[5]["text"] = test[1]["text"]
    for i in range(30, 60):  # some of these are dev texts
        unsup[i]["text"] = train[i]["text"]
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("test", test), ("unsup", unsup)):
        p = folder / f"{name}{ext}"
        if ext == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as papq

            papq.write_table(pa.Table.from_pylist(rows), p)
        elif ext == ".csv":
            _write_csv(p, rows)
        elif ext == ".json":
            p.write_text(json.dumps(rows), encoding="utf-8")
        else:
            _write_jsonl(p, rows)
    return folder


# sha256 (first 16 hex digits) of the labelled, dev, test and unlabelled ids (with hidden labels) and the
# counts that load_text_classification gave on pool_files() BEFORE data went through Arrow tables (the
# hand-written readers into lists); the same for every format
BEFORE_ARROW = {
    "seed0": ({}, 0, "d620f3b6d49bdfee"),
    "seed7": ({}, 7, "4b112546f6f82804"),
    "cap": ({"max_unlabeled": 25}, 3, "ed9764082ceb4e6f"),
    "all": ({"num_labeled": 0, "dev_size": 10}, 1, "e4374db1288e9cb1"),
    "no_train": ({"unlabeled_from_train": False}, 2, "afb197f23a51cc23"),
    "test_cap": ({"max_test": 6}, 4, "1a1c3193ad000656"),
}


def _selection_digest(d) -> str:
    import hashlib

    added_since = ("unlabeled_skipped_empty", "train_pool_unlabeled_rows", "train_pool_labeled_in_test")
    counts = {k: v for k, v in d.info["counts"].items() if k not in added_since}  # counts recorded later
    s = {"train": [r["id"] for r in d.train], "dev": [r["id"] for r in d.dev], "test": [r["id"] for r in d.test],
         "unlabeled": [[u["id"], u.get("hidden_label", -1)] for u in d.unlabeled], "counts": counts}
    return hashlib.sha256(json.dumps(s, sort_keys=True).encode()).hexdigest()[:16]


@pytest.mark.parametrize("ext", [".jsonl", ".jsonl.gz", ".json", ".csv", ".parquet"])
def test_same_selection_as_before_arrow_in_every_format(tmp_path, ext):
    folder = pool_files(tmp_path / "d", ext)
    for case, (options, seed, digest) in BEFORE_ARROW.items():
        cfg = DataConfig(path=str(folder), **{"num_labeled": 8, "dev_size": 12, "min_unlabeled_chars": 40, **options})
        d = load_text_classification(cfg, seed)
        assert _selection_digest(d) == digest, case
    assert d.info["counts"]["unlabeled_skipped_dev_text"] and d.info["counts"]["unlabeled_skipped_test_text"]


def _cache_files() -> dict:
    from uda.arrow_cache import cache_root

    return {p.name: p.stat().st_mtime_ns for p in cache_root().glob("*.arrow")}


def test_second_setup_reuses_the_arrow_cache(tmp_path, monkeypatch):
    folder = pool_files(tmp_path / "d", ".jsonl.gz")
    cfg = _cfg(path=str(folder))
    first = load_text_classification(cfg, seed=0)
    cached = _cache_files()
    reads = []
    real = text_data.iter_table
    monkeypatch.setattr(text_data, "iter_table", lambda path, *a, **k: (reads.append(Path(path).name), real(path, *a, **k))[1])
    second = load_text_classification(cfg, seed=0)
    assert reads == [] and _cache_files() == cached  # nothing read from the files, no table written again
    assert (second.train, second.dev, second.test, second.unlabeled) == (first.train, first.dev, first.test,
                                                                         first.unlabeled)
    _write_jsonl(folder / "unsup.jsonl.gz", [{"text": "a new unlabelled text " * 5}])  # a changed file is read again
    third = load_text_classification(cfg, seed=0)
    assert reads == ["unsup.jsonl.gz"] and third.info["counts"]["unlabeled_from_file"] == 1
    another = load_text_classification(_cfg(path=str(folder), id_column=None), seed=0)  # other options: new tables
    assert len(reads) == 4 and another.train[0]["id"].startswith("train-")


def test_unlabeled_pool_is_read_from_the_arrow_tables(tmp_path):
    from uda.io import text_hash

    d = load_text_classification(_cfg(path=str(pool_files(tmp_path / "d", ".jsonl"))), seed=0)
    pool = d.unlabeled
    assert isinstance(pool, text_data.UnlabeledPool) and not hasattr(pool, "append")
    items = list(pool)  # read in batches
    assert items == [pool[i] for i in range(len(pool))] == pool[:] and pool[-1] == items[-1]
    assert {"id", "text"} <= set(items[0]) and any("hidden_label" in u for u in items)
    assert list(pool.texts()) == [u["text"] for u in items]
    assert pool.examples_at([3, 0, -1]) == [items[3], items[0], items[-1]]  # a training step's batch
    assert pool.text_hashes().tobytes() == b"".join(text_hash(u["text"]) for u in items)
    with pytest.raises(IndexError):
        pool[len(pool)]


def _mapped_kib(suffix: str) -> int:
    """Resident KiB of this process's mappings of files whose name ends with ``suffix`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                inside = len(head) >= 6 and head[-1].endswith(suffix)
            elif inside and line.startswith("Rss:"):
                total += int(head[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux only: reads /proc/self/smaps")
def test_reads_of_the_pool_give_back_the_mapped_pages(tmp_path):
    """Drawn texts, the setup's column reads and precomputed copies leave no page of the memory-mapped
    tables mapped in this process (kernel large folios map up to 2 MiB a fault: see MappedPages)."""
    from augment.precomputed import PrecomputedAugmenter, write_precomputed
    from uda.arrow_cache import MappedPages, cached_table

    folder = tmp_path / "d"
    folder.mkdir()
    _write_jsonl(folder / "train.jsonl", _rows(20))
    _write_jsonl(folder / "test.jsonl", _rows(5, prefix="test"))
    _write_jsonl(folder / "unsup.jsonl", [{"id": f"u{i}", "text": f"unlabelled {i} " + "word " * 400}
                                          for i in range(3000)])  # 6 MB of text
    d = load_text_classification(_cfg(path=str(folder)), seed=0)
    pool = d.unlabeled
    assert _mapped_kib(".arrow") == 0  # the setup read the hash, length and blank columns of every row
    texts = pool.texts_at([5, 2999, 1500, 17])
    assert texts[1].startswith("unlabelled ") and _mapped_kib(".arrow") == 0
    assert pool[100]["text"].startswith("unlabelled 1") and _mapped_kib(".arrow") == 0
    assert len(pool.examples_at(range(0, 3000, 7))) == 429 and _mapped_kib(".arrow") == 0
    pre = tmp_path / "pre.jsonl"
    write_precomputed(pre, texts, [[t.upper()] for t in texts])
    aug = PrecomputedAugmenter(pre)
    assert aug(texts, np.random.default_rng(0))[0] == texts[0].upper() and _mapped_kib(".arrow") == 0

    # without the release the same reads stay mapped: the test sees what it claims to
    import pyarrow as pa

    schema = pa.schema([("text", pa.string())])
    ds = cached_table("probe", {"n": 1}, lambda: ({"text": "t" * 5000} for _ in range(2000)), schema)
    col = ds.data.column("text")
    assert [col[i].as_py()[:1] for i in (0, 1999)] == ["t", "t"] and _mapped_kib(".arrow") > 0
    pages = MappedPages(ds)
    assert pages
    pages.release()
    assert _mapped_kib(".arrow") == 0 and col[1000].as_py() == "t" * 5000  # still readable after


def test_precomputed_copies_are_joined_to_the_pool_at_setup(tmp_path):
    from augment.precomputed import PrecomputedAugmenter, write_precomputed

    pool = load_text_classification(_cfg(path=str(pool_files(tmp_path / "d", ".csv"))), seed=0).unlabeled
    items = list(pool)
    full = tmp_path / "all.jsonl.gz"
    write_precomputed(full, [u["text"] for u in items], [[u["text"].upper()] for u in items])
    text_data.require_copies(pool, PrecomputedAugmenter(full), str(full))  # every text has a copy
    part = tmp_path / "part.jsonl"
    write_precomputed(part, [u["text"] for u in items[:4] + items[7:]], [["x"]] * (len(items) - 3))
    with pytest.raises(DataError) as e:
        text_data.require_copies(pool, PrecomputedAugmenter(part), str(part))
    first = "; ".join(f"id '{u['id']}', {u['text'][:60]!r}" for u in items[4:7])
    assert str(e.value) == (f"--augment.file '{part}' has no augmented copy for 3 of the {len(items)} unlabelled "
                            f"texts (the first: {first}); regenerate it for this data")


# ----------------------------------------------------------------------------- real data

def test_real_imdb_reference_split():
    root = Path(os.environ.get("UDA_SHARED_DATA", REPO.parent / "shared" / "data")) / "imdb"
    order = root / "uda_train_id_list.txt"
    if not (root / "train.jsonl.gz").is_file() or not order.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared IMDB data not found at {root}; set UDA_SHARED_DATA to the shared data folder")
        pytest.skip(f"shared IMDB data not found at {root}")
    # only the training pool is read (no test / unlabelled files, no dev carving)
    cfg = DataConfig(train_file=str(root / "train.jsonl.gz"), id_order_file=str(order), num_labeled=20,
                     dev_size=0, unlabeled_from_train=False)
    d = load_text_classification(cfg, seed=0)
    assert d.label_names == ["neg", "pos"]
    labels = [r["label"] for r in d.train]
    assert labels.count(0) == 10 and labels.count(1) == 10
    first_neg_line = next(line.strip() for line in order.open(encoding="utf-8") if line.startswith("neg_"))
    first_neg = next(r for r in d.train if r["label"] == 0)
    assert first_neg["id"] == f"train_{first_neg_line}"
    first_pos_line = next(line.strip() for line in order.open(encoding="utf-8") if line.startswith("pos_"))
    assert next(r for r in d.train if r["label"] == 1)["id"] == f"train_{first_pos_line}"


def test_real_imdb_same_selection_as_before_arrow(tmp_path, monkeypatch):
    """On the real IMDB files the Arrow-backed loader selects exactly what the list-based loader did
    (ids recorded with it: tests/data/imdb_selection_before_arrow.json): the reference split and two
    seeded random splits, labelled and dev ids in order, the unlabelled pool's ids."""
    import hashlib

    root = Path(os.environ.get("UDA_SHARED_DATA", REPO.parent / "shared" / "data")) / "imdb"
    if not all((root / f).is_file() for f in ("train.jsonl.gz", "test.jsonl.gz", "unsup.jsonl.gz")):
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared IMDB data not found at {root}; set UDA_SHARED_DATA to the shared data folder")
        pytest.skip(f"shared IMDB data not found at {root}")
    monkeypatch.setenv("UDA_CACHE", str(tmp_path / "cache"))
    golden = json.loads((REPO / "tests" / "data" / "imdb_selection_before_arrow.json").read_text(encoding="utf-8"))
    for name, case in golden.items():
        if name.startswith("_"):
            continue
        d = load_text_classification(DataConfig(path=str(root), **case["config"]), seed=case["seed"])
        unl = [u["id"] for u in d.unlabeled]
        assert [r["id"] for r in d.train] == case["labeled_ids"], name
        assert [r["id"] for r in d.dev] == case["dev_ids"], name
        assert len(d.test) == case["test_count"] and len(unl) == case["unlabeled_count"], name
        assert hashlib.sha256("\n".join(unl).encode()).hexdigest() == case["unlabeled_ids_sha256"], name


def test_a_recipe_id_order_file_missing_from_the_data_falls_back_to_a_random_draw(tmp_path, capsys):
    """The IMDB recipes name uda_train_id_list.txt, which only the reference data folder holds: elsewhere the
    labelled set is drawn at random per class, with a warning that says how to get the reference split;
    a path that does not exist stays an error."""
    folder = _imdb_like(tmp_path / "d")
    d = load_text_classification(_cfg(path=str(folder), id_order_file="uda_train_id_list.txt"), seed=0)
    assert d.info["selection"].startswith("random per class")
    assert "--data.id_order_file 'uda_train_id_list.txt' is neither in the working folder nor in the data " \
           "folder" in capsys.readouterr().out
