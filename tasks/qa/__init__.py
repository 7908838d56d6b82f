"""Extractive QA with unanswerable questions (``--task squad_v2``): ``task.py`` the task, ``data.py``
the SQuAD file, its split by article and tokenised windows, ``model.py`` the reader (span and
answerability heads), ``postprocess.py`` answers from logits, ``metric.py`` the official SQuAD 2.0
scores, ``synthetic.py`` and ``start.py`` the QA-shaped start built from unlabelled text
(``uda-qa-start``), ``config.py`` the ``--qa.*`` section."""

from tasks.qa.config import SECTIONS
from uda.task import register_task


def _make():
    from tasks.qa.task import QATask

    return QATask()


register_task("squad_v2", _make, SECTIONS)
