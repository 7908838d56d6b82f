"""A reader over several retrieved passages (``--task passages``): ``task.py`` the task, ``data.py``
retrieved-passage records, ``retrieval.py`` BM25 over a SQuAD file's paragraphs, ``model.py`` the
reader (span, relevance and no-answer heads), ``postprocess.py`` answers and metrics, ``config.py``
the ``--passages.*`` section."""

from tasks.passages.config import SECTIONS
from uda.task import register_task


def _make():
    from tasks.passages.task import PassagesTask

    return PassagesTask()


register_task("passages", _make, SECTIONS)
