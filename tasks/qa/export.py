"""A squad_v2 run's reader for transformers' own loaders and ``pipeline()``.

transformers 5 has no built-in question-answering pipeline, and its ``AutoModelForQuestionAnswering``
reads a saved reader as a plain span model (the ``answerability.*`` weights skipped, no no-answer
decision). So :meth:`QATask.save <tasks.qa.task.QATask.save>` also writes :data:`MODELING_FILE` (the
source is ``tasks/qa/modeling_uda_qa.py``, its span model class set to the saved one's) and registers
in config.json:

* ``auto_map``: ``AutoModelForQuestionAnswering`` -> ``UdaQAWithAnswerability`` (span model + answerability
  head under the saved weight names), and ``architectures``;
* ``custom_pipelines``: ``question-answering`` -> ``UdaQuestionAnsweringPipeline``, the run's windowing,
  n-best search and no-answer decision;
* ``uda_qa`` (``EXPORT_KEY``): the run's settings (model.max_length, qa.doc_stride,
  qa.max_question_length and the question marker, qa.max_answer_length, qa.n_best, the null weights) and
  ``null_threshold``: the no-answer threshold the run applied to its test split (fitted on dev; results.json
  ``test.null_threshold``). Only the run's final ``model/`` has it: a checkpoint is saved before the test
  evaluation, and its pipeline asks for ``threshold=``.

So ``pipeline("question-answering", model=RUN/model, trust_remote_code=True)`` answers as the run did, and
without ``trust_remote_code`` that call is an error. The library's own loaders (``load_qa_model``,
``build_qa_model``, checkpoints: tasks/common/qa_reader.py) ignore these entries (``strip_export`` there).
The span search of one window is the library's own (:func:`tasks.common.spans.feature_candidates`), its
source written into the exported file in place of the line that imports it.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from tasks.common.qa_reader import EXPORT_KEY, HEAD_CONFIG, MODEL_CLASS
from tasks.common.spans import feature_candidates

MODELING_FILE = "modeling_uda_qa.py"
PIPELINE_CLASS = "UdaQuestionAnsweringPipeline"
_BASE_IMPORT = "from transformers import BertForQuestionAnswering as BaseForQuestionAnswering"
_SPANS_IMPORT = "from tasks.common.spans import feature_candidates  # noqa: E402 (uda: written out on export)"


def modeling_source(span_model_class_name: str) -> str:
    """The text of :data:`MODELING_FILE` for a span model of that transformers class, the library's span
    search written out in it."""
    src = (Path(__file__).with_name(MODELING_FILE)).read_text(encoding="utf-8")
    for line, text in ((_BASE_IMPORT, f"from transformers import {span_model_class_name} as BaseForQuestionAnswering"),
                       (_SPANS_IMPORT, inspect.getsource(feature_candidates).rstrip("\n"))):
        if src.count(line) != 1:
            raise RuntimeError(f"{MODELING_FILE} lost its line '{line}'")
        src = src.replace(line, text)
    return src


def write_qa_export(out: str | Path, span_model_class: type, settings: dict[str, Any]) -> bool:
    """Save :data:`MODELING_FILE` into ``out`` (a folder the reader's save_pretrained wrote) and register it
    and ``settings`` (:data:`EXPORT_KEY`) in its config.json. False, with a warning, when the span model's
    class is not one of transformers' own (a model loaded with remote code): the folder then loads whole
    only with :func:`tasks.common.qa_reader.load_qa_model`."""
    from tasks.common.export import ship_model_code

    out = Path(out)
    if not ship_model_code(out, span_model_class, MODELING_FILE, modeling_source(span_model_class.__name__),
                           "AutoModelForQuestionAnswering", MODEL_CLASS, "question-answering", PIPELINE_CLASS,
                           {EXPORT_KEY: settings}, "tasks.common.qa_reader.load_qa_model"):
        return False
    head = out / HEAD_CONFIG  # the reader's own note
    if head.is_file():
        note = json.loads(head.read_text(encoding="utf-8"))
        note["load"] = ("transformers.pipeline('question-answering', model=FOLDER, trust_remote_code=True), or "
                        "tasks.common.qa_reader.load_qa_model(FOLDER)")
        head.write_text(json.dumps(note, indent=2), encoding="utf-8")
    return True
