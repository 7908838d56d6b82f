"""Golden-number tests for uda/losses.py (numbers computed by hand / with an independent numpy
log-softmax, written down here as literals)."""

import math

import pytest
import torch

from uda.losses import (aligned_log_probs, class_prediction_stats, consistency_loss, kl_divergence,
                        prior_matching_offsets, ramp, total_loss, tsa_supervised_loss, tsa_threshold)


# ----------------------------------------------------------------------------- TSA threshold

@pytest.mark.parametrize(
    "schedule,progress,k,expected",
    [
        ("linear", 0.0, 2, 0.5),
        ("linear", 1.0, 2, 1.0),
        ("linear", 0.5, 2, 0.75),
        ("linear", 0.0, 4, 0.25),
        ("linear", 1.0, 4, 1.0),
        ("exp", 0.0, 2, 0.5033689734995427),  # exp(-5)/2 + 1/2
        ("exp", 1.0, 2, 1.0),
        ("exp", 0.5, 2, 0.5410424993119494),  # exp(-2.5)/2 + 1/2
        ("log", 0.0, 2, 0.5),
        ("log", 1.0, 2, 0.9966310265004572),  # (1-exp(-5))/2 + 1/2
        ("log", 0.5, 2, 0.9589575006880506),  # (1-exp(-2.5))/2 + 1/2
        (None, 0.0, 2, 1.0),
        (None, 0.7, 5, 1.0),
    ],
)
def test_tsa_threshold_golden(schedule, progress, k, expected):
    assert tsa_threshold(schedule, progress, k) == pytest.approx(expected, abs=1e-12)


def test_tsa_threshold_rejects_unknown_schedule():
    with pytest.raises(ValueError, match="unknown TSA schedule"):
        tsa_threshold("cosine", 0.5, 2)


# ----------------------------------------------------------------------------- TSA supervised loss

def test_tsa_drops_on_gold_label_probability_not_max():
    # example 0: gold = class 0, p(gold) = 0.8808 > 0.75 -> dropped
    # example 1: gold = class 1, p(gold) = 0.1192 (max prob is 0.8808 on the wrong class) -> kept
    logits = torch.tensor([[1.5, -0.5], [1.5, -0.5]])
    labels = torch.tensor([0, 1])
    per_ex = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    gold_prob = logits.softmax(-1).gather(1, labels[:, None]).squeeze(1)
    loss, mask = tsa_supervised_loss(per_ex, gold_prob, 0.75)
    assert mask.tolist() == [0.0, 1.0]
    assert loss.item() == pytest.approx(2.1269280110429727, abs=1e-6)  # -log 0.1192, averaged over 1 kept


def test_tsa_threshold_is_strict():
    loss, mask = tsa_supervised_loss(torch.tensor([1.0, 3.0]), torch.tensor([0.75, 0.7500001]), 0.75)
    assert mask.tolist() == [1.0, 0.0]
    assert loss.item() == pytest.approx(1.0)


def test_tsa_all_masked_gives_zero_not_nan():
    per_ex = torch.tensor([0.3, 0.4], requires_grad=True)
    loss, mask = tsa_supervised_loss(per_ex, torch.tensor([0.99, 0.98]), 0.5)
    assert mask.sum().item() == 0
    assert loss.item() == 0.0 and not torch.isnan(loss)
    loss.backward()
    assert torch.equal(per_ex.grad, torch.zeros(2))


def test_tsa_mask_has_no_gradient():
    prob = torch.tensor([0.2, 0.9], requires_grad=True)
    per_ex = torch.tensor([1.0, 2.0], requires_grad=True)
    loss, mask = tsa_supervised_loss(per_ex, prob, 0.5)
    assert not mask.requires_grad
    loss.backward()
    assert prob.grad is None
    assert per_ex.grad.tolist() == [1.0, 0.0]


# ----------------------------------------------------------------------------- consistency loss

def test_consistency_golden_no_temperature():
    ori = torch.tensor([[2.0, 0.5, -1.0]])
    aug = torch.tensor([[1.0, 1.0, 0.0]])
    loss, mask = consistency_loss(ori, aug)
    assert loss.item() == pytest.approx(0.27952277264966424, abs=1e-6)
    assert mask.tolist() == [1.0]


def test_consistency_golden_with_temperature_sharpens_original_branch():
    ori = torch.tensor([[2.0, 0.5, -1.0]])
    aug = torch.tensor([[1.0, 1.0, 0.0]])
    loss, _ = consistency_loss(ori, aug, temperature=0.5)
    # target = softmax(ori / 0.5): sharpening the *original* branch, not the augmented one
    assert loss.item() == pytest.approx(0.6573284094657973, abs=1e-6)
    # sharpening the augmented branch instead would give a different number
    wrong, _ = consistency_loss(ori, aug / 0.5)
    assert wrong.item() != pytest.approx(loss.item(), abs=1e-3)


def test_consistency_identical_views_give_zero():
    torch.manual_seed(0)
    logits = torch.randn(5, 4)
    loss, _ = consistency_loss(logits, logits.clone())
    assert loss.item() == pytest.approx(0.0, abs=1e-7)


def test_consistency_is_a_true_kl_and_nonnegative():
    torch.manual_seed(1)
    ori, aug = torch.randn(16, 3), torch.randn(16, 3)
    lp, lq = ori.log_softmax(-1), aug.log_softmax(-1)
    per_ex = kl_divergence(lp, lq)
    assert (per_ex >= -1e-7).all()
    assert torch.allclose(per_ex, torch.nn.functional.kl_div(lq, lp, log_target=True, reduction="none").sum(-1), atol=1e-6)


def test_confidence_mask_uses_unsharpened_probabilities_and_all_examples_in_denominator():
    # example 0: max softmax = 0.7856 ; example 1: max softmax = 0.3672
    ori = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.0, 0.2]])
    aug = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    # with temperature 0.1, the sharpened max prob of example 1 would exceed 0.5; the mask must not see it
    loss, mask = consistency_loss(ori, aug, temperature=None, confidence=0.5)
    assert mask.tolist() == [1.0, 0.0]
    assert loss.item() == pytest.approx(0.27952277264966424 / 2, abs=1e-6)  # divided by 2, not by 1
    _, mask_t = consistency_loss(ori, aug, temperature=0.1, confidence=0.5)
    assert mask_t.tolist() == [1.0, 0.0]
    # strictness: a threshold equal to the max prob masks it out
    _, mask_eq = consistency_loss(ori[:1], aug[:1], confidence=0.7855970345892759 + 1e-9)
    assert mask_eq.tolist() == [0.0]


def test_consistency_all_masked_gives_zero_not_nan():
    ori = torch.zeros(3, 2)
    aug = torch.randn(3, 2, requires_grad=True)
    loss, mask = consistency_loss(ori, aug, confidence=0.9)
    assert mask.sum().item() == 0 and loss.item() == 0.0
    loss.backward()
    assert torch.isfinite(aug.grad).all()


def test_no_gradient_reaches_original_logits():
    ori = torch.randn(4, 3, requires_grad=True)
    aug = torch.randn(4, 3, requires_grad=True)
    loss, _ = consistency_loss(ori, aug, temperature=0.85)
    loss.backward()
    assert ori.grad is None
    assert aug.grad is not None and aug.grad.abs().sum() > 0


def test_masked_classes_do_not_give_nan():
    inf = float("inf")
    ori = torch.tensor([[1.0, 0.0, -inf, -inf], [0.5, -inf, 0.2, -inf]])
    aug = torch.tensor([[0.0, 1.0, -inf, -inf], [0.5, -inf, 0.2, -inf]], requires_grad=True)
    loss, _ = consistency_loss(ori, aug, temperature=0.85, confidence=0.1)
    assert torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(aug.grad).all()
    # equals the KL computed on the unmasked classes alone
    ref0, _ = consistency_loss(ori[:1, :2], aug.detach()[:1, :2], temperature=0.85)
    ref1, _ = consistency_loss(ori[1:, [0, 2]], aug.detach()[1:, [0, 2]], temperature=0.85)
    assert loss.item() == pytest.approx((ref0.item() + ref1.item()) / 2, abs=1e-6)


def test_low_precision_logits_computed_in_float32():
    ori = torch.tensor([[2.0, 0.5, -1.0]], dtype=torch.bfloat16)
    aug = torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.bfloat16)
    loss, _ = consistency_loss(ori, aug)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(0.27952277264966424, abs=1e-3)


# ----------------------------------------------------------------------------- hard target, alignment

def test_hard_target_golden_is_cross_entropy_on_argmax():
    ori = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.0, 0.2]])
    aug = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    loss, mask = consistency_loss(ori, aug, hard=True)
    assert mask.tolist() == [1.0, 1.0]
    assert loss.item() == pytest.approx(0.9803035463631804, abs=1e-6)  # (-log q0[0] - log q1[2]) / 2
    # the temperature plays no part in a one-hot target
    assert consistency_loss(ori, aug, temperature=0.5, hard=True)[0].item() == pytest.approx(loss.item(), abs=1e-7)
    # confidence masks on the unsharpened max probability, all examples stay in the denominator
    loss_c, mask_c = consistency_loss(ori, aug, confidence=0.5, hard=True)
    assert mask_c.tolist() == [1.0, 0.0]
    assert loss_c.item() == pytest.approx(0.43099740202912556, abs=1e-6)


def test_hard_target_has_no_gradient_into_original_and_all_masked_is_zero():
    ori = torch.randn(4, 3, requires_grad=True)
    aug = torch.randn(4, 3, requires_grad=True)
    loss, _ = consistency_loss(ori, aug, hard=True)
    loss.backward()
    assert ori.grad is None and aug.grad.abs().sum() > 0
    loss0, mask0 = consistency_loss(torch.zeros(3, 2), torch.randn(3, 2), confidence=0.9, hard=True)
    assert mask0.sum().item() == 0 and loss0.item() == 0.0


def test_distribution_alignment_golden():
    ori = torch.tensor([[2.0, 0.5, -1.0]])
    aug = torch.tensor([[1.0, 1.0, 0.0]])
    w = torch.tensor([0.5, 1.0, 4.0])  # target prior / model's running mean prediction
    assert aligned_log_probs(ori, w).exp()[0].tolist() == pytest.approx([0.54213563, 0.24193362, 0.21593075], abs=1e-6)
    assert consistency_loss(ori, aug, alignment=w)[0].item() == pytest.approx(0.07170478395007444, abs=1e-6)
    # alignment first, then sharpening of the aligned distribution
    assert consistency_loss(ori, aug, temperature=0.5, alignment=w)[0].item() == pytest.approx(0.2211799591988848,
                                                                                               abs=1e-6)
    # uniform weights change nothing (same as no alignment, with and without temperature)
    for t in (None, 0.85):
        same = consistency_loss(ori, aug, temperature=t, alignment=torch.full((3,), 7.0))[0]
        assert same.item() == pytest.approx(consistency_loss(ori, aug, temperature=t)[0].item(), abs=1e-6)


def test_prior_matching_offsets_golden():
    # 9 of 10 predictions saturated on class 0: the offsets that give the labelled 50/50 on average,
    # solved independently (scipy brentq on 0.9 s(L - 2t) + 0.1 s(-L - 2t) = 1/2, L = log 99): t = 2.186016840064639
    lp = torch.log(torch.tensor([[0.99, 0.01]] * 9 + [[0.01, 0.99]]))
    b = prior_matching_offsets(lp, torch.tensor([0.5, 0.5]))
    assert b.tolist() == pytest.approx([-2.186016840064639, 2.186016840064639], abs=1e-5)
    aligned = aligned_log_probs(lp, b.exp()).exp()
    assert aligned[0, 0].item() == pytest.approx(0.5555413872859738, abs=1e-5)  # the majority: no longer confident
    assert aligned[-1, 1].item() > 0.999  # the minority: more confident
    # one re-weighting by prior / mean (ReMixMatch's) leaves the majority confident
    one_step = aligned_log_probs(lp, torch.tensor([0.5, 0.5]) / lp.exp().mean(0)).exp()
    assert one_step[0, 0].item() == pytest.approx(0.922997236251831, abs=1e-5)
    # three classes, a non-uniform prior: the aligned mean is the prior, offsets have mean 0
    lp3 = torch.log_softmax(torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.0, 0.2], [3.0, -1.0, 0.0], [0.0, 1.0, 0.5]]), -1)
    prior = torch.tensor([0.2, 0.3, 0.5])
    b3 = prior_matching_offsets(lp3, prior)
    assert torch.softmax(lp3 + b3, -1).mean(0).tolist() == pytest.approx(prior.tolist(), abs=1e-6)
    assert b3.sum().item() == pytest.approx(0.0, abs=1e-6)
    # predictions that already have the prior's shares need no offsets
    assert prior_matching_offsets(torch.log(torch.tensor([[0.8, 0.2], [0.2, 0.8]])),
                                  torch.tensor([0.5, 0.5])).abs().max().item() < 1e-6


def test_class_aligner_running_mean_and_bank():
    from uda.alignment import ClassAligner

    prior = torch.tensor([0.5, 0.5])
    ema = ClassAligner(prior, momentum=0.9)
    assert ema.weights().tolist() == [1.0, 1.0]  # starts at the prior
    ema.update(torch.log(torch.tensor([[0.9, 0.1], [0.7, 0.3]])))  # batch mean (0.8, 0.2)
    assert ema.weights().tolist() == pytest.approx([0.5 / 0.53, 0.5 / 0.47], abs=1e-6)
    bank = ClassAligner(prior, momentum=0.9, bank_size=10)
    lp = torch.log(torch.tensor([[0.99, 0.01]] * 9 + [[0.01, 0.99]]))
    bank.update(lp[:4])
    bank.update(lp[4:])
    assert bank.weights().log().tolist() == pytest.approx([-2.186016840064639, 2.186016840064639], abs=1e-5)
    bank.update(torch.log(torch.tensor([[0.01, 0.99]] * 8)))  # keeps the last 10 rows only: 2 + 8 on class 1
    assert bank.bank.shape == (10, 2) and bank.weights()[0] > 1.0
    again = ClassAligner(prior, momentum=0.9, bank_size=10)
    again.load_state_dict(bank.state_dict())
    assert torch.equal(again.weights(), bank.weights()) and torch.equal(again.bank, bank.bank)
    mean = ClassAligner(prior, momentum=0.9)  # the running mean's state, saved and restored
    mean.load_state_dict(ema.state_dict())
    assert torch.equal(mean.weights(), ema.weights()) and torch.equal(mean.ema, ema.ema)


def test_class_prediction_stats_golden():
    stats = class_prediction_stats(torch.tensor([[2.0, 0.0], [1.0, 0.0], [0.0, 3.0]]))
    assert stats["pred_entropy"] == pytest.approx(0.9918508565362363, abs=1e-6)
    assert stats["max_class_share"] == pytest.approx(2 / 3)
    collapsed = class_prediction_stats(torch.tensor([[9.0, -9.0]] * 4))
    assert collapsed["max_class_share"] == 1.0 and collapsed["pred_entropy"] < 1e-5


def test_ramp():
    assert [ramp(s, 4) for s in (0, 1, 2, 4, 9)] == [0.0, 0.25, 0.5, 1.0, 1.0]
    assert ramp(0, None) == 1.0 and ramp(3, 0) == 1.0


def test_total_loss():
    sup, unsup = torch.tensor(1.0), torch.tensor(0.5)
    assert total_loss(sup, unsup, 2.0).item() == 2.0
    assert total_loss(sup, unsup, 0.0).item() == 1.0
    assert total_loss(sup, None, 1.0).item() == 1.0
    assert math.isclose(total_loss(sup, unsup, 1.0).item(), 1.5)
