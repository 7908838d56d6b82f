"""Text classification (``--task text_classification``, and ``--task imdb`` with IMDB's defaults):
``task.py`` the task, ``data.py`` files, hub data and the labelled/unlabelled split, ``model.py`` the
classifiers, ``config.py`` its config sections."""

from tasks.text.config import SECTIONS
from uda.task import register_task


def _make():
    from tasks.text.task import TextClassificationTask

    return TextClassificationTask()


register_task("imdb", _make, SECTIONS)
register_task("text_classification", _make, SECTIONS)
