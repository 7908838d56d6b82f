"""Turning span-reader logits into answers: plain functions, documented. The single-passage reader
(``--task squad_v2``) uses all of it; the multi-passage reader (``--task passages``) its span search
(:func:`feature_candidates`), the decision (:func:`decide`) and the threshold fit (:func:`fit_null_threshold`).

For one question with features (windows) f = 1..F, each with start/end logits over its tokens, the
character offsets of its context tokens, and the two answerability logits [no answer, has answer]:

* Span candidates (:func:`feature_candidates`): in each feature, the ``n_best`` highest start and
  end logits among context tokens are paired; a pair is kept when end >= start and it spans at
  most ``max_answer_length`` tokens. Its score is start_logit + end_logit. The question's
  candidates are pooled over features and the ``n_best`` best kept (n-best list).
* Null score: the minimum over features of start[0] + end[0] (the first token is the no-answer
  slot); a window that does not hold the answer points at it, so the *least* confident window is
  the question's evidence that an answer exists somewhere (transformers' ``utils_qa.py``).
* Answerability: the has-answer log-odds of a feature is logit[1] - logit[0]; a question takes the
  maximum over its features (it is answerable when some window holds the answer).
* Decision (:func:`no_answer_score`): the no-answer score combines the two verifiers (as the
  Retrospective Reader averages its front verifier with the span null odds):
      s_na = span_weight * (null_score - best_span_score) + answerability_weight * (-has_answer_log_odds)
  and the answer is "" when s_na > threshold, else the best span's text (:func:`decide`). The
  threshold is fitted on the dev split (:func:`fit_null_threshold`) and then applied unchanged to test.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

import numpy as np

from tasks.common.squad_metric import find_best_threshold, raw_scores


# the span search of one window; the squad_v2 export (tasks/qa/export.py) writes this very function into the
# exported reader's code, so that a run and its export read spans alike
def feature_candidates(start_logits, end_logits, offsets, n_best: int, max_answer_length: int) -> list:
    """[(score, start_char, end_char)] of the best valid spans of one window, best first."""
    ctx = np.array([o is not None for o in offsets] + [False] * (len(start_logits) - len(offsets)))[:len(start_logits)]
    if not ctx.any():
        return []
    s = np.where(ctx, start_logits, -np.inf)
    e = np.where(ctx, end_logits, -np.inf)
    k = min(n_best, int(ctx.sum()))
    top_s = np.argsort(-s, kind="stable")[:k]
    top_e = np.argsort(-e, kind="stable")[:k]
    scores = s[top_s][:, None] + e[top_e][None, :]
    length = top_e[None, :] - top_s[:, None] + 1
    valid = (length >= 1) & (length <= max_answer_length)
    out = []
    for i, j in zip(*np.nonzero(valid)):
        a, b = int(top_s[i]), int(top_e[j])
        out.append((float(scores[i, j]), offsets[a][0], offsets[b][1]))
    out.sort(key=lambda c: -c[0])
    return out[:n_best]


def predict_question(context: str, features: Sequence[dict], n_best: int, max_answer_length: int) -> dict:
    """Pool one question's features. Each feature: ``start_logits``, ``end_logits`` (1-D arrays),
    ``answerability_logits`` (2,) and ``offsets``. Returns the best span text and score (None when
    no valid span exists), the null score, the has-answer log-odds and the n-best list."""
    cands: list[tuple[float, int, int]] = []
    null = math.inf
    log_odds = -math.inf
    for f in features:
        st, en = np.asarray(f["start_logits"], dtype=np.float64), np.asarray(f["end_logits"], dtype=np.float64)
        null = min(null, float(st[0] + en[0]))
        a = np.asarray(f["answerability_logits"], dtype=np.float64)
        log_odds = max(log_odds, float(a[1] - a[0]))
        cands.extend(feature_candidates(st, en, f["offsets"], n_best, max_answer_length))
    cands.sort(key=lambda c: -c[0])
    nbest = [{"text": context[a:b], "score": sc, "start": a, "end": b} for sc, a, b in cands[:n_best]]
    best = nbest[0] if nbest else None
    return {"span_text": best["text"] if best else "", "span_score": best["score"] if best else None,
            "null_score": null, "has_answer_log_odds": log_odds, "n_best": nbest}


def no_answer_score(null_score: float, span_score: Optional[float], has_answer_log_odds: float,
                    span_weight: float, answerability_weight: float) -> float:
    """Higher means "more likely unanswerable". +inf when there is no valid span at all. A weight of
    0 drops its term (so span_weight=1, answerability_weight=0 is transformers' null-odds rule)."""
    if span_score is None:
        return math.inf
    score = 0.0
    if span_weight:
        score += span_weight * (null_score - span_score)
    if answerability_weight:
        score += answerability_weight * -has_answer_log_odds
    return score


def decide(prediction: Mapping, threshold: float) -> str:
    """The final answer: "" when the no-answer score is above the threshold."""
    return "" if prediction["no_answer_score"] > threshold else prediction["span_text"]


def postprocess(examples: Sequence[dict], features: Sequence[dict], outputs: Mapping[str, np.ndarray],
                n_best: int, max_answer_length: int, span_weight: float,
                answerability_weight: float) -> list[dict]:
    """One prediction dict per example (in example order).

    features[i] has ``example_index`` and ``offsets``; outputs holds arrays aligned with features:
    ``start_logits``/``end_logits`` (n_features, T) and ``answerability_logits`` (n_features, 2).
    """
    by_example: list[list[dict]] = [[] for _ in examples]
    for i, f in enumerate(features):
        by_example[f["example_index"]].append({
            "start_logits": outputs["start_logits"][i], "end_logits": outputs["end_logits"][i],
            "answerability_logits": outputs["answerability_logits"][i], "offsets": f["offsets"]})
    preds = []
    for ex, feats in zip(examples, by_example):
        if not feats:
            raise ValueError(f"question id '{ex['id']}' has no features")
        p = predict_question(ex["context"], feats, n_best, max_answer_length)
        p["id"] = ex["id"]
        p["no_answer_score"] = no_answer_score(p["null_score"], p["span_score"], p["has_answer_log_odds"],
                                               span_weight, answerability_weight)
        preds.append(p)
    return preds


def fit_null_threshold(predictions: Sequence[dict], examples: Sequence[dict]) -> float:
    """The threshold on the no-answer score that maximises F1 on these (dev) questions, by the
    official best-threshold search: the no-answer score of the last question answered. When
    answering nothing is best, a value just below the lowest finite no-answer score (so every dev
    question is answered with "")."""
    gold = {e["id"]: [a["text"] for a in e["answers"]] for e in examples}
    span = {p["id"]: p["span_text"] for p in predictions}
    na = {p["id"]: p["no_answer_score"] for p in predictions}
    _, f1 = raw_scores(gold, span)
    _, thresh = find_best_threshold(span, f1, na, {q: bool(a) for q, a in gold.items()})
    if thresh is not None:
        return float(thresh)
    finite = [v for v in na.values() if math.isfinite(v)]
    return min(finite) - 1.0 if finite else 0.0
