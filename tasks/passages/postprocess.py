"""Multi-passage reader outputs -> ranked passages, spans, the final answer, and the reader metrics.

For one question with passages i = 1..M (padding passages excluded), relevance logits r_i, the
no-answer logit n, and start/end logits over each passage's tokens:

* Ranking: passages by r_i, highest first (ties: retrieval order). Selection probabilities are
  softmax([n, r_1..r_M]).
* Spans (:func:`tasks.qa.postprocess.feature_candidates`): in each of the top ``span_passages``
  passages, the ``n_best`` best start and end tokens among its context tokens are paired (end >=
  start, at most ``max_answer_length`` tokens), scored start + end logit.
* The answer span is the best span of the top-ranked passage (DPR). The no-answer score is
  n - max_i r_i = log p(no answer) - log p(top passage) under the selection softmax (+inf when the
  top passage has no valid span), and the final answer is "" when it is above the threshold (0:
  the no-answer option beats the top passage). The threshold maximising F1 on dev is fitted with
  :func:`tasks.qa.postprocess.fit_null_threshold` and applied unchanged to test.

Metrics over the answerable questions (gold answers non-empty), with no no-answer decision:
``passage@k`` (a positive passage among the top k by relevance), ``em@k`` (the best span of one of
the top k passages matches a gold answer, official normalisation: em@1 is DPR's EM of the top
passage's best span), ``top_f1`` (F1 of that best span of the top passage).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from tasks.qa.postprocess import feature_candidates
from tasks.qa.metric import exact_score, f1_score, gold_answers_for_scoring

KS = (1, 5)


def question_prediction(qid: str, passages: Sequence[dict], passage_mask: Sequence[bool], relevance: np.ndarray,
                        no_answer: float, start_logits: np.ndarray, end_logits: np.ndarray,
                        offsets: Sequence[Sequence], n_best: int, max_answer_length: int,
                        span_passages: int) -> dict:
    """The prediction of one question. passages[i]: ``{"id", "title", "text", "has_answer"?}``;
    relevance (M,); start/end_logits (M, L); offsets[i]: character spans of passage i's tokens (None
    outside its context). Returns ``span_text``/``span_score`` (best span of the top passage; "" and
    None when it has none), ``no_answer_logit``/``no_answer_prob``/``no_answer_score``, ``ranked_has_answer``
    (has_answer of every passage in relevance order) and ``passages``: the top ``span_passages``
    with rank, id, title, relevance, selection probability, has_answer and their spans."""
    real = [i for i, m in enumerate(passage_mask) if m]
    ranked = sorted(real, key=lambda i: (-float(relevance[i]), i))
    logits = np.array([no_answer] + [float(relevance[i]) for i in real], dtype=np.float64)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    prob_of = {i: float(p) for i, p in zip(real, probs[1:])}
    top = []
    for rank, i in enumerate(ranked[:span_passages]):
        text = passages[i]["text"]
        cands = feature_candidates(np.asarray(start_logits[i], dtype=np.float64),
                                   np.asarray(end_logits[i], dtype=np.float64), offsets[i], n_best, max_answer_length)
        top.append({"rank": rank + 1, "id": passages[i]["id"], "title": passages[i].get("title", ""),
                    "relevance": float(relevance[i]), "selection_prob": prob_of[i],
                    "has_answer": bool(passages[i].get("has_answer", False)),
                    "spans": [{"text": text[a:b], "score": s, "start": a, "end": b} for s, a, b in cands]})
    best = top[0]["spans"][0] if top and top[0]["spans"] else None
    return {"id": qid, "span_text": best["text"] if best else "", "span_score": best["score"] if best else None,
            "no_answer_logit": float(no_answer), "no_answer_prob": float(probs[0]),
            "no_answer_score": float(no_answer - relevance[ranked[0]]) if best else math.inf,
            "ranked_has_answer": [bool(passages[i].get("has_answer", False)) for i in ranked], "passages": top}


def final_answer(prediction: Mapping, threshold: float) -> str:
    """"" when the no-answer score is above the threshold, else the top passage's best span."""
    return "" if prediction["no_answer_score"] > threshold else prediction["span_text"]


def _exact(answers: Sequence[str], text: str) -> int:
    return max(exact_score(g, text) for g in gold_answers_for_scoring(answers))


def reader_metrics(gold: Mapping[str, Sequence[str]], predictions: Sequence[dict],
                   ks: Sequence[int] = KS) -> dict[str, float]:
    """``passage@k``, ``em@k`` and ``top_f1`` in %, over the answerable questions (0 when there are none)."""
    has = [p for p in predictions if gold[p["id"]]]
    out: dict[str, float] = {}
    for k in ks:
        out[f"passage@{k}"] = _pct(any(p["ranked_has_answer"][:k]) for p in has)
        out[f"em@{k}"] = _pct(any(psg["spans"] and _exact(gold[p["id"]], psg["spans"][0]["text"])
                                  for psg in p["passages"][:k]) for p in has)
    out["top_f1"] = _pct(max(f1_score(g, p["span_text"]) for g in gold_answers_for_scoring(gold[p["id"]]))
                         for p in has)
    return out


def _pct(values) -> float:
    values = [float(v) for v in values]
    return 100.0 * sum(values) / len(values) if values else 0.0


def prediction_record(record: dict, pred: dict, threshold: float) -> dict:
    """One line of predictions_<split>.jsonl."""

    def r(x):
        return None if x is None or not math.isfinite(x) else round(float(x), 4)

    return {"id": pred["id"], "question": record["question"], "gold_answers": list(record["answers"]),
            "final_answer": final_answer(pred, threshold), "span_text": pred["span_text"],
            "span_score": r(pred["span_score"]), "no_answer_score": r(pred["no_answer_score"]),
            "no_answer_prob": r(pred["no_answer_prob"]), "threshold": r(threshold),
            "passages": [{**{k: v for k, v in psg.items() if k != "spans"},
                          "relevance": r(psg["relevance"]), "selection_prob": r(psg["selection_prob"]),
                          "spans": [{**s, "score": r(s["score"])} for s in psg["spans"]]}
                         for psg in pred["passages"]]}
