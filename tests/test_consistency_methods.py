"""The consistency family (``--uda.method``): each method's masks, weights, thresholds and state updates
against numbers worked out by hand for small inputs; option validation; every method on a tiny run, its
state saved and restored exactly on resume. (Two processes agree on the state: tests/test_multiprocess.py.)"""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.test_resume import Interrupted, InterruptedTask
from tests.trainkit import model_dir, run, tiny_config, training_lines  # noqa: F401 (fixture)
from uda import checkpoint
from uda.config import ConfigError
from uda.consistency import Family, Settings, adamatch, fixmatch, flexmatch, freematch, softmatch
from uda.consistency.base import Decision, weighted_cross_entropy


def _logits(*rows):
    return torch.tensor(rows, dtype=torch.float64).log().float()


# ----------------------------------------------------------------------------- golden numbers

def test_weighted_cross_entropy_counts_masked_examples_in_the_mean():
    strong = _logits([0.5, 0.5], [0.8, 0.2])
    loss = weighted_cross_entropy(strong, Decision(torch.tensor([0, 1]), torch.tensor([1.0, 0.0])))
    assert float(loss) == pytest.approx(-math.log(0.5) / 2, rel=1e-6)
    soft = Decision(torch.tensor([0, 0]), torch.tensor([1.0, 1.0]), torch.tensor([[0.75, 0.25], [0.5, 0.5]]))
    expected = (-(0.75 * math.log(0.5) + 0.25 * math.log(0.5)) - (0.5 * math.log(0.8) + 0.5 * math.log(0.2))) / 2
    assert float(weighted_cross_entropy(strong, soft)) == pytest.approx(expected, rel=1e-6)


def test_fixmatch_mask_is_max_probability_at_or_above_tau():
    assert fixmatch.fixed_threshold_mask(torch.tensor([0.96, 0.95, 0.6]), 0.95).tolist() == [1.0, 1.0, 0.0]
    m = fixmatch.FixMatch(Settings(threshold=0.95), 2, 10, None)
    out = m.loss(_logits([0.96, 0.04], [0.6, 0.4]), _logits([0.5, 0.5], [0.8, 0.2]))
    assert out.decision.weight.tolist() == [1.0, 0.0] and out.decision.pseudo.tolist() == [0, 0]
    assert float(out.loss) == pytest.approx(math.log(2) / 2, rel=1e-6)


def test_flexmatch_learning_effect_thresholds_and_record():
    selected = torch.tensor([-1, 0, 0, 1, -1, -1])
    # sigma = [2, 1], 3 never confident: with warm-up the normaliser is max(2, 3) = 3, without it 2
    assert flexmatch.class_learning_effect(selected, 2, warmup=True).tolist() == pytest.approx([2 / 3, 1 / 3])
    assert flexmatch.class_learning_effect(selected, 2, warmup=False).tolist() == pytest.approx([1.0, 0.5])
    assert flexmatch.class_learning_effect(torch.full((4,), -1), 2, warmup=True) is None  # all in one bucket
    # convex mapping tau * beta / (2 - beta): (2/3) / (4/3) = 0.5, (1/3) / (5/3) = 0.2
    assert flexmatch.flexible_thresholds(torch.tensor([2 / 3, 1 / 3]), 0.9).tolist() == pytest.approx([0.45, 0.18])
    out = flexmatch.record_confident(torch.full((4,), -1), torch.tensor([2, 0]), torch.tensor([1, 0]),
                                     torch.tensor([0.97, 0.5]), 0.95)
    assert out.tolist() == [-1, -1, 1, -1]


def test_flexmatch_state_follows_the_confident_examples():
    m = flexmatch.FlexMatch(Settings(threshold=0.9), 2, 4, None)
    weak = _logits([0.95, 0.05], [0.3, 0.7], [0.2, 0.8])
    assert m.decide(weak).weight.tolist() == [1.0, 1.0, 1.0]  # beta 0: every threshold 0 at the start
    d = m.decide(weak)
    m.update(m.observe(weak, d, idx=torch.tensor([0, 1, 2])))
    # selected = [0, -1, -1, -1]: sigma = [1, 0], 3 never confident -> beta = [1/3, 0]
    assert m.selected.tolist() == [0, -1, -1, -1]
    assert m.beta.tolist() == pytest.approx([1 / 3, 0.0])
    d = m.decide(weak)
    assert d.class_thresholds.tolist() == pytest.approx([0.9 * (1 / 3) / (5 / 3), 0.0])
    assert d.weight.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ConfigError, match="one row of the class distribution per unlabelled example"):
        m.observe(weak, d, idx=torch.tensor([0, 1]))


def test_freematch_update_thresholds_and_fairness():
    m = freematch.FreeMatch(Settings(momentum=0.9), 2, 10, None)
    assert float(m.tau) == 0.5 and m.p_model.tolist() == [0.5, 0.5]  # tau_0 = p~_0 = h~_0 = 1/C
    weak = _logits([0.8, 0.2], [0.4, 0.6])
    m.update(m.observe(weak, m.decide(weak)))
    # tau = 0.9 * 0.5 + 0.1 * mean(0.8, 0.6); p~ = 0.9 * 0.5 + 0.1 * mean(p); h~: argmax [0, 1] -> [0.5, 0.5]
    assert float(m.tau) == pytest.approx(0.52)
    assert m.p_model.tolist() == pytest.approx([0.51, 0.49])
    assert m.hist.tolist() == pytest.approx([0.5, 0.5])
    d = m.decide(_logits([0.51, 0.49], [0.49, 0.51]))
    assert d.class_thresholds.tolist() == pytest.approx([0.52, 0.52 * 0.49 / 0.51], rel=1e-6)
    assert d.weight.tolist() == [0.0, 1.0]  # 0.51 < 0.52; 0.51 >= 0.4996
    # a = SumNorm(p~ / h~) = [0.51, 0.49]; strong p_s = [[0.7, 0.3], [0.2, 0.8]]: h_s = [0.5, 0.5],
    # b = SumNorm(mean p_s / h_s) = [0.45, 0.55]; L_f = 0.51 ln 0.45 + 0.49 ln 0.55
    strong = _logits([0.7, 0.3], [0.2, 0.8])
    term = freematch.fairness_term(strong, torch.tensor([1.0, 1.0]), m.p_model, m.hist)
    assert float(term) == pytest.approx(0.51 * math.log(0.45) + 0.49 * math.log(0.55), rel=1e-5)
    assert float(freematch.fairness_term(strong, torch.tensor([0.0, 0.0]), m.p_model, m.hist)) == 0.0
    out = m.loss(_logits([0.51, 0.49], [0.49, 0.51]), strong)
    assert float(out.extra) == pytest.approx(0.001 * float(
        freematch.fairness_term(strong, out.decision.weight, m.p_model, m.hist)), rel=1e-6)


def test_softmatch_weight_alignment_and_update():
    w = softmatch.truncated_gaussian_weight(torch.tensor([0.9, 0.5]), mu=0.7, var=0.04, n_sigma=2.0)
    # above the mean: 1; 0.2 below: exp(-0.04 / (2 * 0.04 / 4)) = exp(-2)
    assert w.tolist() == pytest.approx([1.0, math.exp(-2.0)], rel=1e-6)
    assert softmatch.mean_and_variance(1.4, 0.81 + 0.25, 2) == pytest.approx((0.7, 0.08))
    aligned = softmatch.aligned_to(torch.tensor([[0.6, 0.4]]), torch.tensor([0.5, 0.5]), torch.tensor([0.6, 0.4]))
    assert aligned.tolist()[0] == pytest.approx([0.5, 0.5], abs=1e-5)
    m = softmatch.SoftMatch(Settings(momentum=0.9), 2, 10, torch.tensor([0.5, 0.5]))
    assert float(m.mu) == 0.5 and float(m.var) == 1.0
    weak = _logits([0.9, 0.1], [0.5, 0.5])
    d = m.decide(weak)  # p~ = prior at the start: aligned = p; mu 0.5, var 1: both at or above mu -> 1
    assert d.weight.tolist() == pytest.approx([1.0, 1.0]) and d.pseudo.tolist() == [0, 0]
    m.update(m.observe(weak, d))
    # max p_a = [0.9, 0.5]: mean 0.7, unbiased variance 0.08
    assert float(m.mu) == pytest.approx(0.9 * 0.5 + 0.1 * 0.7)
    assert float(m.var) == pytest.approx(0.9 * 1.0 + 0.1 * 0.08)
    assert m.p_model.tolist() == pytest.approx([0.9 * 0.5 + 0.1 * 0.7, 0.9 * 0.5 + 0.1 * 0.3])


def test_adamatch_relative_threshold_and_alignment():
    lp = torch.tensor([[0.9, 0.1], [0.7, 0.3]])
    assert adamatch.relative_threshold(0.95, lp) == pytest.approx(0.95 * 0.8)
    m = adamatch.AdaMatch(Settings(momentum=0.5), 2, 10, None)
    weak = _logits([0.8, 0.2], [0.6, 0.4])
    d = m.decide(weak, labeled_probs=lp)  # start: both EMAs 1/C, aligned = p; threshold 0.76
    assert d.threshold == pytest.approx(0.76) and d.weight.tolist() == [1.0, 0.0]
    m.update(m.observe(weak, d, labeled_probs=lp))
    assert m.p_model.tolist() == pytest.approx([0.5 * 0.5 + 0.5 * 0.7, 0.5 * 0.5 + 0.5 * 0.3])
    assert m.p_labeled.tolist() == pytest.approx([0.5 * 0.5 + 0.5 * 0.8, 0.5 * 0.5 + 0.5 * 0.2])
    # now p * p~_lb / p~_ulb: [0.6 * 0.65 / 0.6, 0.4 * 0.35 / 0.4] = [0.65, 0.35]
    d = m.decide(_logits([0.6, 0.4]), labeled_probs=lp)
    assert d.weight.tolist() == [0.0]
    with pytest.raises(ConfigError, match="labelled batch's class probabilities"):
        m.decide(weak)


def test_span_distributions_use_the_global_parts_only():
    weak = torch.tensor([[2.0, 1.0, -1e9], [0.0, 0.0, 0.0]])  # over positions, the last one padding
    for name, cls in (("flexmatch", flexmatch.FlexMatch), ("freematch", freematch.FreeMatch),
                      ("softmatch", softmatch.SoftMatch), ("adamatch", adamatch.AdaMatch)):
        m = cls(Settings(), None, 10, None)
        d = m.decide(weak)
        assert d.class_thresholds is None and d.weight.shape == (2,), name
        m.update(m.observe(weak, d))


def test_family_state_round_trips():
    fam = Family("freematch", Settings(momentum=0.9), 0, 10, None)
    weak, strong = _logits([0.8, 0.2], [0.4, 0.6]), _logits([0.7, 0.3], [0.2, 0.8])
    out = fam.loss(0, weak, strong)
    fam.update({0: out.observed})
    state = json.loads(json.dumps(fam.state_dict()))  # what a checkpoint holds is JSON
    again = Family("freematch", Settings(momentum=0.9), 0, 10, None)
    again.load_state_dict(state)
    assert float(again.loss(0, weak, strong).loss) == float(fam.loss(0, weak, strong).loss)
    assert float(again.methods[0].tau) == pytest.approx(float(fam.methods[0].tau))
    with pytest.raises(ConfigError, match="trained with uda.method freematch"):
        Family("softmatch", Settings(), 0, 10, None).load_state_dict(state)


# ----------------------------------------------------------------------------- options

@pytest.mark.parametrize("overrides, message", [
    ({"uda.method": "fixmatch", "uda.n_sigma": 3}, "--uda.n_sigma is not an option of uda.method fixmatch"),
    ({"uda.method": "softmatch", "uda.confidence": 0.9}, "--uda.confidence is not an option of uda.method softmatch"),
    ({"uda.ema_momentum": 0.99}, "--uda.ema_momentum is an option of freematch, softmatch, adamatch"),
    ({"uda.method": "adamatch", "uda.distribution_alignment": True}, "adamatch aligns the class distribution"),
    ({"uda.method": "flexmatch", "uda.fairness_weight": 0.1}, "it is one of freematch"),
    ({"uda.method": "fixmatch_typo"}, "uda.method"),
])
def test_method_options_are_checked_by_name(overrides, message, tmp_path):
    from uda.config import build_config

    with pytest.raises(ConfigError, match=message):
        build_config("text_classification", None, {"output_dir": str(tmp_path), **overrides})


# ----------------------------------------------------------------------------- runs

@pytest.mark.parametrize("method", ["fixmatch", "flexmatch", "freematch", "softmatch", "adamatch"])
def test_each_method_trains_and_logs_what_it_decides(method, model_dir, tiny_text_data, tmp_path, one_thread):  # noqa: F811
    out = tmp_path / method
    results = run(tiny_config(model_dir, tiny_text_data, out, **{"uda.method": method, "uda.tsa": "none",
                                                                  "train.log_every": 1, "train.max_steps": 4}))
    assert results["test"]["num_examples"] > 0
    lines = training_lines(out)
    for line in lines:
        assert 0.0 <= line["unsup/mask_ratio"] <= 1.0 and 0.0 <= line["unsup/used_ratio"] <= 1.0
        assert "unsup/threshold" in line and math.isfinite(line["unsup/loss"])
        if line["unsup/mask_ratio"] > 0:  # the kept pseudo-labels' class shares against the labelled prior
            assert 0.0 <= line["unsup/pseudo_prior_gap"] <= 1.0
    if method in ("flexmatch", "freematch"):
        assert all("unsup/class_threshold_max" in line for line in lines)
    if method == "freematch":
        assert all("unsup/fairness" in line for line in lines if line["unsup/used_ratio"] > 0)
    state = checkpoint.load_state(checkpoint.latest(out / "checkpoints").path)["loop"]["method"]
    assert state["method"] == method and "0" in state["distributions"]


@pytest.mark.parametrize("method", ["flexmatch", "freematch"])
def test_a_resumed_run_continues_with_the_same_method_state(method, model_dir, tiny_text_data, tmp_path,  # noqa: F811
                                                            one_thread):
    opts = {"uda.method": method, "uda.tsa": "none", "train.max_steps": 8, "train.warmup_steps": 1,
            "train.eval_every": 4, "train.log_every": 1, "checkpoint.every_steps": 3}
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    run(tiny_config(model_dir, tiny_text_data, straight, **opts))
    with pytest.raises(Interrupted):
        run(tiny_config(model_dir, tiny_text_data, broken, **opts), InterruptedTask(at=6))
    results = run(tiny_config(model_dir, tiny_text_data, broken, **opts))
    assert results["resumed_at_steps"] == [4]
    for la, lb in zip(training_lines(straight), training_lines(broken)):
        assert lb == pytest.approx(la, rel=1e-6, abs=1e-9)
    last = "step-00000008"
    sa = checkpoint.load_state(straight / "checkpoints" / last)["loop"]["method"]
    sb = checkpoint.load_state(broken / "checkpoints" / last)["loop"]["method"]
    assert json.dumps(sa) == json.dumps(sb)


# ----------------------------------------------------------------------------- the class prior alignment aims at

def test_estimated_class_prior_recovers_an_unbalanced_prior():
    """A classifier calibrated for even classes on data whose classes are 80/20: EM on its predictions
    finds 0.8/0.2 (and its fixed point: pi = mean of the predictions re-weighted by pi / train prior)."""
    from uda.losses import estimate_class_prior

    g = torch.Generator().manual_seed(0)
    y = (torch.rand(20000, generator=g) < 0.2).long()  # class 1 is 20%
    x = torch.randn(20000, generator=g) + torch.where(y == 1, 1.0, -1.0)
    # posterior under an even prior of N(-1, 1) vs N(1, 1): p(1 | x) = sigmoid(2 x)
    probs = torch.stack([torch.sigmoid(-2 * x), torch.sigmoid(2 * x)], dim=1)
    even = torch.tensor([0.5, 0.5])
    pi = estimate_class_prior(probs, even)
    assert pi.tolist() == pytest.approx([0.8, 0.2], abs=0.015)
    assert float(probs[:, 1].mean()) > 0.25  # the raw mean prediction overstates the rare class
    w = probs.double() * (pi.double() / even.double())
    assert (w / w.sum(-1, keepdim=True)).mean(0).tolist() == pytest.approx(pi.tolist(), abs=1e-4)


def test_alignment_towards_the_estimated_prior():
    from uda.alignment import ClassAligner

    a = ClassAligner(torch.tensor([0.5, 0.5]), momentum=0.0, estimate=True)
    probs = torch.tensor([[0.9, 0.1]] * 6 + [[0.2, 0.8]] * 2)
    a.update(probs.log())
    # the target is no longer the even labelled prior but the estimate; with momentum 0 the running mean
    # is this batch's mean, and the weights are target / mean
    assert a.target[0] > 0.6
    assert a.weights().tolist() == pytest.approx((a.target / probs.mean(0)).tolist(), rel=1e-5)
    again = ClassAligner(torch.tensor([0.5, 0.5]), momentum=0.0, estimate=True)
    again.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert again.target.tolist() == pytest.approx(a.target.tolist())


# ----------------------------------------------------------------------------- few-label evaluation

def test_results_state_the_labelled_budget_and_the_last_step_test_score(model_dir, tiny_text_data, tmp_path,  # noqa: F811
                                                                       one_thread):
    results = run(tiny_config(model_dir, tiny_text_data, tmp_path / "dev", **{"train.eval_every": 3}))
    assert results["labels"] == {"train": 20, "dev_for_selection": 40}
    last = results["test_last_step"]
    assert last["step"] == 12 and 0.0 <= last["accuracy"] <= 1.0
    if results["selected_model"]["step"] == 12:  # the selected step is the last: the same scores
        assert {k: v for k, v in last.items() if k != "step"} == results["test"]


def test_no_dev_set_means_fixed_steps_and_the_last_step(model_dir, tiny_text_data, tmp_path, one_thread):  # noqa: F811
    results = run(tiny_config(model_dir, tiny_text_data, tmp_path / "nodev", **{"data.dev_size": 0}))
    assert results["selected_model"] == {"step": 12, "by": "last step (no dev split)"}
    assert results["dev_history"] == [] and results["labels"] == {"train": 20, "dev_for_selection": 0}
    assert results["test_last_step"] == {"step": 12, **results["test"]}


def test_zero_steps_evaluates_the_start_alone(model_dir, tiny_text_data, tmp_path, one_thread):  # noqa: F811
    results = run(tiny_config(model_dir, tiny_text_data, tmp_path / "zeroshot",
                              **{"train.max_steps": 0, "train.warmup_steps": 0, "uda.lambda_u": 0}))
    assert results["selected_model"]["step"] == 0 and [h["step"] for h in results["dev_history"]] == [0]
    assert results["test"]["num_examples"] > 0 and results["test_last_step"]["step"] == 0
    assert training_lines(tmp_path / "zeroshot") == []


def test_a_soft_target_is_the_sharpened_aligned_distribution():
    from uda.consistency.base import sharpened

    logits = torch.tensor([[2.0, 0.5, -1.0]])
    assert sharpened(logits.softmax(-1), 0.5)[0].tolist() == pytest.approx((logits / 0.5).softmax(-1)[0].tolist(), rel=1e-5)
    m = fixmatch.FixMatch(Settings(threshold=0.0, hard=False, temperature=0.5), 2, 10, None)
    weights = torch.tensor([1.0, 3.0])  # distribution alignment's re-weighting of p
    d = m.decide(_logits([0.6, 0.4]), alignment=weights)
    aligned = torch.tensor([0.6 * 1.0, 0.4 * 3.0]) / (0.6 + 1.2)  # [1/3, 2/3]
    expected = aligned ** 2 / (aligned ** 2).sum()
    assert d.target_probs[0].tolist() == pytest.approx(expected.tolist(), rel=1e-5) and d.pseudo.tolist() == [1]


def test_pseudo_label_shares_are_compared_with_the_prior_over_the_window():
    from uda.step import decision_stats, ratios_from_counts

    prior = torch.tensor([0.5, 0.5])
    a = decision_stats(Decision(torch.tensor([0, 0]), torch.tensor([1.0, 1.0])), prior)
    b = decision_stats(Decision(torch.tensor([1, 1]), torch.tensor([1.0, 0.0])), prior)
    window = {k: (a[k] + b[k]) / 2 for k in a}  # two steps, their mean counts: class 0 twice, class 1 once
    out = ratios_from_counts(window, prior)
    assert out["unsup/pseudo_prior_gap"] == pytest.approx(0.5 * (abs(2 / 3 - 0.5) + abs(1 / 3 - 0.5)))
    assert not any(k.startswith("unsup/_") for k in out)
