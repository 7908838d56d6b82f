"""Extractive QA with unanswerable questions (``--task squad_v2``): ``task.py`` the task, ``data.py``
its questions (a SQuAD file or the hub) and their split, ``export.py`` and ``modeling_uda_qa.py`` the
reader for transformers' ``pipeline()``, ``config.py`` the ``--qa.*`` section. What it shares with the
multi-passage reader is in tasks/common/: ``squad.py`` (the SQuAD file and the split by article),
``windows.py`` (tokenised windows), ``qa_reader.py`` (the reader: span and answerability heads),
``spans.py`` (answers from logits), ``squad_metric.py`` (the official SQuAD 2.0 scores) and
``reading.py`` (the evaluation path). The QA-shaped start built from unlabelled text
(``--task qa_start``): ``synthetic.py`` its questions, ``start_texts.py`` the paragraphs they come from,
``start_task.py`` the task, ``start_config.py`` the ``--qa_start.*`` section, ``start.py`` the
``uda-qa-start`` command."""

from tasks.qa.config import SECTIONS
from tasks.qa.start_config import SECTIONS as START_SECTIONS
from uda.task import register_task


def _make():
    from tasks.qa.task import QATask

    return QATask()


def _make_start():
    from tasks.qa.start_task import QAStartTask

    return QAStartTask()


register_task("squad_v2", _make, SECTIONS)
register_task("qa_start", _make_start, START_SECTIONS)
