"""The SetFit baseline (uda_compare/setfit_baseline.py; benchmarks/setfit_baseline.py is its shim) on a
tiny BERT built here and tiny jsonl data: results.json from id files and from a run folder, clear errors
for bad ids, and uda-compare's ``setfit`` method. Nothing here
may reach the network: every socket connection fails."""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import sys

import pytest

from tests.conftest import FILLER, NEG_WORDS, POS_WORDS, REPO, make_review, write_jsonl

try:
    import setfit  # noqa: F401
except ImportError:  # installed by scripts/setup_env.sh (requirements.txt); under CI its absence is a failure
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("setfit is not installed: run scripts/setup_env.sh", allow_module_level=True)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network use in a test (tests never touch the hub)")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    """A 2-layer BERT encoder (hidden 32) with a word-level vocabulary of the synthetic reviews."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    d = tmp_path_factory.mktemp("tiny_setfit_bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + sorted(set(POS_WORDS + NEG_WORDS + FILLER))
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = BertTokenizerFast(vocab=str(d / "vocab.txt"), do_lower_case=True)
    assert tok.unk_token_id not in tok("great movie")["input_ids"]
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=37, max_position_embeddings=64)).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """train.jsonl / test.jsonl with IMDB-style ids and ``<br />`` tags, and two id files."""
    d = tmp_path_factory.mktemp("tiny_setfit_data")
    rng = random.Random(0)
    br = lambda t: t.replace(" ", "<br /><br />", 1)  # noqa: E731
    train = [{"id": f"train_{'pos' if i % 2 else 'neg'}_{i}_1.txt", "text": br(make_review(rng, i % 2)),
              "label": i % 2, "rating": 1} for i in range(40)]
    test = [{"id": f"test_{i}", "text": br(make_review(rng, i % 2)), "label": i % 2} for i in range(30)]
    write_jsonl(d / "train.jsonl", train)
    write_jsonl(d / "test.jsonl", test)
    (d / "labeled.txt").write_text("".join(r["id"] + "\n" for r in train[:8]))
    (d / "dev.txt").write_text("".join(r["id"] + "\n" for r in train[20:26]))
    return d


def baseline(args, capsys):
    from uda_compare.setfit_baseline import main

    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out + out.err


FAST = ["--num_iterations", "2", "--max_length", "32", "--quiet"]


def test_from_id_files_writes_results(tiny_encoder, data, tmp_path, capsys):
    out = tmp_path / "out"
    rc, log = baseline(["--labeled_ids", data / "labeled.txt", "--dev_ids", data / "dev.txt", "--data_path", data,
                        "--seed", 3, "--model", tiny_encoder, "--out", out, *FAST], capsys)
    assert rc == 0, log
    res = json.loads((out / "results.json").read_text())
    assert 0.0 <= res["test"]["accuracy"] <= 1.0 and 0.0 <= res["test"]["macro_f1"] <= 1.0
    assert res["test"]["num_examples"] == 30 and res["dev_best"]["num_examples"] == 6
    assert res["labeled_ids"] == (data / "labeled.txt").read_text().split()
    assert (out / "labeled_ids.txt").read_text().split() == res["labeled_ids"]
    assert res["data"]["counts"]["train"] == 8 and res["data"]["counts"]["train_per_class"] == {"0": 4, "1": 4}
    assert res["seed"] == 3 and res["setfit"]["num_iterations"] == 2 and res["setfit"]["max_length"] == 32
    # 8 examples x 2 iterations x 2 pairs = 32 pairs, batch 16: 2 steps
    assert res["setfit"]["train_steps"] == res["selected_model"]["step"] == 2
    for key in ("train_seconds", "test_eval_seconds", "total_seconds", "cpu_seconds"):
        assert res[key] >= 0
    assert res["task"] == "text_classification" and "test accuracy" in log
    # where it ran, as the trainer's results.json says it (the summary's "ran on"), and its labelled budget
    assert res["environment"]["device"] == "cpu" and {"device_name", "torch"} <= set(res["environment"])
    assert res["labels"] == {"train": 8, "dev_for_selection": 0}  # dev is reported, it chooses no step


def test_texts_lose_br_tags_and_keep_the_id_order(data):
    from uda_compare.setfit_baseline import parse_args
    from uda_compare.setfit_data import load_inputs

    inputs = load_inputs(parse_args(["--labeled_ids", str(data / "labeled.txt"), "--data_path", str(data),
                                     "--out", "unused"]))
    assert [r["id"] for r in inputs["train"]] == (data / "labeled.txt").read_text().split()
    assert (data / "train.jsonl").read_text().count("<br />") == 2 * 40
    assert all("<br" not in r["text"] for r in inputs["train"] + inputs["test"])
    assert inputs["dev"] == [] and len(inputs["test"]) == 30 and inputs["max_length"] == 128


def test_from_run_folder_as_the_sweep_reads_it(tiny_encoder, data, tmp_path, capsys):
    """config.yaml gives data, encoder, seed, max length and data.max_test; uda_compare.summary.collect lists the run."""
    import yaml

    run = tmp_path / "sweep" / "supervised-n8-seed5"
    run.mkdir(parents=True)
    (run / "labeled_ids.txt").write_text((data / "labeled.txt").read_text())
    (run / "dev_ids.txt").write_text((data / "dev.txt").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({
        "task": "imdb", "seed": 5, "model": {"name_or_path": str(tiny_encoder), "max_length": 24,
                                             "truncation_side": "right"},
        "data": {"path": str(data), "max_test": 10, "label_names": ["neg", "pos"]}}))
    out = tmp_path / "sweep" / "setfit-n8-seed5"
    rc, log = baseline(["--run_dir", run, "--out", out, "--num_iterations", 1, "--quiet"], capsys)
    assert rc == 0, log
    res = json.loads((out / "results.json").read_text())
    assert res["seed"] == 5 and res["task"] == "imdb" and res["source_run"] == str(run)
    assert res["setfit"]["max_length"] == 24 and res["setfit"]["truncation_side"] == "right"
    assert res["test"]["num_examples"] == 10 and res["data"]["counts"]["test_per_class"] == {"neg": 5, "pos": 5}

    from uda_compare.summary import collect

    rows = collect(tmp_path / "sweep", "imdb")
    assert [(r["method"], r["num_labeled"], r["seed"]) for r in rows] == [("setfit", 8, 5)]
    assert rows[0]["accuracy"] == res["test"]["accuracy"] and rows[0]["num_train"] == 8
    assert (rows[0]["device"], rows[0]["dev_labels"]) == ("cpu", 0)


def test_missing_id_or_id_file_is_a_clear_error(data, tmp_path, capsys):
    bad = tmp_path / "labeled.txt"
    bad.write_text("train_neg_0_1.txt\nneg_2_1.txt\n")
    common = ["--data_path", data, "--out", tmp_path / "out", "--quiet"]
    rc, log = baseline(["--labeled_ids", bad, *common], capsys)
    assert rc == 2 and "'neg_2_1.txt'" in log and str(bad) in log and "train_neg_2_1.txt" in log  # the full id
    rc, log = baseline(["--labeled_ids", tmp_path / "nope.txt", *common], capsys)
    assert rc == 2 and "nope.txt" in log and "does not exist" in log
    rc, log = baseline(["--run_dir", tmp_path / "no_run", "--out", tmp_path / "out"], capsys)
    assert rc == 2 and "no_run" in log
    assert not (tmp_path / "out" / "results.json").exists()
    # and as a command (the module uda-compare starts, and the checkout's shim): exit status 2
    for cmd in (["-m", "uda_compare.setfit_baseline"], [str(REPO / "benchmarks" / "setfit_baseline.py")]):
        proc = subprocess.run([sys.executable, *cmd, "--labeled_ids", str(bad), "--data_path", str(data), "--out",
                               str(tmp_path / "out")], capture_output=True, text=True,
                              env=dict(os.environ, HF_HUB_OFFLINE="1"), cwd=REPO, timeout=300)
        assert proc.returncode == 2 and "neg_2_1.txt" in proc.stderr, cmd


def test_sweep_setfit_method(tiny_encoder, data, tmp_path):
    """--methods setfit reads the sibling run's ids; a second call skips it; without a sibling: error."""
    import yaml

    out = tmp_path / "sweep"
    sibling = out / "uda_tfidf-n8-seed0"  # ids written, training not finished: enough for setfit
    sibling.mkdir(parents=True)
    (sibling / "labeled_ids.txt").write_text((data / "labeled.txt").read_text())
    (sibling / "dev_ids.txt").write_text((data / "dev.txt").read_text())
    (sibling / "config.yaml").write_text(yaml.safe_dump({
        "task": "imdb", "seed": 0, "model": {"name_or_path": str(tiny_encoder), "max_length": 32},
        "data": {"path": str(data)}}))

    def sweep(*extra):
        # started from another folder, as an installed uda-compare is: the baseline is found as a module
        return subprocess.run([sys.executable, "-m", "uda_compare", "--task", "imdb", "--out",
                               str(out), "--methods", "setfit", "--quick", *extra], capture_output=True, text=True,
                              env=dict(os.environ, HF_HUB_OFFLINE="1", UDA_DATA_PATH="", PYTHONPATH=str(REPO)),
                              cwd=tmp_path, timeout=600)

    proc = sweep("--num_labeled", "8", "--seeds", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "[1/1] start setfit-n8-seed0" in proc.stdout and "[1/1] done setfit-n8-seed0 in " in proc.stdout
    res = json.loads((out / "setfit-n8-seed0" / "results.json").read_text())
    assert res["source_run"] == str(sibling) and res["setfit"]["num_iterations"] == 2  # --quick
    # 8 labels to train, none on dev to choose a step; ran on the CPU (its results.json's environment)
    assert re.search(r"^\| 8 \| setfit \| 1 \| 8 \+ 0 \| .* \| cpu \|$", (out / "summary.md").read_text(), flags=re.M)
    again = sweep("--num_labeled", "8", "--seeds", "0")
    assert again.returncode == 0 and "skip setfit-n8-seed0: already finished" in again.stdout
    missing = sweep("--num_labeled", "8", "--seeds", "1")
    assert missing.returncode == 2 and "setfit" in missing.stderr and "seed 1" in missing.stderr
