"""The SQuAD 2.0 metric on hand-made cases (numbers worked out by hand from the official definitions)."""

import pytest

from tasks.common.squad_metric import (apply_no_answer_threshold, exact_score, f1_score, find_best_threshold,
                                       normalize_answer, raw_scores, squad_v2_metrics)


@pytest.mark.parametrize("raw,norm", [
    ("The Quick, Brown  fox!", "quick brown fox"),
    ("an apple a day", "apple day"),
    ("Theatre", "theatre"),  # "the" is removed only as a whole word
    ("  U.S.A.  ", "usa"),
    ("", ""),
    ("the", ""),
])
def test_normalize_answer(raw, norm):
    assert normalize_answer(raw) == norm


def test_exact_and_f1_hand_cases():
    assert exact_score("Paris", "paris.") == 1
    assert exact_score("the Eiffel Tower", "Eiffel tower") == 1
    assert exact_score("Eiffel Tower", "Tower") == 0
    # gold [big, red, fox], pred [red, fox, jumped]: 2 shared, P = R = 2/3
    assert f1_score("the big red fox", "red fox jumped") == pytest.approx(2 / 3)
    # repeated tokens count with multiplicity: gold [a1, a1, b] vs pred [a1]: P = 1, R = 1/3 -> F1 = 0.5
    assert f1_score("x x y", "x") == pytest.approx(0.5)
    assert f1_score("red", "blue") == 0.0
    # empty vs empty is right (a correct no-answer); empty vs anything is 0
    assert f1_score("", "") == 1.0 and f1_score("", "fox") == 0.0 and f1_score("fox", "") == 0.0


def test_max_over_gold_answers_and_no_answer_as_empty_string():
    gold = {"q1": ["Denver Broncos", "Broncos"], "q2": [], "q3": [], "q4": ["1990"]}
    preds = {"q1": "the Broncos", "q2": "", "q3": "something", "q4": ""}
    exact, f1 = raw_scores(gold, preds)
    assert exact == {"q1": 1, "q2": 1, "q3": 0, "q4": 0}
    assert f1 == {"q1": 1.0, "q2": 1.0, "q3": 0.0, "q4": 0.0}


def test_squad_v2_totals_and_breakdown():
    gold = {"a": ["big red fox"], "b": ["Rome"], "c": [], "d": []}
    preds = {"a": "red fox", "b": "Rome", "c": "", "d": "Oslo"}
    m = squad_v2_metrics(gold, preds)
    # a: EM 0, F1 = 2*1*(2/3)/(1+2/3) = 0.8; b: 1/1; c: 1/1; d: 0/0
    assert m["exact"] == pytest.approx(50.0)
    assert m["f1"] == pytest.approx(100 * (0.8 + 1 + 1 + 0) / 4)
    assert m["HasAns_exact"] == pytest.approx(50.0) and m["HasAns_f1"] == pytest.approx(90.0)
    assert m["NoAns_exact"] == pytest.approx(50.0) and m["NoAns_f1"] == pytest.approx(50.0)
    assert (m["total"], m["HasAns_total"], m["NoAns_total"]) == (4, 2, 2)
    assert "best_f1" not in m  # only with no-answer scores


def test_all_no_answer_scores_the_unanswerable_share():
    gold = {"a": ["x"], "b": [], "c": [], "d": ["y z"]}
    m = squad_v2_metrics(gold, {q: "" for q in gold})
    assert m["exact"] == m["f1"] == pytest.approx(50.0)
    assert m["NoAns_exact"] == 100.0 and m["HasAns_f1"] == 0.0


def test_best_threshold_hand_case():
    # span predictions (what each question gets when answered) and their raw F1
    gold = {"a": ["red fox"], "b": ["rome"], "c": [], "d": []}
    span = {"a": "fox", "b": "rome", "c": "oslo", "d": "lima"}
    na = {"a": -2.0, "b": 1.0, "c": 0.0, "d": 3.0}
    exact, f1 = raw_scores(gold, span)  # f1: a 2/3, b 1, c 0, d 0
    has = {q: bool(g) for q, g in gold.items()}
    # answer nothing: 2 right (c, d). In na order a (-2): +2/3; c (0): -1; b (1): +1; d (3): -1.
    # running: 2 -> 2.667 (best, thresh -2) -> 1.667 -> 2.667 (not > best) -> 1.667
    best, thresh = find_best_threshold(span, f1, na, has)
    assert best == pytest.approx(100 * (2 + 2 / 3) / 4) and thresh == -2.0
    m = squad_v2_metrics(gold, {q: "" if na[q] > -2.0 else span[q] for q in gold}, na, span)
    assert m["best_f1"] == pytest.approx(best) and m["best_f1_thresh"] == -2.0
    assert m["f1"] == pytest.approx(best)  # the final predictions used that very threshold
    # exact: a gives 0, so answering never beats answering nothing until b: 2 -> 2 -> 1 -> 2 -> 1: stays 2
    assert m["best_exact"] == pytest.approx(50.0) and m["best_exact_thresh"] == 0.0  # official: 0.0


def test_threshold_none_when_answering_nothing_is_best():
    gold = {"a": [], "b": []}
    span = {"a": "x", "b": "y"}
    exact, _ = raw_scores(gold, span)
    assert find_best_threshold(span, exact, {"a": 0.1, "b": 0.2}, {"a": False, "b": False}) == (100.0, None)


def test_apply_no_answer_threshold():
    scores = {"a": 0.5, "b": 0.0}
    out = apply_no_answer_threshold(scores, {"a": 2.0, "b": 2.0}, {"a": True, "b": False}, 1.0)
    assert out == {"a": 0.0, "b": 1.0}
    assert apply_no_answer_threshold(scores, {"a": 0.0, "b": 0.0}, {"a": True, "b": False}, 1.0) == scores


def test_roc_auc_by_hand():
    from tasks.common.squad_metric import roc_auc

    # pairs (pos, neg): (0.35, 0.1) right, (0.35, 0.4) wrong, (0.8, *) right twice -> 3 of 4
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    assert roc_auc([1.0, 1.0, 2.0], [True, False, True]) == 0.75  # a tie counts one half: (0.5 + 1) / 2
    assert roc_auc([3.0, 1.0], [True, False]) == 1.0 and roc_auc([1.0, 3.0], [True, False]) == 0.0
    assert roc_auc([1.0, 2.0], [True, True]) is None  # one class only
