"""Tasks: each says how to load data, build a model, collate, compute losses and evaluate.

The registry is a plain dict from task name to a factory; ``configs/<name>.yaml`` holds the task's
defaults.
"""

from __future__ import annotations

from typing import Any, Callable


def _text_classification() -> Any:
    from tasks.text_classification import TextClassificationTask

    return TextClassificationTask()


def _squad_v2() -> Any:
    from tasks.qa import QATask

    return QATask()


TASKS: dict[str, Callable[[], Any]] = {
    "imdb": _text_classification,
    "text_classification": _text_classification,
    "squad_v2": _squad_v2,
}


def get_task(name: str) -> Any:
    if name not in TASKS:
        raise ValueError(f"unknown task '{name}': choose one of {sorted(TASKS)}")
    return TASKS[name]()
