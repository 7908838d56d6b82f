"""uda-augment --shard K/N (parts made by separate jobs) and --join (one output from the parts)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from tasks.cli import augment_main
from tests.conftest import make_review, write_jsonl


def _input(tmp_path: Path) -> Path:
    rng = random.Random(0)
    texts = [make_review(rng, i % 2, 8 + i % 5) for i in range(40)]
    texts[3] = texts[30]  # a repeated text: one shard, one set of copies
    texts[7] = "   "  # an empty row, skipped once
    inp = tmp_path / "pool.jsonl"
    write_jsonl(inp, [{"id": f"r{i}", "text": t} for i, t in enumerate(texts)])
    return inp


def _args(tmp_path: Path, inp: Path, out: Path, *extra: str) -> list[str]:
    return ["--input", str(inp), "--output", str(out), "--method", "swap", "--p", "0.3", "--copies", "2",
            "--chunk_size", "4", "--cache_dir", str(tmp_path / "cache"), "--no_progress", *extra]


def _by_text(path: Path) -> tuple[dict[str, list[str]], int]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return {r["text"]: r["augmented"] for r in rows}, len(rows)


def test_two_shards_and_join_equal_one_run(tmp_path, capsys):
    inp = _input(tmp_path)
    whole = tmp_path / "whole.jsonl.gz"
    assert augment_main(_args(tmp_path, inp, whole)) == 0
    out = tmp_path / "joined.jsonl.gz"
    for k in range(2):
        assert augment_main(_args(tmp_path, inp, out, "--shard", f"{k}/2")) == 0
    parts = [tmp_path / f"joined.shard-{k}-of-2.jsonl.gz" for k in range(2)]
    assert all(p.exists() for p in parts)
    assert json.loads((tmp_path / "joined.shard-1-of-2.report.json").read_text())["finished"] is True
    capsys.readouterr()
    assert augment_main(_args(tmp_path, inp, out, "--shard", "1/2")) == 0  # finished: not redone
    assert "already done" in capsys.readouterr().err
    assert augment_main(["--join", str(out), "--shards", "2"]) == 0
    joined, n_joined = _by_text(out)
    expected, n_whole = _by_text(whole)
    assert joined == expected and n_joined == n_whole == 39
    sizes = [_by_text(p)[1] for p in parts]
    assert all(sizes) and sum(sizes) == 39
    report = json.loads((tmp_path / "joined.report.json").read_text())
    assert report["rows_written"] == 39 and report["skip_reasons"] == {"empty text": 1}


def test_join_refuses_missing_and_unfinished_parts(tmp_path, capsys):
    inp = _input(tmp_path)
    out = tmp_path / "out.jsonl.gz"
    assert augment_main(_args(tmp_path, inp, out, "--shard", "0/3")) == 0
    assert augment_main(_args(tmp_path, inp, out, "--shard", "2/3")) == 0
    capsys.readouterr()
    assert augment_main(["--join", str(out), "--shards", "3"]) == 2
    err = capsys.readouterr().err
    assert "part 1 of 3 is missing" in err and "out.shard-1-of-3.jsonl.gz" in err and "--shard 1/3" in err
    assert not out.exists()
    assert augment_main(_args(tmp_path, inp, out, "--shard", "1/3")) == 0
    rp = tmp_path / "out.shard-2-of-3.report.json"
    rp.write_text(json.dumps({**json.loads(rp.read_text()), "finished": False}))
    assert augment_main(["--join", str(out), "--shards", "3"]) == 2
    assert "did not finish" in capsys.readouterr().err


def test_join_refuses_a_part_of_another_split_or_settings(tmp_path, capsys):
    inp = _input(tmp_path)
    out = tmp_path / "out.jsonl.gz"
    for k in range(2):
        assert augment_main(_args(tmp_path, inp, out, "--shard", f"{k}/2")) == 0
    assert augment_main(_args(tmp_path, inp, out, "--shard", "0/3")) == 0  # a part made with another N
    capsys.readouterr()
    assert augment_main(["--join", str(out), "--shards", "2"]) == 2
    assert "out.shard-0-of-3.jsonl.gz" in capsys.readouterr().err
    for p in tmp_path.glob("out.shard-0-of-3.*"):
        p.unlink()
    # a duplicated part: shard 0's file copied over shard 1's
    for suffix in (".jsonl.gz", ".report.json"):
        (tmp_path / f"out.shard-1-of-2{suffix}").write_bytes((tmp_path / f"out.shard-0-of-2{suffix}").read_bytes())
    assert augment_main(["--join", str(out), "--shards", "2"]) == 2
    assert "shard 0/2, not 1/2" in capsys.readouterr().err
    # a part made with another seed
    assert augment_main(_args(tmp_path, inp, out, "--shard", "1/2", "--seed", "5")) == 0
    assert augment_main(["--join", str(out), "--shards", "2"]) == 2
    assert "another seed" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["2/2", "x", "1/0", "-1/2"])
def test_bad_shard_value_is_refused(tmp_path, bad, capsys):
    with pytest.raises(SystemExit):
        augment_main(_args(tmp_path, _input(tmp_path), tmp_path / "o.jsonl.gz", "--shard", bad))
    assert "--shard" in capsys.readouterr().err


def test_a_shard_shared_by_ranks_equals_the_shard_alone(tmp_path):
    from augment.pipeline import augment_file

    inp = _input(tmp_path)
    kw = dict(method="swap", options={"p": 0.3}, copies=2, seed=0, chunk_size=4, progress=False)
    alone = augment_file([inp], tmp_path / "a.jsonl.gz", shard=(1, 2), cache_dir=tmp_path / "c1", **kw)
    r1 = augment_file([inp], tmp_path / "b.jsonl.gz", shard=(1, 2), cache_dir=tmp_path / "c2", rank=1,
                      world_size=2, **kw)
    assert r1["rank_only"] and not (tmp_path / "b.shard-1-of-2.jsonl.gz").exists()
    r0 = augment_file([inp], tmp_path / "b.jsonl.gz", shard=(1, 2), cache_dir=tmp_path / "c2", rank=0,
                      world_size=2, **kw)
    assert r0["texts_computed"] < alone["texts_computed"]  # rank 1 did its half of the shard
    assert _by_text(tmp_path / "a.shard-1-of-2.jsonl.gz") == _by_text(tmp_path / "b.shard-1-of-2.jsonl.gz")
