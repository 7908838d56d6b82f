"""End-to-end: a tiny model trains through scripts/train_uda.py and leaves the expected run folder."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


def tb_tags(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = list(folder.rglob("events.out.tfevents.*"))
    assert files, f"no TensorBoard event file under {folder}"
    acc = EventAccumulator(str(files[0].parent))
    acc.Reload()
    return set(acc.Tags()["scalars"])


def run_script(args, env_extra=None, check=True):
    import os

    env = dict(os.environ, HF_HUB_OFFLINE="1", **(env_extra or {}))
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "train_uda.py"), *args],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"train_uda.py failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def tiny_args(model_dir, data_dir, out_dir, *extra):
    return ["--task", "text_classification", "--model.name_or_path", str(model_dir),
            "--data.path", str(data_dir), "--data.num_labeled", "20", "--data.dev_size", "40",
            "--model.max_length", "32", "--train.max_steps", "12", "--train.warmup_steps", "2",
            "--train.lr", "1e-3", "--train.batch_size", "4", "--train.eval_every", "6",
            "--train.log_every", "3", "--uda.unsup_ratio", "2", "--output_dir", str(out_dir), *extra]


def test_train_uda_end_to_end(tiny_model_dir, tiny_text_data, tmp_path):
    out = tmp_path / "run"
    proc = run_script(tiny_args(tiny_model_dir, tiny_text_data, out))
    assert "test (" in proc.stderr + proc.stdout
    # run folder artefacts
    for name in ["config.yaml", "metrics.jsonl", "results.json", "data_info.json", "predictions_test.jsonl",
                 "model/config.json", "model/label_names.json"]:
        assert (out / name).exists(), name
    assert not (out / "run.lock").exists()  # the finished run released its folder
    results = json.loads((out / "results.json").read_text())
    assert results["test"]["num_examples"] == 60
    assert results["selected_model"]["by"] == "dev/accuracy"
    assert results["cpu_seconds"] > 0
    assert 0 <= results["test_eval_seconds"] <= results["total_seconds"]
    import torch

    env = results["environment"]  # where and with what it ran: a curve may mix machines
    assert env["device"] == "cpu" and env["torch"] == torch.__version__ and "cores" in env["device_name"]
    from tasks.text.task import TextClassificationTask

    assert set(TextClassificationTask.selectable_metrics) <= set(results["dev_history"][0])
    assert [h["step"] for h in results["dev_history"]] == [6, 12]
    assert results["data"]["num_train"] == 20 if "num_train" in results["data"] else True
    # metrics.jsonl: 4 training log lines (steps 3, 6, 9, 12), 2 dev evals, 1 test
    lines = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    train_lines = [l for l in lines if "train/loss" in l]
    assert [l["step"] for l in train_lines] == [3, 6, 9, 12]
    assert sum("dev/accuracy" in l for l in lines) == 2 and sum("test/accuracy" in l for l in lines) == 1
    # TensorBoard tags
    tags = tb_tags(out / "tensorboard")
    for tag in ["sup/loss", "sup/tsa_threshold", "sup/trained_ratio", "unsup/loss", "unsup/mask_ratio",
                "train/loss", "train/lr", "train/examples_per_sec", "dev/accuracy", "test/accuracy"]:
        assert tag in tags, tag
    # the saved model loads in a transformers pipeline with its label names
    from transformers import pipeline

    clf = pipeline("text-classification", model=str(out / "model"))
    pred = clf("the movie was great and wonderful")[0]
    assert pred["label"] in {"LABEL_0", "LABEL_1", "0", "1"} or pred["label"] in json.loads(
        (out / "model" / "label_names.json").read_text())


def test_supervised_only_skips_unlabelled_work(tiny_model_dir, tiny_text_data, tmp_path):
    out = tmp_path / "sup"
    run_script(tiny_args(tiny_model_dir, tiny_text_data, out, "--uda.lambda_u", "0", "--report_to", "none"))
    lines = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert not any("unsup/loss" in l for l in lines)
    assert not (out / "tensorboard").exists()


def test_refuses_to_overwrite_a_finished_run(tiny_model_dir, tiny_text_data, tmp_path):
    out = tmp_path / "run"
    run_script(tiny_args(tiny_model_dir, tiny_text_data, out, "--train.max_steps", "2", "--train.warmup_steps", "0",
                         "--report_to", "none"))
    before = (out / "results.json").read_text()
    proc = run_script(tiny_args(tiny_model_dir, tiny_text_data, out, "--train.max_steps", "2",
                                "--train.warmup_steps", "0"), check=False)
    assert proc.returncode == 2
    assert "already holds a finished run" in proc.stderr
    assert (out / "results.json").read_text() == before


def test_help_lists_every_option():
    proc = run_script(["--help"])
    from uda.config import iter_fields

    for key, *_ in iter_fields():
        assert f"--{key} " in proc.stdout, key


def test_unknown_option_is_an_error_naming_it():
    proc = run_script(["--task", "imdb", "--train.lrr", "3e-5"], check=False)
    assert proc.returncode == 2 and "--train.lrr" in proc.stderr


def test_offline_without_local_data_says_how(tmp_path, monkeypatch):
    proc = run_script(["--task", "imdb", "--model.name_or_path", "minilm", "--output_dir", str(tmp_path / "x")],
                      env_extra={"UDA_DATA_PATH": ""}, check=False)
    assert proc.returncode == 2
    assert "--data.path" in proc.stderr and "UDA_DATA_PATH" in proc.stderr


def test_offline_the_card_command_names_every_missing_resource_at_once(tmp_path):
    """`python scripts/train_uda.py --task imdb` offline with no local data and a hub model: one message names
    both the data and the model options, before any run folder is made."""
    proc = run_script(["--task", "imdb", "--output_dir", str(tmp_path / "x")], env_extra={"UDA_DATA_PATH": ""},
                      check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    err = proc.stderr
    assert "the Hugging Face hub cannot be reached, and the run needs it for the model:" in err
    assert "--model.name_or_path" in err and "and for the data:" in err and "--data.path" in err
    assert not (tmp_path / "x").exists()
