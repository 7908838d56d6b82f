"""The SQuAD 2.0 metric, with the official evaluation script's definitions.

* Answers are normalised before comparison: lower-case, punctuation removed (``string.punctuation``),
  the articles "a", "an", "the" removed as whole words, whitespace collapsed.
* A question without gold answers (after dropping golds that normalise to "") has the single gold
  answer "": the empty prediction (no answer) is then correct, and any other prediction scores 0.
* Exact match and token F1 are taken as the maximum over a question's gold answers.
* Totals are percentages: ``exact``, ``f1`` over all questions, ``HasAns_*`` over answerable ones,
  ``NoAns_*`` over unanswerable ones (``NoAns_exact`` == ``NoAns_f1`` is the no-answer accuracy).
* ``best_exact`` / ``best_f1``: the score reached with the best no-answer threshold on the given
  no-answer scores, found as the official script does (see :func:`find_best_threshold`).

Pure functions on plain Python values; no dependence on the rest of the project.
"""

from __future__ import annotations

import collections
import re
import string
from typing import Mapping, Optional, Sequence

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(s: str) -> str:
    """Lower-case, strip punctuation, drop articles, collapse whitespace (in that order)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def answer_tokens(s: str) -> list[str]:
    return normalize_answer(s).split() if s else []


def exact_score(gold: str, pred: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(pred))


def f1_score(gold: str, pred: str) -> float:
    """Token-overlap F1 of two answers. When either is empty (after normalisation) it is 1 exactly
    when both are empty, so "" against "" (a correct no-answer) scores 1."""
    gold_toks, pred_toks = answer_tokens(gold), answer_tokens(pred)
    if not gold_toks or not pred_toks:
        return float(gold_toks == pred_toks)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_toks)
    recall = num_same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def gold_answers_for_scoring(answers: Sequence[str]) -> list[str]:
    """Gold answers that survive normalisation, or [""] for an unanswerable question."""
    golds = [a for a in answers if normalize_answer(a)]
    return golds or [""]


def raw_scores(gold_answers: Mapping[str, Sequence[str]], preds: Mapping[str, str]) -> tuple[dict, dict]:
    """Per-question (exact, f1), each the max over the question's gold answers. Questions missing
    from ``preds`` are skipped (the official script warns and skips them too)."""
    exact, f1 = {}, {}
    for qid, answers in gold_answers.items():
        if qid not in preds:
            continue
        golds = gold_answers_for_scoring(answers)
        pred = preds[qid]
        exact[qid] = max(exact_score(g, pred) for g in golds)
        f1[qid] = max(f1_score(g, pred) for g in golds)
    return exact, f1


def apply_no_answer_threshold(scores: Mapping[str, float], na_scores: Mapping[str, float],
                              has_answer: Mapping[str, bool], threshold: float) -> dict:
    """Questions whose no-answer score is > threshold are answered with "": they score 1 when
    unanswerable and 0 when answerable."""
    out = {}
    for qid, s in scores.items():
        out[qid] = float(not has_answer[qid]) if na_scores[qid] > threshold else s
    return out


def find_best_threshold(preds: Mapping[str, str], scores: Mapping[str, float], na_scores: Mapping[str, float],
                        has_answer: Mapping[str, bool]) -> tuple[float, Optional[float]]:
    """The official best-threshold search. Start from "answer nothing" (every unanswerable question
    right), then answer questions in increasing order of no-answer score, one at a time: answering an
    answerable question adds its raw score; answering an unanswerable one with a non-empty
    prediction costs 1. Returns (best score in %, threshold of that score). The threshold is None
    when answering nothing is best (the official script reports 0.0 there, which only means
    "answer nothing" for scores that are probabilities)."""
    if not scores:
        return 0.0, None
    cur = sum(1 for qid in scores if not has_answer[qid])
    best, best_thresh = cur, None
    for qid in sorted(scores, key=lambda q: na_scores[q]):
        if has_answer[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur += diff
        if cur > best:
            best, best_thresh = cur, na_scores[qid]
    return 100.0 * best / len(scores), best_thresh


def squad_v2_metrics(gold_answers: Mapping[str, Sequence[str]], preds: Mapping[str, str],
                     na_scores: Optional[Mapping[str, float]] = None,
                     span_preds: Optional[Mapping[str, str]] = None) -> dict:
    """The official SQuAD 2.0 numbers for final predictions ``preds`` ("" means no answer).

    gold_answers: question id -> gold answer texts (empty for unanswerable questions).
    na_scores: question id -> no-answer score (higher means "more likely unanswerable"); when given,
    ``best_exact``/``best_f1`` and their thresholds are added (every value is a number).
    span_preds: the answer each question gets when it *is* answered (the best non-empty span);
    the threshold search answers with these. Defaults to ``preds`` (the official script's input).
    """
    has_answer = {qid: bool(a) for qid, a in gold_answers.items()}
    exact, f1 = raw_scores(gold_answers, preds)
    qids = list(exact)

    def pct(d: Mapping[str, float], subset: list[str]) -> float:
        return 100.0 * sum(d[q] for q in subset) / len(subset) if subset else 0.0

    has = [q for q in qids if has_answer[q]]
    no = [q for q in qids if not has_answer[q]]
    out = {"exact": pct(exact, qids), "f1": pct(f1, qids), "total": len(qids),
           "HasAns_exact": pct(exact, has), "HasAns_f1": pct(f1, has), "HasAns_total": len(has),
           "NoAns_exact": pct(exact, no), "NoAns_f1": pct(f1, no), "NoAns_total": len(no)}
    if na_scores is not None:
        answered = span_preds if span_preds is not None else preds
        a_exact, a_f1 = raw_scores(gold_answers, answered)
        for name, raw in (("exact", a_exact), ("f1", a_f1)):
            best, thresh = find_best_threshold(answered, raw, na_scores, has_answer)
            # the official script reports 0.0 when answering nothing is best
            out[f"best_{name}"], out[f"best_{name}_thresh"] = best, 0.0 if thresh is None else float(thresh)
    return out


def roc_auc(scores: Sequence[float], positive: Sequence[bool]) -> Optional[float]:
    """Area under the ROC curve of ``scores`` for telling ``positive`` examples from the others: the
    probability that a random positive scores above a random negative, ties counting one half (the
    Mann-Whitney U statistic over n_pos * n_neg). None when either class is absent. Written here
    rather than importing scikit-learn, which the project does not otherwise need, for one formula."""
    pairs = sorted(zip(scores, positive), key=lambda sp: sp[0])
    n_pos = sum(1 for _, p in pairs if p)
    n_neg = len(pairs) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    rank_sum, i = 0.0, 0
    while i < len(pairs):  # average 1-based ranks over runs of tied scores
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        rank_sum += sum(1 for _, p in pairs[i:j] if p) * (i + 1 + j) / 2
        i = j
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
