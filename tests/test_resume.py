"""Exact resume: 2N steps straight == N steps, interruption, resume, N more (same weights, optimizer
state, logged losses and dev metrics); and a run SIGKILLed in the middle of a save resumes from the
previous checkpoint and finishes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from tasks import get_task
from tests.conftest import REPO
from tests.trainkit import metric_lines, model_dir, run, tiny_config, training_lines, weights  # noqa: F401 (fixture)
from uda import checkpoint


# one thread makes the tiny runs fast on a busy machine, and every run of a comparison uses it
pytestmark = pytest.mark.usefixtures("one_thread")


class Interrupted(Exception):
    pass


class InterruptedTask:
    """The real task, except that the run dies when it asks for labelled batch number ``at``."""

    def __init__(self, at: int, task: str = "text_classification") -> None:
        self.inner, self.at, self.calls = get_task(task), at, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def collate_labeled(self, examples):
        self.calls += 1
        if self.calls == self.at:
            raise Interrupted(f"killed at step {self.at}")
        return self.inner.collate_labeled(examples)


def _options():
    # 8 steps; checkpoints at 3 (every_steps), 4 (evaluation), 6 and 8; one log line per step
    return {"train.max_steps": 8, "train.warmup_steps": 1, "train.eval_every": 4, "train.log_every": 1,
            "checkpoint.every_steps": 3, "report_to": "tensorboard"}


def _tb_scalars(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_resumed_run_equals_uninterrupted_run(model_dir, tiny_text_data, tmp_path):
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    run(tiny_config(model_dir, tiny_text_data, straight, **_options()))

    with pytest.raises(Interrupted):  # dies at the start of step 6: step 5 is logged, the latest checkpoint is 4
        run(tiny_config(model_dir, tiny_text_data, broken, **_options()), InterruptedTask(at=6))
    assert checkpoint.latest(broken / "checkpoints").step == 4
    assert [line["step"] for line in training_lines(broken)] == [1, 2, 3, 4, 5]
    results = run(tiny_config(model_dir, tiny_text_data, broken, **_options()))  # auto-resume
    assert results["resumed_at_steps"] == [4]
    # the CPU time of the loop adds up over the attempts (the first one's is in its checkpoint)
    assert results["cpu_seconds"] > 0

    # the same logged losses (and every other training scalar), each step once
    a, b = training_lines(straight), training_lines(broken)
    assert [line["step"] for line in b] == list(range(1, 9))
    for la, lb in zip(a, b):
        assert lb == pytest.approx(la, rel=1e-6, abs=1e-9)
    assert [line for line in metric_lines(broken) if "dev/accuracy" in line] == \
        [line for line in metric_lines(straight) if "dev/accuracy" in line]
    tb_a, tb_b = _tb_scalars(straight, "train/loss"), _tb_scalars(broken, "train/loss")
    assert [s for s, _ in tb_b] == list(range(1, 9))  # no gap, no repeat
    assert [v for _, v in tb_b] == pytest.approx([v for _, v in tb_a], rel=1e-6)

    # the same final weights and optimizer state
    wa = weights(straight / "checkpoints" / "step-00000008" / "model")
    wb = weights(broken / "checkpoints" / "step-00000008" / "model")
    assert wa.keys() == wb.keys()
    max_diff = max(float((wa[k] - wb[k]).abs().max()) for k in wa)
    assert max_diff <= 1e-6, max_diff
    sa = checkpoint.load_state(straight / "checkpoints" / "step-00000008")
    sb = checkpoint.load_state(broken / "checkpoints" / "step-00000008")
    for pa, pb in zip(sa["optimizer"]["state"].values(), sb["optimizer"]["state"].values()):
        assert torch.allclose(pa["exp_avg_sq"], pb["exp_avg_sq"], rtol=1e-5, atol=1e-12)
    assert sa["streams"] == sb["streams"] and sa["scheduler"] == sb["scheduler"]
    straight_results = json.loads((straight / "results.json").read_text())
    assert results["dev_history"] == straight_results["dev_history"]
    assert results["selected_model"] == straight_results["selected_model"]
    assert results["test"] == straight_results["test"]
    print(f"resume vs straight: max |weight difference| {max_diff:.3g}; "
          f"losses identical: {[la['train/loss'] for la in a] == [lb['train/loss'] for lb in b]}")


class SignalledTask(InterruptedTask):
    """The real task; the process receives ``signals`` while it collates labelled batch number ``at``
    (as Ctrl-C or a scheduler's SIGTERM arrive in the middle of a step)."""

    def __init__(self, at: int, signals: tuple) -> None:
        super().__init__(at)
        self.signals = signals

    def collate_labeled(self, examples):
        self.calls += 1
        if self.calls == self.at:
            for sig in self.signals:
                signal.raise_signal(sig)
        return self.inner.collate_labeled(examples)


def test_sigterm_stops_after_the_step_with_its_checkpoint_and_the_rerun_finishes_alike(model_dir, tiny_text_data,
                                                                                       tmp_path):
    from uda.train import RunStopped

    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    expected = run(tiny_config(model_dir, tiny_text_data, straight, **_options()))
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(RunStopped) as info:  # step 5 is no checkpoint step (3, 4, 6 are): the stop saves it
        run(tiny_config(model_dir, tiny_text_data, stopped, **_options()), SignalledTask(5, (signal.SIGTERM,)))
    assert info.value.signum == signal.SIGTERM
    msg = str(info.value)
    assert "SIGTERM after step 5 of 8" in msg and "step-00000005" in msg and "same command again" in msg
    assert checkpoint.latest(stopped / "checkpoints").step == 5
    assert not (stopped / "results.json").exists()
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers  # put back
    results = run(tiny_config(model_dir, tiny_text_data, stopped, **_options()))
    assert results["resumed_at_steps"] == [5]
    assert [line["step"] for line in training_lines(stopped)] == list(range(1, 9))
    assert results["dev_history"] == expected["dev_history"] and results["test"] == expected["test"]


def test_a_second_ctrl_c_stops_at_once(model_dir, tiny_text_data, tmp_path):
    from uda.train import RunStopped

    out = tmp_path / "run"
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(KeyboardInterrupt) as info:
        run(tiny_config(model_dir, tiny_text_data, out, **_options()), SignalledTask(5, (signal.SIGINT, signal.SIGINT)))
    assert not isinstance(info.value, RunStopped)
    assert checkpoint.latest(out / "checkpoints").step == 4  # nothing saved for the step it was in
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers


def test_resume_with_another_select_metric_reranks_the_kept_checkpoints(model_dir, tiny_text_data, tmp_path):
    out = tmp_path / "run"
    opts = dict(_options(), **{"eval.select_metric": "accuracy", "checkpoint.keep_top_k": 3})
    with pytest.raises(Interrupted):  # checkpoints 3 and 4 (evaluated) exist
        run(tiny_config(model_dir, tiny_text_data, out, **opts), InterruptedTask(at=6))
    opts.update({"eval.select_metric": "macro_f1", "checkpoint.resume": True})
    results = run(tiny_config(model_dir, tiny_text_data, out, **opts))
    metas = [json.loads((c.path / checkpoint.META_FILE).read_text())
             for c in checkpoint.list_checkpoints(out / "checkpoints")]
    assert metas and all(m["metric_name"] == "macro_f1" for m in metas)
    f1 = {h["step"]: h["macro_f1"] for h in results["dev_history"]}
    for m in metas:
        assert m["metric"] == (pytest.approx(f1[m["step"]]) if m["step"] in f1 else None)
    best_step = max(f1, key=lambda s: (f1[s], -s))
    assert results["selected_model"] == {"step": best_step, "by": "dev/macro_f1"}


# Runs the training script with torch.save slowed down at the second checkpoint: it signals through a
# file that the save is under way, then waits to be killed.
_DRIVER = r"""
import sys, time, pathlib, torch
sys.path.insert(0, {repo!r}); sys.path.append({scripts!r})  # scripts/ last: its augment.py must not hide the package
real_save, calls = torch.save, []
def slow_save(obj, f, *a, **k):
    real_save(obj, f, *a, **k)
    if str(f).endswith("training_state.pt"):
        calls.append(f)
        if len(calls) == 2:
            pathlib.Path({marker!r}).write_text(str(f))
            time.sleep(600)
torch.save = slow_save
import train_uda
sys.exit(train_uda.main(sys.argv[1:]))
"""


def _script_args(model_dir, data_dir, out_dir):
    return ["--task", "text_classification", "--model.name_or_path", str(model_dir), "--data.path", str(data_dir),
            "--data.num_labeled", "20", "--data.dev_size", "40", "--model.max_length", "32",
            "--train.max_steps", "6", "--train.warmup_steps", "1", "--train.lr", "1e-3", "--train.batch_size", "4",
            "--train.eval_every", "2", "--train.log_every", "1", "--uda.unsup_ratio", "2",
            "--output_dir", str(out_dir), "--report_to", "none"]


def test_sigkill_during_save_keeps_previous_checkpoint(model_dir, tiny_text_data, tmp_path):
    out, marker = tmp_path / "run", tmp_path / "saving"
    driver = _DRIVER.format(repo=str(REPO), scripts=str(REPO / "scripts"), marker=str(marker))
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-c", driver, *_script_args(model_dir, tiny_text_data, out)],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.time() < deadline, "the second checkpoint save never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    root = out / "checkpoints"
    assert (root / ".tmp-step-00000004").is_dir()  # the save that was killed: never renamed into place
    latest = checkpoint.latest(root)
    assert latest.step == 2 and checkpoint.read_pointer(root, "latest") == latest.path
    state = checkpoint.load_state(latest.path)  # the previous checkpoint loads (weights_only)
    assert state["step"] == 2
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(latest.path / "model")  # a transformers folder
    checkpoint.load_model_weights(model, latest.path / "model")

    # the same command with --checkpoint.resume continues from step 2 and finishes
    results = run(tiny_config(model_dir, tiny_text_data, out, **{
        "train.max_steps": 6, "train.warmup_steps": 1, "train.eval_every": 2, "train.log_every": 1,
        "checkpoint.resume": "true"}))
    assert results["resumed_at_steps"] == [2]
    assert (out / "results.json").is_file()
    assert [h["step"] for h in results["dev_history"]] == [2, 4, 6]
    assert [line["step"] for line in training_lines(out)] == list(range(1, 7))
    assert not (root / ".tmp-step-00000004").exists()


def test_train_script_exits_143_on_sigterm_with_the_checkpoint_named(model_dir, tiny_text_data, tmp_path):
    out = tmp_path / "run"
    args = _script_args(model_dir, tiny_text_data, out)
    args[args.index("--train.max_steps") + 1] = "5000"
    args[args.index("--train.eval_every") + 1] = "5000"
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "train_uda.py"), *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not ((out / "metrics.jsonl").is_file() and (out / "metrics.jsonl").stat().st_size > 0):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    step = checkpoint.latest(out / "checkpoints").step
    assert 0 < step < 5000 and f"stopped: training stopped by SIGTERM after step {step} of 5000" in stderr


def test_the_same_command_without_output_dir_continues_after_ctrl_c(model_dir, tiny_text_data, tmp_path,  # noqa: F811
                                                                    monkeypatch, capsys):
    """The README's commands name no --output_dir: stopped with Ctrl-C and run again unchanged, a run continues
    from its checkpoint in the same runs/<task>-<time> folder and ends as an uninterrupted run does; a
    finished run's command starts a new folder."""
    from uda.train import RunStopped

    expected = run(tiny_config(model_dir, tiny_text_data, tmp_path / "straight", **_options()))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunStopped):
        run(tiny_config(model_dir, tiny_text_data, tmp_path, **{**_options(), "output_dir": "none"}),
            SignalledTask(5, (signal.SIGINT,)))
    assert "SIGINT: stopping after the step under way" in capsys.readouterr().err  # said at once
    folders = sorted((tmp_path / "runs").iterdir())
    assert len(folders) == 1 and checkpoint.latest(folders[0] / "checkpoints").step == 5
    results = run(tiny_config(model_dir, tiny_text_data, tmp_path, **{**_options(), "output_dir": "none"}))
    out = capsys.readouterr().out
    assert f"run folder: {folders[0].relative_to(tmp_path)}" in out and "tensorboard --logdir" in out
    assert sorted((tmp_path / "runs").iterdir()) == folders and results["resumed_at_steps"] == [5]
    assert results["dev_history"] == expected["dev_history"] and results["test"] == expected["test"]
    import time

    time.sleep(1.1)  # the next folder's name has another second
    run(tiny_config(model_dir, tiny_text_data, tmp_path, **{**_options(), "output_dir": "none"}))
    assert len(list((tmp_path / "runs").iterdir())) == 2  # a finished run is not continued: a new one
