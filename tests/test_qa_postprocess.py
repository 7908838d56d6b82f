"""Post-processing: n-best spans, max answer length, null score over features, the no-answer decision."""

import math

import numpy as np
import pytest

from tasks.common.spans import (decide, feature_candidates, fit_null_threshold, no_answer_score, postprocess,
                                predict_question)

CONTEXT = "the red fox lives in paris"
# token 0 = [CLS], 1-2 question, 3 = [SEP], 4.. context words, last = [SEP]
OFFSETS = [None, None, None, None, (0, 3), (4, 7), (8, 11), (12, 17), (18, 20), (21, 26), None]


def logits(values: dict, n: int = len(OFFSETS), base: float = -5.0) -> np.ndarray:
    a = np.full(n, base)
    for i, v in values.items():
        a[i] = v
    return a


def test_best_span_is_the_highest_valid_pair():
    s = logits({0: 1.0, 1: 9.0, 9: 4.0, 6: 2.0})  # 1 is a question token: never a candidate
    e = logits({0: 1.0, 2: 9.0, 9: 3.0, 6: 2.5})
    cands = feature_candidates(s, e, OFFSETS, n_best=5, max_answer_length=30)
    assert cands[0] == (7.0, 21, 26)  # "paris": start 4 + end 3
    assert all(0 <= a < b <= len(CONTEXT) for _, a, b in cands)
    assert [c[0] for c in cands] == sorted((c[0] for c in cands), reverse=True)


def test_end_before_start_and_too_long_spans_are_dropped():
    s = logits({9: 5.0, 4: 4.0})
    e = logits({4: 5.0, 9: 4.0})
    # (9, 4) has end < start; (4, 9) is 6 tokens long
    assert all(b > a for _, a, b in feature_candidates(s, e, OFFSETS, 5, 30))
    long_ok = feature_candidates(s, e, OFFSETS, 5, max_answer_length=6)
    assert (8.0, 0, 26) in long_ok
    short = feature_candidates(s, e, OFFSETS, 5, max_answer_length=5)
    assert (8.0, 0, 26) not in short
    assert all(b > a for _, a, b in short)


def test_null_score_is_the_minimum_over_features_and_nbest_pools_them():
    f1 = {"start_logits": logits({0: 3.0, 9: 1.0}), "end_logits": logits({0: 3.0, 9: 1.0}),
          "answerability_logits": np.array([0.0, -1.0]), "offsets": OFFSETS}
    f2 = {"start_logits": logits({0: 0.5, 4: 2.0}), "end_logits": logits({0: 0.5, 6: 2.0}),
          "answerability_logits": np.array([0.0, 2.0]), "offsets": OFFSETS}
    p = predict_question(CONTEXT, [f1, f2], n_best=3, max_answer_length=30)
    assert p["null_score"] == pytest.approx(1.0)  # min(6.0, 1.0)
    assert p["span_text"] == "the red fox" and p["span_score"] == pytest.approx(4.0)
    assert p["has_answer_log_odds"] == pytest.approx(2.0)  # max over features
    assert len(p["n_best"]) == 3 and p["n_best"][0]["text"] == "the red fox"


def test_no_answer_score_combines_span_and_answerability():
    # span: null 6, best span 2 -> difference 4; answerability log-odds of an answer 1 -> -1
    assert no_answer_score(6.0, 2.0, 1.0, 0.5, 0.5) == pytest.approx(0.5 * 4 + 0.5 * -1)
    assert no_answer_score(6.0, 2.0, 1.0, 1.0, 0.0) == pytest.approx(4.0)  # transformers' null-odds rule
    assert no_answer_score(6.0, 2.0, 1.0, 0.0, 1.0) == pytest.approx(-1.0)  # the verifier alone
    assert no_answer_score(0.0, None, 5.0, 0.5, 0.5) == math.inf  # no valid span: no answer


def test_decision_chooses_no_answer_when_it_should():
    ex = [{"id": "q1", "context": CONTEXT}, {"id": "q2", "context": CONTEXT}]
    feats = [{"example_index": 0, "offsets": OFFSETS}, {"example_index": 1, "offsets": OFFSETS}]
    start = np.stack([logits({0: 8.0, 9: 1.0}), logits({0: -2.0, 9: 4.0})])
    end = np.stack([logits({0: 8.0, 9: 1.0}), logits({0: -2.0, 9: 4.0})])
    ans = np.array([[3.0, -3.0], [-3.0, 3.0]])  # q1: "no answer", q2: "has answer"
    preds = postprocess(ex, feats, {"start_logits": start, "end_logits": end, "answerability_logits": ans},
                        n_best=5, max_answer_length=30, span_weight=0.5, answerability_weight=0.5)
    assert [decide(p, 0.0) for p in preds] == ["", "paris"]
    # q1: 0.5 * (16 - 2) + 0.5 * 6 = 10; a threshold above it answers q1 with its best span
    assert preds[0]["no_answer_score"] == pytest.approx(10.0)
    assert decide(preds[0], 10.5) == "paris"
    # the verifier alone can overrule the span: q2's span says answer, a strong "no answer" verifier wins
    preds = postprocess(ex, feats, {"start_logits": start, "end_logits": end,
                                    "answerability_logits": np.array([[3.0, -3.0], [9.0, -9.0]])},
                        n_best=5, max_answer_length=30, span_weight=0.5, answerability_weight=0.5)
    assert decide(preds[1], 0.0) == ""


def test_fit_null_threshold_maximises_dev_f1():
    ex = [{"id": "a", "answers": [{"text": "paris"}]}, {"id": "b", "answers": []},
          {"id": "c", "answers": [{"text": "rome"}]}, {"id": "d", "answers": [{"text": "oslo"}]}]
    preds = [{"id": "a", "span_text": "paris", "no_answer_score": -1.0},
             {"id": "b", "span_text": "lima", "no_answer_score": 0.5},
             {"id": "c", "span_text": "rome", "no_answer_score": 2.0},
             {"id": "d", "span_text": "oslo", "no_answer_score": 2.5}]
    # answering in score order: a +1 (2), b -1 (1), c +1 (2), d +1 (3): answer all -> d's score
    assert fit_null_threshold(preds, ex) == 2.5
    preds[2]["span_text"] = "cairo"  # c wrong: 2, 1, 1, 2 -> the first best (answer only a) is kept
    assert fit_null_threshold(preds, ex) == -1.0
    # nothing worth answering: a threshold below every score
    only_b = [preds[1]]
    assert fit_null_threshold(only_b, [ex[1]]) < 0.5
    assert decide({"no_answer_score": 0.5, "span_text": "lima"}, fit_null_threshold(only_b, [ex[1]])) == ""


def test_task_score_reports_official_and_diagnostic_metrics():
    from tasks.qa.task import QATask

    ex = [{"id": "a", "answers": [{"text": "paris", "answer_start": 0}], "is_impossible": False},
          {"id": "b", "answers": [], "is_impossible": True},
          {"id": "c", "answers": [{"text": "red fox", "answer_start": 0}], "is_impossible": False}]
    preds = [{"id": "a", "span_text": "paris", "no_answer_score": -1.0, "has_answer_log_odds": 1.0},
             {"id": "b", "span_text": "rome", "no_answer_score": 2.0, "has_answer_log_odds": -1.0},
             {"id": "c", "span_text": "fox", "no_answer_score": 0.5, "has_answer_log_odds": -0.5}]
    m = QATask().score(ex, preds, threshold=0.0)
    # final answers: a "paris" (right), b "" (right), c "" (wrong: it has an answer)
    assert m["exact"] == pytest.approx(200 / 3) and m["f1"] == pytest.approx(200 / 3)
    assert m["HasAns_f1"] == pytest.approx(50.0) and m["NoAns_exact"] == 100.0
    # forced to answer, c gets "fox": F1 2/3
    assert m["HasAns_span_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert m["answerability_accuracy"] == pytest.approx(200 / 3)  # c's verifier says "no answer"
    # best threshold answers c too: (1 + 1 + 2/3) / 3
    assert m["best_f1"] == pytest.approx(100 * (2 + 2 / 3) / 3) and m["best_f1_thresh"] == 0.5
    assert m["null_threshold"] == 0.0 and m["num_examples"] == 3
    assert all(isinstance(v, float) for v in m.values())
