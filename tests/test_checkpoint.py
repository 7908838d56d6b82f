"""uda/checkpoint.py and the run-folder rules of uda/rundir.py, without training: atomic saves,
pointers, top-k pruning, weights_only loading, RNG round trips, resume decisions, log truncation."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from uda import checkpoint
from uda.checkpoint import CheckpointError
from uda.config import ConfigError, build_config, save_config
from uda.metrics_log import MetricsLogger
from uda.rundir import prepare_run_dir
from uda.streams import BatchStream


def _model(folder: Path) -> None:
    """A stand-in for a model's save_pretrained: a loadable (tiny) weights file."""
    from safetensors.torch import save_file

    folder.mkdir()
    save_file({"w": torch.zeros(1)}, str(folder / "model.safetensors"))


def _save(root: Path, step: int, metric, k: int = 1, state=None):
    return checkpoint.save(root, step, metric, k, _model, state or {"step": step})


def _names(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


# ----------------------------------------------------------------------------- saving and pruning

def test_top_k_latest_and_pointers(tmp_path):
    root = tmp_path / "checkpoints"
    for step, metric in [(1, 0.5), (2, 0.7), (3, None), (4, 0.6), (5, 0.7), (6, 0.4)]:
        _save(root, step, metric, k=2)
    # top-2 by metric (a tie keeps the earlier step first) + the latest; the rest are deleted
    assert _names(root) == ["best", "latest", "step-00000002", "step-00000005", "step-00000006"]
    assert (root / "latest").read_text().strip() == "step-00000006"
    assert (root / "best").read_text().strip() == "step-00000002"
    assert checkpoint.read_pointer(root, "best") == root / "step-00000002"
    assert checkpoint.best(root).step == 2 and checkpoint.latest(root).step == 6
    assert json.loads((root / "step-00000005" / checkpoint.META_FILE).read_text()) == {"step": 5, "metric": 0.7,
                                                                                          "metric_name": None}


def test_rescore_reranks_by_another_metric_and_moves_the_best_pointer(tmp_path):
    root = tmp_path / "checkpoints"
    for step, metric in [(2, 0.9), (4, 0.5), (5, None), (6, 0.7)]:
        checkpoint.save(root, step, metric, 5, lambda d: d.mkdir(), {"step": step}, metric_name="accuracy")
    assert checkpoint.best(root).step == 2
    assert [c.step for c in checkpoint.list_checkpoints(root)] == [2, 4, 6]  # 5 had no metric: pruned
    changed = checkpoint.rescore(root, "macro_f1", {2: 0.3, 4: 0.8})  # no macro_f1 recorded for step 6
    assert [c.step for c in changed] == [2, 4, 6]
    assert checkpoint.best(root).step == 4 and (root / "best").read_text().strip() == "step-00000004"
    assert [c.metric for c in checkpoint.list_checkpoints(root)] == [0.3, 0.8, None]
    meta = json.loads((root / "step-00000006" / checkpoint.META_FILE).read_text())
    assert meta == {"step": 6, "metric": None, "metric_name": "macro_f1"}
    assert checkpoint.rescore(root, "macro_f1", {}) == []  # already ranked by it: nothing to do


def test_checkpoints_without_metric_keep_only_the_latest(tmp_path):
    root = tmp_path / "c"
    for step in (10, 20, 30):
        _save(root, step, None, k=3)
    assert _names(root) == ["latest", "step-00000030"]
    assert checkpoint.best(root) is None and not (root / "best").exists()


def test_interrupted_save_leaves_previous_checkpoint_and_is_cleaned_up(tmp_path):
    root = tmp_path / "c"
    _save(root, 1, 0.5)

    def dies_midway(folder: Path) -> None:
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt  # stands for a kill during the save

    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(root, 2, 0.9, 1, dies_midway, {"step": 2})
    assert (root / ".tmp-step-00000002").is_dir()  # the partial save stays invisible
    assert checkpoint.latest(root).step == 1 and checkpoint.best(root).step == 1
    assert checkpoint.load_state(root / "step-00000001") == {"step": 1}
    _save(root, 3, 0.6)
    assert _names(root) == ["best", "latest", "step-00000003"]  # leftover removed, 0.6 beats 0.5


def test_saving_the_same_step_again_replaces_it(tmp_path):
    root = tmp_path / "c"
    _save(root, 4, 0.5, state={"v": 1})
    _save(root, 4, 0.5, state={"v": 2})
    assert checkpoint.load_state(root / "step-00000004") == {"v": 2}
    assert _names(root) == ["best", "latest", "step-00000004"]


# ----------------------------------------------------------------------------- safe loading

def test_training_state_round_trip_with_weights_only(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / 10)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    sched.step()
    scaler = torch.amp.GradScaler("cpu")
    task_rng = np.random.default_rng(7)
    task_rng.random(3)
    state = {"optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "scaler": scaler.state_dict(),
             "rng": checkpoint.rng_state(), "task": {"rng": task_rng.bit_generator.state},
             "loop": {"dev_history": [{"step": 2, "accuracy": 0.5, "num_examples": 40}], "window": {"a": 1.5}}}
    _save(tmp_path, 2, 0.5, state=state)
    loaded = checkpoint.load_state(tmp_path / "step-00000002")  # torch.load(..., weights_only=True)
    opt2 = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt2.load_state_dict(loaded["optimizer"])
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
    assert loaded["scheduler"]["last_epoch"] == 1 and loaded["scaler"]["scale"] == 65536.0
    rng2 = np.random.default_rng(0)
    rng2.bit_generator.state = loaded["task"]["rng"]
    assert rng2.random() == task_rng.random()
    assert loaded["loop"] == state["loop"]


def test_rng_states_are_restored_exactly():
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.normal()  # leaves a cached gaussian in NumPy's legacy state
    saved = checkpoint.rng_state()
    expected = (random.random(), np.random.normal(), torch.rand(3), torch.nn.functional.dropout(torch.ones(8), 0.5))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    checkpoint.set_rng_state(saved)
    got = (random.random(), np.random.normal(), torch.rand(3), torch.nn.functional.dropout(torch.ones(8), 0.5))
    assert got[0] == expected[0] and got[1] == expected[1]
    assert torch.equal(got[2], expected[2]) and torch.equal(got[3], expected[3])


class _Gadget:
    pass


def test_load_refuses_code_and_names_broken_files(tmp_path):
    ckpt = tmp_path / "step-00000001"
    ckpt.mkdir()
    torch.save({"x": _Gadget()}, ckpt / checkpoint.STATE_FILE)  # a pickle that would run code on load
    with pytest.raises(CheckpointError, match=r"cannot load '.*training_state.pt' \(UnpicklingError"):
        checkpoint.load_state(ckpt)
    (ckpt / checkpoint.STATE_FILE).write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(CheckpointError, match="training_state.pt"):
        checkpoint.load_state(ckpt)
    with pytest.raises(CheckpointError, match="has no training_state.pt"):
        checkpoint.load_state(tmp_path)


def test_model_weights_load_in_place_and_must_fit(tiny_model_dir, tmp_path):
    from transformers import BertForSequenceClassification

    model = BertForSequenceClassification.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    model.save_pretrained(tmp_path / "m")
    fresh = BertForSequenceClassification.from_pretrained(tiny_model_dir)
    params_before = [id(p) for p in fresh.parameters()]
    checkpoint.load_model_weights(fresh, tmp_path / "m")
    assert [id(p) for p in fresh.parameters()] == params_before  # an optimizer built on them stays valid
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    with pytest.raises(CheckpointError, match="do not fit the model"):
        checkpoint.load_model_weights(torch.nn.Linear(2, 2), tmp_path / "m")
    with pytest.raises(CheckpointError, match="are missing"):
        checkpoint.load_model_weights(fresh, tmp_path)


# ----------------------------------------------------------------------------- run folder decisions

def _cfg(out: Path, **kw):
    return build_config("text_classification", None, {"output_dir": str(out), **kw})


def _unfinished_run(out: Path, **kw) -> Path:
    out.mkdir(parents=True)
    save_config(_cfg(out, **kw), out / "config.yaml")
    _save(out / "checkpoints", 6, 0.5)
    return out / "checkpoints" / "step-00000006"


def test_run_folder_fresh_finished_and_foreign(tmp_path):
    assert prepare_run_dir(_cfg(tmp_path / "new")) == (tmp_path / "new", None)
    (tmp_path / "empty").mkdir()
    assert prepare_run_dir(_cfg(tmp_path / "empty"))[1] is None
    done = tmp_path / "done"
    _unfinished_run(done)
    (done / "results.json").write_text("{}")
    with pytest.raises(ConfigError, match="already holds a finished run.*--overwrite true"):
        prepare_run_dir(_cfg(done))
    with pytest.raises(ConfigError, match="already holds a finished run"):
        prepare_run_dir(_cfg(done, **{"checkpoint.resume": "true"}))
    assert prepare_run_dir(_cfg(done, overwrite="true")) == (done, None)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    (other / "metrics.jsonl").write_text('{"step": 10}\n')
    with pytest.raises(ConfigError, match=r"holds another run's files \(metrics.jsonl, notes.txt\) and no checkpoint"):
        prepare_run_dir(_cfg(other))
    with pytest.raises(ConfigError, match="--checkpoint.resume: output folder .* holds no checkpoint to resume from"):
        prepare_run_dir(_cfg(other, **{"checkpoint.resume": "true"}))
    with pytest.raises(ConfigError, match="holds no checkpoint to resume from"):
        prepare_run_dir(_cfg(tmp_path / "nothing", **{"checkpoint.resume": "true"}))
    # what a run that failed before its first step leaves does not block the next attempt
    failed = tmp_path / "failed"
    failed.mkdir()
    save_config(_cfg(failed), failed / "config.yaml")
    (failed / "tensorboard").mkdir()
    assert prepare_run_dir(_cfg(failed, **{"train.lr": "1"})) == (failed, None)


def test_saved_config_drops_one_off_requests(tmp_path):
    """A run started with --overwrite true or resumed with --checkpoint.resume true records neither in
    config.yaml, so the file used again as --config cannot delete a finished run or demand a checkpoint."""
    for request in ({"overwrite": "true"}, {"checkpoint.resume": "true"}):
        cfg = _cfg(tmp_path / "run", **request, **{"train.lr": "1e-3"})
        assert cfg.overwrite or cfg.checkpoint.resume
        save_config(cfg, tmp_path / "config.yaml")
        again = build_config("text_classification", str(tmp_path / "config.yaml"), {})
        assert not again.overwrite and not again.checkpoint.resume
        assert again.train.lr == 1e-3 and again.output_dir == str(tmp_path / "run")


def test_run_folder_unfinished_resumes_only_with_the_same_options(tmp_path):
    out = tmp_path / "run"
    last = _unfinished_run(out, **{"train.lr": "1e-3"})
    assert prepare_run_dir(_cfg(out, **{"train.lr": "1e-3"})) == (out, last)  # auto-resume
    # options that do not change what is trained may differ
    assert prepare_run_dir(_cfg(out, **{"train.lr": "1e-3", "report_to": "none",
                                        "checkpoint.keep_top_k": "3"}))[1] == last
    with pytest.raises(ConfigError, match=r"with other options: train.lr: 0.001 -> 0.002.*--checkpoint.resume true"):
        prepare_run_dir(_cfg(out, **{"train.lr": "2e-3"}))
    assert prepare_run_dir(_cfg(out, **{"train.lr": "2e-3", "checkpoint.resume": "true"}))[1] == last
    with pytest.raises(ConfigError, match=r"unfinished run \(latest checkpoint: step 6\); pass --checkpoint.resume"):
        prepare_run_dir(_cfg(out, **{"train.lr": "1e-3", "checkpoint.auto_resume": "false"}))


def test_checkpoint_options_are_validated():
    with pytest.raises(ConfigError, match="checkpoint.every_steps must be >= 1"):
        build_config("text_classification", None, {"checkpoint.every_steps": "0"})
    with pytest.raises(ConfigError, match="checkpoint.keep_top_k must be >= 1"):
        build_config("text_classification", None, {"checkpoint.keep_top_k": "0"})
    with pytest.raises(ConfigError, match="contradict each other"):
        build_config("text_classification", None, {"checkpoint.resume": "true", "overwrite": "true",
                                                   "output_dir": "x"})
    with pytest.raises(ConfigError, match="--checkpoint.resume needs --output_dir"):
        build_config("text_classification", None, {"checkpoint.resume": "true"})
    with pytest.raises(ConfigError, match="train.max_nonfinite_steps must be >= 1"):
        build_config("text_classification", None, {"train.max_nonfinite_steps": "0"})
    assert build_config("text_classification", None, {"train.max_nonfinite_steps": "none"}).train.max_nonfinite_steps \
        is None


# ----------------------------------------------------------------------------- streams and logs

def test_batch_streams_shard_the_single_process_batches():
    one = BatchStream(10, 4, seed=3)
    ranks = [BatchStream(10, 2, seed=3, rank=r, world=2) for r in range(2)]
    for _ in range(7):  # crosses epoch boundaries
        assert next(one) == next(ranks[0]) + next(ranks[1])
    resumed = BatchStream(10, 2, seed=3, rank=1, world=2)
    resumed.load_state_dict(ranks[1].state_dict())
    assert [next(resumed) for _ in range(5)] == [next(ranks[1]) for _ in range(5)]


def test_resumed_logs_continue_without_gap_or_repeat(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    first = MetricsLogger(tmp_path, tensorboard=True, enabled=True)
    for step in range(1, 6):
        first.log(step, {"train/loss": float(step)})
    assert first.lines == 5
    # killed after step 5; the checkpoint was at step 3, when metrics.jsonl had 3 lines. A resumed run
    # starts in a later second: event files are named <seconds>.<host>.<pid>.<writer count> and read in
    # name order, so two writers of one process in one second would be read in the order of their
    # counts as text (".10" before ".9" once a test session has made ten writers)
    time.sleep(1.1)
    second = MetricsLogger(tmp_path, tensorboard=True, enabled=True, resume_step=3, keep_lines=3)
    assert second.lines == 3
    for step in range(4, 7):
        second.log(step, {"train/loss": 10.0 * step})
    second.close()
    first.close()
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(d["step"], d["train/loss"]) for d in lines] == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 40.0), (5, 50.0),
                                                             (6, 60.0)]
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("train/loss")] == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 40.0),
                                                                       (5, 50.0), (6, 60.0)]
