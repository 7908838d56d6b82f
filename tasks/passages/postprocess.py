"""Multi-passage reader outputs -> ranked passages, spans, the final answer, and the reader metrics.

For one question with passages i = 1..M (padding passages excluded), relevance logits r_i, the
no-answer logit n, and start/end logits over each passage's tokens:

* Ranking: passages by r_i, highest first (ties: retrieval order). Selection probabilities are
  softmax([n, r_1..r_M]).
* Spans (:func:`tasks.common.spans.feature_candidates`): in each of the top ``span_passages``
  passages, the ``n_best`` best start and end tokens among its context tokens are paired (end >=
  start, at most ``max_answer_length`` tokens), scored start + end logit.
* The answer span is the best span of the top-ranked passage (DPR). The no-answer score is
      (1 - v) * (n - r_top) + v * (-a_top)
  where n - r_top = log p(no answer) - log p(top passage) under the selection softmax (r_top the
  top passage's relevance logit), a_top the top passage's has-answer log-odds from the answerability
  head (the single-passage reader's verifier), and v the verifier weight (0: the selection alone);
  +inf when the top passage has no valid span. The final answer is "" when the score is above the
  threshold (:func:`tasks.common.spans.decide`). The threshold maximising F1 on dev is fitted with
  :func:`tasks.common.spans.fit_null_threshold` (and v, when not given, as the value of
  ``VERIFIER_GRID`` whose fitted threshold gives the best dev F1), then applied unchanged to test.
* With a single-passage reader (``passages.single_reader``), which re-reads the top passage, the
  no-answer score becomes :func:`mixed_no_answer`: (1 - u) z(the score above) + u z(its no-answer
  score), each standardised by its mean and deviation on dev, u fitted on dev from ``MIX_GRID``.

Metrics over the answerable questions (gold answers non-empty), with no no-answer decision:
``passage@k`` (a positive passage among the top k by relevance), ``em@k`` (the best span of one of
the top k passages matches a gold answer, official normalisation: em@1 is DPR's EM of the top
passage's best span), ``top_f1`` (F1 of that best span of the top passage).
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

import numpy as np

from tasks.common.spans import decide, feature_candidates
from tasks.common.squad_metric import exact_score, f1_score, gold_answers_for_scoring

KS = (1, 5)


VERIFIER_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
MIX_GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
NO_SPAN = 1e6  # a standardised no-answer score for +inf (no valid span): above any fitted threshold
FUSION_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 1e6)


def standardised(x: np.ndarray) -> np.ndarray:
    """(x - mean) / std over one question's passages (zeros when they are all equal)."""
    x = np.asarray(x, dtype=np.float64)
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


def fused_scores(relevance: np.ndarray, retrieval: np.ndarray, weight: float) -> np.ndarray:
    """The ranking score of a question's passages: standardised retriever score + weight x standardised
    relevance logit. Weight 0 ranks as the retriever did, a large weight as the relevance head."""
    return standardised(retrieval) + weight * standardised(relevance)


def ranking(relevance: np.ndarray, retrieval: Optional[np.ndarray], weight: Optional[float]) -> list[int]:
    """Passage indices best first: by relevance (weight None or no retriever scores), else by the fused
    score; ties go to the retriever's order."""
    key = np.asarray(relevance, dtype=np.float64) if weight is None or retrieval is None else \
        fused_scores(relevance, retrieval, weight)
    return sorted(range(len(key)), key=lambda i: (-float(key[i]), i))


def standardiser(dev_scores: Sequence[float]) -> tuple[float, float]:
    """(mean, deviation) of the finite scores (deviation 1 when they are all equal or there are none)."""
    finite = np.array([s for s in dev_scores if math.isfinite(s)], dtype=np.float64)
    if not len(finite):
        return 0.0, 1.0
    return float(finite.mean()), float(finite.std()) or 1.0


def mixed_no_answer(reader: float, single: float, u: float, reader_stats: tuple[float, float],
                    single_stats: tuple[float, float]) -> float:
    """(1 - u) z(reader) + u z(single), z standardising by (mean, deviation); ``NO_SPAN`` when the
    reader has no span (+inf), a single-passage score of +inf counting as ``NO_SPAN``."""
    if not math.isfinite(reader):
        return NO_SPAN
    a = (reader - reader_stats[0]) / reader_stats[1]
    b = (single - single_stats[0]) / single_stats[1] if math.isfinite(single) else NO_SPAN
    return (1.0 - u) * a + u * b


def retriever_scores(passages: Sequence[dict], real: Sequence[int]) -> np.ndarray:
    """(M,) the retriever's score of each passage (a record's ``score``); where a real passage has none,
    minus its position, which keeps the retriever's order."""
    if all(passages[i].get("score") is not None for i in real):
        return np.array([float(p.get("score") or 0.0) for p in passages], dtype=np.float64)
    return -np.arange(len(passages), dtype=np.float64)


def fit_fusion_weight(questions: Sequence[tuple[np.ndarray, np.ndarray, Sequence[bool]]],
                      grid: Sequence[float] = FUSION_GRID) -> tuple[float, dict[float, float]]:
    """The weight of :func:`fused_scores` whose ranking puts a passage holding the answer first for the
    most answerable questions (relevance, retriever scores, has_answer per question; dev), the smallest
    on a tie, so that the retriever's own order (weight 0) wins unless the head does better. Returns
    (weight, passage@1 in % of every weight tried)."""
    tried = {}
    for w in grid:
        hits = [bool(has[ranking(rel, ret, w)[0]]) for rel, ret, has in questions if any(has)]
        tried[float(w)] = 100.0 * sum(hits) / len(hits) if hits else 0.0
    best = max(tried.values())
    return next(w for w in tried if tried[w] == best), tried


def passage_spans(start_logits: np.ndarray, end_logits: np.ndarray, offsets: Sequence[Sequence], texts: Sequence[str],
                  real: Sequence[int], n_best: int, max_answer_length: int) -> dict[int, list[dict]]:
    """The ``n_best`` spans of each real passage, best first: {passage index: [{text, score, start, end}]}."""
    out = {}
    for i in real:
        cands = feature_candidates(np.asarray(start_logits[i], dtype=np.float64),
                                   np.asarray(end_logits[i], dtype=np.float64), offsets[i], n_best, max_answer_length)
        out[i] = [{"text": texts[i][a:b], "score": s, "start": a, "end": b} for s, a, b in cands]
    return out


def question_prediction(qid: str, passages: Sequence[dict], passage_mask: Sequence[bool], relevance: np.ndarray,
                        no_answer: float, start_logits: np.ndarray, end_logits: np.ndarray,
                        offsets: Sequence[Sequence], n_best: int, max_answer_length: int,
                        span_passages: int, retrieval: Optional[np.ndarray] = None,
                        weight: Optional[float] = None, answerability: Optional[np.ndarray] = None,
                        verifier_weight: float = 0.0) -> dict:
    """The prediction of one question. passages[i]: ``{"id", "title", "text", "has_answer"?}``;
    relevance (M,); start/end_logits (M, L); offsets[i]: character spans of passage i's tokens (None
    outside its context); retrieval (M,): the retriever's scores, fused with relevance by ``weight``
    (:func:`fused_scores`; None: relevance alone ranks); answerability (M,): each passage's has-answer
    log-odds, weighed in the no-answer score by ``verifier_weight``."""
    real = [i for i, m in enumerate(passage_mask) if m]
    spans = passage_spans(start_logits, end_logits, offsets, [p["text"] for p in passages], real, n_best,
                          max_answer_length)
    return decode_question(qid, passages, real, np.asarray(relevance, dtype=np.float64), float(no_answer), spans,
                           span_passages, None if retrieval is None else np.asarray(retrieval, dtype=np.float64),
                           weight, None if answerability is None else np.asarray(answerability, dtype=np.float64),
                           verifier_weight)


def decode_question(qid: str, passages: Sequence[dict], real: Sequence[int], relevance: np.ndarray, no_answer: float,
                    spans: Mapping[int, list], span_passages: int, retrieval: Optional[np.ndarray],
                    weight: Optional[float], answerability: Optional[np.ndarray] = None,
                    verifier_weight: float = 0.0) -> dict:
    """Rank the real passages (:func:`ranking`), answer with the top one's best span. Returns
    ``span_text``/``span_score`` ("" and None when it has none), ``no_answer_logit``/``no_answer_prob``,
    ``selection_score`` (no-answer logit - the top passage's relevance logit), ``verifier_score`` (minus
    the top passage's has-answer log-odds; None without ``answerability``), ``no_answer_score`` (their
    mix by ``verifier_weight``, see the module doc), ``ranked_has_answer`` and ``passages``: the top
    ``span_passages`` with rank, id, title, relevance, retriever score, fused score, selection
    probability, has-answer log-odds, has_answer and their spans."""
    rel = relevance[list(real)]
    ret = retrieval[list(real)] if retrieval is not None else None
    order = [real[k] for k in ranking(rel, ret, weight)]
    fused = dict(zip(real, fused_scores(rel, ret, weight))) if ret is not None and weight is not None else {}
    logits = np.array([no_answer] + [float(relevance[i]) for i in real], dtype=np.float64)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    prob_of = {i: float(p) for i, p in zip(real, probs[1:])}
    top = []
    for rank, i in enumerate(order[:span_passages]):
        top.append({"rank": rank + 1, "id": passages[i]["id"], "title": passages[i].get("title", ""),
                    "relevance": float(relevance[i]),
                    "retriever_score": float(retrieval[i]) if retrieval is not None else None,
                    "fused_score": float(fused[i]) if fused else None, "selection_prob": prob_of[i],
                    "has_answer_log_odds": float(answerability[i]) if answerability is not None else None,
                    "has_answer": bool(passages[i].get("has_answer", False)), "spans": spans[i]})
    best = top[0]["spans"][0] if top and top[0]["spans"] else None
    selection = float(no_answer - relevance[order[0]])
    verifier = None if answerability is None else -float(answerability[order[0]])
    score = selection if verifier is None or verifier_weight == 0 else \
        (1.0 - verifier_weight) * selection + verifier_weight * verifier
    return {"id": qid, "span_text": best["text"] if best else "", "span_score": best["score"] if best else None,
            "no_answer_logit": float(no_answer), "no_answer_prob": float(probs[0]),
            "selection_score": selection, "verifier_score": verifier,
            "no_answer_score": float(score) if best else math.inf,
            "ranked_has_answer": [bool(passages[i].get("has_answer", False)) for i in order], "passages": top}


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
            "final_answer": decide(pred, threshold), "span_text": pred["span_text"],
            "span_score": r(pred["span_score"]), "no_answer_score": r(pred["no_answer_score"]),
            "selection_score": r(pred.get("selection_score")), "verifier_score": r(pred.get("verifier_score")),
            "reader_no_answer_score": r(pred.get("reader_no_answer_score")),
            "single_reader_score": r(pred.get("single_reader_score")),
            "no_answer_prob": r(pred["no_answer_prob"]), "threshold": r(threshold),
            "passages": [{**{k: v for k, v in psg.items() if k != "spans"},
                          "relevance": r(psg["relevance"]), "selection_prob": r(psg["selection_prob"]),
                          "retriever_score": r(psg.get("retriever_score")), "fused_score": r(psg.get("fused_score")),
                          "has_answer_log_odds": r(psg.get("has_answer_log_odds")),
                          "spans": [{**s, "score": r(s["score"])} for s in psg["spans"]]}
                         for psg in pred["passages"]]}
