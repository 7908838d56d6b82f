"""The evaluation path both extractive readers share (``--task squad_v2`` and ``--task passages``).

A prediction is a dict with at least ``id``, ``span_text`` (the answer when the question is answered)
and ``no_answer_score`` (higher: more likely unanswerable; +inf without any valid span). The final
answer is "" when the no-answer score is above the threshold (:func:`tasks.common.spans.decide`).
An evaluation of a split:

1. the reader predicts the split's questions and, where it needs them, the dev split's with the same
   model (the single-passage reader: :func:`read_windows`);
2. the no-answer threshold (:func:`no_answer_threshold`): the configured one or, fitted on dev, the
   one that maximises the dev F1 of the dev predictions; on the dev split itself, the reader chooses
   between fitting on its own predictions and the configured one;
3. the scores: the official SQuAD 2.0 numbers of the final answers (:func:`answer_metrics`), the
   reader's own diagnostics, then the ROC AUC of its has-answer score, the threshold and the number
   of questions (:func:`finish_metrics`);
4. predictions_<split>.jsonl of the split, and of dev when it was predicted (:func:`write_prediction_lines`).

:func:`evaluate_predictions` runs steps 2 to 4 for a :class:`Reader`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol, Sequence

import numpy as np

from tasks.common.qa_reader import model_inputs
from tasks.common.spans import decide, postprocess
from tasks.common.squad_metric import roc_auc, squad_v2_metrics
from tasks.common.windows import collate_features
from uda.evaluation import length_sorted_batches, run_inference


class Reader(Protocol):
    """What :func:`evaluate_predictions` asks of a reader task."""

    def fit_threshold(self, examples: Sequence[dict], preds: Sequence[dict]) -> float:
        """The no-answer threshold that maximises F1 on these (dev) questions."""

    def score(self, examples: Sequence[dict], preds: Sequence[dict], threshold: float) -> dict[str, float]:
        """The split's metrics at ``threshold``."""

    def write_predictions(self, out_dir: Path, split: str, examples: Sequence[dict], preds: Sequence[dict],
                          threshold: float) -> None:
        """The split's per-question prediction files in ``out_dir``."""


# ----------------------------------------------------------------------------- predicting

def read_windows(model: Any, tokenizer: Any, examples: Sequence[dict], features: Sequence[dict], qa: Any,
                 accelerator: Any, batch_size: int) -> list[dict]:
    """Post-processed predictions (tasks/common/spans.py), one per question, in order, of a single-passage
    reader (tasks/common/qa_reader.py) over the windows ``features`` of ``examples`` (build_features,
    without labels). ``qa``: a squad_v2 ``qa`` section (n_best, max_answer_length, the null weights)."""
    batches = length_sorted_batches([len(f["input_ids"]) for f in features], batch_size)

    def collate(indices: list[int]) -> dict:
        return model_inputs(collate_features(tokenizer, [features[i] for i in indices], with_labels=False))

    def forward(batch: dict) -> dict:
        out = model(**batch)
        return {"start_logits": out.start_logits.float(), "end_logits": out.end_logits.float(),
                "answerability_logits": out.answerability_logits.float()}

    indices, outputs = run_inference(forward, batches, collate, accelerator)
    rows = np.argsort(indices)  # row of feature i (indices is a permutation of the features)
    arrays = {k: v.numpy()[rows] for k, v in outputs.items()}
    return postprocess(examples, features, arrays, qa.n_best, qa.max_answer_length, qa.null_span_weight,
                       qa.null_answerability_weight)


# ----------------------------------------------------------------------------- threshold, scores, files

def no_answer_threshold(split: str, examples: Sequence[dict], preds: Sequence[dict], dev_examples: Sequence[dict],
                        dev_preds: Optional[Sequence[dict]], fit: Callable[[Sequence[dict], Sequence[dict]], float],
                        configured: float, fit_on_dev: bool, fit_dev_on_itself: bool) -> tuple[float, bool]:
    """(threshold, whether it was fitted). Without ``fit_on_dev``: ``configured``. On the dev split:
    ``fit(examples, preds)`` with ``fit_dev_on_itself``, else ``configured``. On another split:
    ``fit(dev_examples, dev_preds)`` when there are dev predictions, else ``configured``."""
    if not fit_on_dev:
        return configured, False
    if split == "dev":
        return (fit(examples, preds), True) if fit_dev_on_itself else (configured, False)
    if dev_preds:
        return fit(dev_examples, dev_preds), True
    return configured, False


def evaluate_predictions(reader: Reader, split: str, examples: Sequence[dict], preds: Sequence[dict],
                         dev_examples: Sequence[dict], dev_preds: Optional[Sequence[dict]], *, null_threshold: float,
                         fit_on_dev: bool, fit_dev_on_itself: bool, out_dir: Any = None,
                         write: bool = True) -> tuple[dict[str, float], float, bool]:
    """The split's metrics at its no-answer threshold (:func:`no_answer_threshold`), and, when ``out_dir``
    is given and ``write`` (the main process), its prediction files and those of dev (``dev_preds``: the
    dev predictions of the same model, None or empty when not made). Returns (metrics, threshold, whether
    it was fitted)."""
    threshold, fitted = no_answer_threshold(split, examples, preds, dev_examples, dev_preds, reader.fit_threshold,
                                            null_threshold, fit_on_dev, fit_dev_on_itself)
    metrics = reader.score(examples, preds, threshold)
    if out_dir is not None and write:
        reader.write_predictions(Path(out_dir), split, examples, preds, threshold)
        if dev_preds:
            reader.write_predictions(Path(out_dir), "dev", dev_examples, dev_preds, threshold)
    return metrics, threshold, fitted


def answer_metrics(gold: Mapping[str, Sequence[str]], preds: Sequence[dict], threshold: float) -> dict:
    """The official SQuAD 2.0 numbers of the final answers at ``threshold`` (``gold``: question id -> gold
    answer texts, empty when unanswerable), with ``best_exact``/``best_f1`` over the no-answer scores."""
    final = {p["id"]: decide(p, threshold) for p in preds}
    return squad_v2_metrics(gold, final, na_scores={p["id"]: p["no_answer_score"] for p in preds},
                            span_preds={p["id"]: p["span_text"] for p in preds})


def finish_metrics(metrics: dict, gold: Mapping[str, Sequence[str]], preds: Sequence[dict], threshold: float,
                   auc_name: str, has_answer_scores: Sequence[float]) -> dict[str, float]:
    """``metrics`` plus ``auc_name``: the ROC AUC in % of ``has_answer_scores`` (one per prediction, higher:
    more likely answerable) for answerable against unanswerable questions (50 = chance; left out unless
    both kinds are present), ``null_threshold`` and ``num_examples``; every value a float."""
    auc = roc_auc(list(has_answer_scores), [bool(gold[p["id"]]) for p in preds])
    if auc is not None:
        metrics[auc_name] = 100.0 * auc
    metrics["null_threshold"] = float(threshold)
    metrics["num_examples"] = len(preds)
    return {k: float(v) for k, v in metrics.items()}


def write_prediction_lines(out_dir: Path, split: str, lines: Iterable[dict]) -> None:
    """predictions_<split>.jsonl in ``out_dir`` (made when missing): one JSON line per question."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / f"predictions_{split}.jsonl").open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
