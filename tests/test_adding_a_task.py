"""docs/adding_a_task.md's worked example, run as the page shows it: its task file and defaults file are
written out, the task registers itself, and the Python snippet trains it (a tiny model, a few steps)."""

import re
import sys

from tests.conftest import REPO

PAGE = REPO / "docs" / "adding_a_task.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


def test_the_worked_example_trains(tiny_model_dir, tiny_text_data, tmp_path, monkeypatch, one_thread):
    task_code, run_code = blocks("python")
    (defaults,) = blocks("yaml")
    (tmp_path / "my_task.py").write_text(task_code, encoding="utf-8")
    (tmp_path / "my_task.yaml").write_text(defaults, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_task", raising=False)
    import uda.task

    monkeypatch.setattr(uda.task, "_TASKS", dict(uda.task._TASKS))  # the registration ends with the test
    mine = '{"data.path": "my_data", "output_dir": "runs/mine"}'
    assert mine in run_code
    overrides = (f'{{"data.path": r"{tiny_text_data}", "output_dir": r"{tmp_path / "run"}", '
                 f'"model.name_or_path": r"{tiny_model_dir}", "model.max_length": 32, "train.max_steps": 4, '
                 f'"train.eval_every": 2, "train.batch_size": 4, "train.warmup_steps": 1, "report_to": "none", '
                 f'"augment.p": 0.3}}')
    scope: dict = {}
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    exec(compile(run_code.replace(mine, overrides), str(PAGE), "exec"), scope)
    results = scope["results"]
    assert 0.0 <= results["test"]["accuracy"] <= 1.0
    assert (tmp_path / "run" / "results.json").is_file() and (tmp_path / "run" / "model" / "config.json").is_file()
    from uda.task import registered_tasks

    assert "jsonl_classification" in registered_tasks()
