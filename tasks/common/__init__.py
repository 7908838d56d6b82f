"""What several tasks share: ``heads.py`` (a transformers model with heads of our own, saved under the
model's key names), ``export.py`` (shipping model code beside saved weights), ``mlm.py`` and
``contrastive.py`` (optional encoder stages before training). What the two extractive readers (squad_v2
and passages) share: ``squad.py`` (SQuAD 2.0 files and the few-label split by article), ``windows.py``
(tokenised (question, context) windows and the consistency views), ``qa_reader.py`` (the single-passage
reader and the loaders of span readers), ``spans.py`` (logits to answers, the no-answer decision and
its threshold), ``squad_metric.py`` (the official SQuAD 2.0 metric) and ``reading.py`` (the evaluation
path: threshold, scores, prediction files)."""
