"""Tasks: each says how to load data, build a model, collate, compute losses and evaluate.

Importing this package registers the built-in tasks with ``uda.task`` (the registry the core owns),
each with its config sections; ``configs/<name>.yaml`` holds a task's defaults. Factories import the
task's module only when a task is made, so listing tasks and parsing options stay cheap.
"""

from __future__ import annotations

from typing import Any

from tasks import passages_config, qa_config, text_config
from uda.task import get_task, register_task  # noqa: F401 (re-exported: tasks.get_task)


def _text_classification() -> Any:
    from tasks.text_classification import TextClassificationTask

    return TextClassificationTask()


def _squad_v2() -> Any:
    from tasks.qa import QATask

    return QATask()


def _passages() -> Any:
    from tasks.passages import PassagesTask

    return PassagesTask()


register_task("imdb", _text_classification, text_config.SECTIONS)
register_task("text_classification", _text_classification, text_config.SECTIONS)
register_task("squad_v2", _squad_v2, qa_config.SECTIONS)
register_task("passages", _passages, passages_config.SECTIONS)
