"""Checkpoints ranked by several dev metrics (top-k by EM and by F1, their union kept, best_em and
best_f1 pointers), the every-N-minutes save with a fake clock, and exact resume of the passages task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.qa_fixtures import tiny_qa_model_dir, tiny_squad_file  # noqa: F401 (fixtures)
from tests.trainkit import metric_lines, model_dir, tiny_config, training_lines, weights  # noqa: F401 (fixture)
from uda import checkpoint

RANKINGS = {"best_em": "em", "best_f1": "f1"}


# one thread makes the tiny runs fast on a busy machine, and every run of a comparison uses it
pytestmark = pytest.mark.usefixtures("one_thread")


def _save(root: Path, step: int, em, f1, k: int, rankings=RANKINGS):
    return checkpoint.save(root, step, f1, k, lambda d: d.mkdir(), {"step": step}, metric_name="f1",
                           rankings=rankings, metrics={"em": em, "f1": f1})


def _names(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


def test_rankings_default_to_the_single_select_metric():
    assert checkpoint.rankings_for("accuracy", None) is None
    assert checkpoint.rankings_for("f1", ("f1",)) is None
    assert checkpoint.rankings_for("f1", ("em", "f1")) == RANKINGS
    assert checkpoint.rankings_for("HasAns_f1", ("em", "f1")) == {**RANKINGS, "best_HasAns_f1": "HasAns_f1"}


def test_top_k_by_em_and_by_f1_keeps_their_union_and_points_at_each_best(tmp_path):
    root = tmp_path / "checkpoints"
    #          step  em    f1
    history = [(1, 10.0, 30.0), (2, 40.0, 35.0), (3, None, None), (4, 20.0, 50.0), (5, 40.0, 45.0), (6, 5.0, 10.0)]
    for step, em, f1 in history:
        _save(root, step, em, f1, k=1)
    # best EM: step 2 (40, the earlier of a tie with 5); best F1: step 4; plus the latest (6)
    assert _names(root) == ["best_em", "best_f1", "latest", "step-00000002", "step-00000004", "step-00000006"]
    assert checkpoint.read_pointer(root, "best_em") == root / "step-00000002"
    assert checkpoint.read_pointer(root, "best_f1") == root / "step-00000004"
    assert checkpoint.read_pointer(root, "latest") == root / "step-00000006"
    assert checkpoint.best(root).step == 4  # the selected model: by the select metric (f1)
    assert checkpoint.best(root, "em").step == 2
    meta = json.loads((root / "step-00000002" / checkpoint.META_FILE).read_text())
    assert meta == {"step": 2, "metric": 35.0, "metric_name": "f1", "metrics": {"em": 40.0, "f1": 35.0}}

    root2 = tmp_path / "k2"
    for step, em, f1 in history:
        _save(root2, step, em, f1, k=2)
    # top-2 EM {2, 5}, top-2 F1 {4, 5}, latest 6
    assert [c.step for c in checkpoint.list_checkpoints(root2)] == [2, 4, 5, 6]


def test_switching_rankings_replaces_the_pointers(tmp_path):
    root = tmp_path / "c"
    checkpoint.save(root, 1, 0.5, 1, lambda d: d.mkdir(), {"step": 1})  # the default: one ranking, "best"
    assert _names(root) == ["best", "latest", "step-00000001"]
    _save(root, 2, 30.0, 60.0, k=3)
    assert _names(root) == ["best_em", "best_f1", "latest", "step-00000002"]  # step 1 has no em/f1: pruned
    checkpoint.write_pointers(root)
    assert _names(root) == ["best", "latest", "step-00000002"]


def test_rescore_fills_a_ranking_metric_from_the_dev_history(tmp_path):
    root = tmp_path / "c"
    _save(root, 2, 30.0, 60.0, k=3)
    _save(root, 4, 50.0, 40.0, k=3)
    rankings = {**RANKINGS, "best_HasAns_f1": "HasAns_f1"}
    history = {2: {"em": 30.0, "f1": 60.0, "HasAns_f1": 20.0}, 4: {"em": 50.0, "f1": 40.0, "HasAns_f1": 25.0}}
    changed = checkpoint.rescore(root, "HasAns_f1", {2: 20.0, 4: 25.0}, rankings, history)
    assert [c.step for c in changed] == [2, 4]
    assert checkpoint.read_pointer(root, "best_HasAns_f1") == root / "step-00000004"
    assert checkpoint.read_pointer(root, "best_f1") == root / "step-00000002"
    assert checkpoint.best(root).step == 4
    assert checkpoint.rescore(root, "HasAns_f1", {2: 20.0, 4: 25.0}, rankings, history) == []


# ----------------------------------------------------------------------------- every N minutes

class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class TimedTask:
    """The real task; each labelled batch takes ``seconds`` on the fake clock."""

    def __init__(self, inner, clock: FakeClock, seconds: float) -> None:
        self.inner, self.clock, self.seconds = inner, clock, seconds

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def collate_labeled(self, examples):
        self.clock.t += self.seconds
        return self.inner.collate_labeled(examples)


def _train(cfg, task, clock=None):
    from accelerate.state import AcceleratorState

    from uda.train import train

    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        return train(cfg, task, clock=clock) if clock is not None else train(cfg, task)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


@pytest.mark.parametrize("minutes,expected", [(1.0, [3, 6, 8]), (None, [8])])
def test_a_checkpoint_every_n_minutes_of_training_with_a_fake_clock(model_dir, tiny_text_data, tmp_path,  # noqa: F811
                                                                    monkeypatch, minutes, expected):
    from uda.task import get_task

    saved = []
    real_save = checkpoint.save

    def recording_save(root, step, *args, **kwargs):
        saved.append(step)
        return real_save(root, step, *args, **kwargs)

    monkeypatch.setattr(checkpoint, "save", recording_save)
    clock = FakeClock()
    cfg = tiny_config(model_dir, tiny_text_data, tmp_path / "run", **{
        "train.max_steps": 8, "train.eval_every": 8, "checkpoint.every_minutes": "none" if minutes is None else minutes,
        "uda.lambda_u": 0})
    # 25 s a step: 75 s have passed after step 3 (a save, the clock restarts), and again after step 6
    _train(cfg, TimedTask(get_task("text_classification"), clock, 25.0), clock)
    assert saved == expected


def test_every_minutes_is_validated():
    from uda.config import ConfigError, build_config

    with pytest.raises(ConfigError, match="checkpoint.every_minutes must be > 0"):
        build_config("text_classification", None, {"checkpoint.every_minutes": "0"})
    assert build_config("text_classification", None, {"checkpoint.every_minutes": "2.5"}).checkpoint.every_minutes == 2.5


# ----------------------------------------------------------------------------- exact resume of the passages task

from tests.test_resume import Interrupted, InterruptedTask as _Interrupted  # noqa: E402


def InterruptedTask(at: int) -> _Interrupted:  # noqa: N802 (reads as the class it makes)
    return _Interrupted(at, "passages")


def passages_options(model_dir, data_file, out_dir, **extra):
    opts = {"model.name_or_path": str(model_dir), "data.path": str(data_file), "data.num_labeled": 16,
            "data.dev_size": 12, "model.max_length": 64, "passages.test_articles": 2, "passages.dev_articles": 1,
            "passages.labeled_articles": 2, "passages.retrieve_k": 6, "passages.train_passages": 3,
            "passages.train_top_k": 6, "passages.predict_passages": 4, "passages.unsup_passages": 2,
            "passages.max_question_length": 12, "train.batch_size": 4, "train.lr": 1e-3, "train.warmup_steps": 1,
            "train.eval_every": 4, "train.log_every": 1, "train.eval_batch_size": 16, "uda.unsup_ratio": 1,
            "augment.p": 0.3, "train.max_steps": 8, "checkpoint.every_steps": 3, "checkpoint.keep_top_k": 1,
            "output_dir": str(out_dir), "report_to": "none"}
    opts.update(extra)
    return opts


def test_passages_resumed_run_equals_uninterrupted_run(tiny_qa_model_dir, tiny_squad_file, tmp_path):  # noqa: F811
    from uda.config import build_config
    from uda.task import get_task

    straight, broken = tmp_path / "straight", tmp_path / "broken"
    _train(build_config("passages", None, passages_options(tiny_qa_model_dir, tiny_squad_file, straight)),
           get_task("passages"))
    with pytest.raises(Interrupted):  # dies at the start of step 6; the latest checkpoint is step 4
        _train(build_config("passages", None, passages_options(tiny_qa_model_dir, tiny_squad_file, broken)),
               InterruptedTask(at=6))
    assert checkpoint.latest(broken / "checkpoints").step == 4
    results = _train(build_config("passages", None, passages_options(tiny_qa_model_dir, tiny_squad_file, broken)),
                     get_task("passages"))
    assert results["resumed_at_steps"] == [4]
    a, b = training_lines(straight), training_lines(broken)
    assert [line["step"] for line in b] == list(range(1, 9))
    assert any("unsup/loss" in line for line in b)
    for la, lb in zip(a, b):
        assert lb == pytest.approx(la, rel=1e-6, abs=1e-9)
    wa = weights(straight / "checkpoints" / "step-00000008" / "model")
    wb = weights(broken / "checkpoints" / "step-00000008" / "model")
    assert max(float((wa[k] - wb[k]).abs().max()) for k in wa) <= 1e-6
    straight_results = json.loads((straight / "results.json").read_text())
    assert results["dev_history"] == straight_results["dev_history"]
    assert results["test"] == straight_results["test"]
    # the per-metric pointers, as an uninterrupted run leaves them
    root = broken / "checkpoints"
    assert {p.name for p in root.iterdir() if p.is_file()} == {"best_em", "best_f1", "latest"}
    history = {h["step"]: h for h in results["dev_history"]}
    best_f1 = max(history, key=lambda s: (history[s]["f1"], -s))
    assert checkpoint.read_pointer(root, "best_f1").name == checkpoint.name_for(best_f1)
    assert results["selected_model"] == {"step": best_f1, "by": "dev/f1"}
    assert [line["step"] for line in metric_lines(broken) if "dev/em" in line] == [4, 8]
