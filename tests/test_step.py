"""Golden numbers for one UDA step (uda/step.py) on a tiny model: a 2x2 linear classifier with hand-set
weights, so every number below was computed by hand (numpy log-softmax) and written down."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from uda.step import uda_step
from uda.task import SupervisedOutput


class LinearTask:
    """A task whose model maps the input vector x to class logits."""

    def supervised(self, model, batch):
        logits = model(batch["x"])
        labels = batch["labels"]
        gold = logits.softmax(-1).gather(1, labels[:, None]).squeeze(1)
        return SupervisedOutput(F.cross_entropy(logits, labels, reduction="none"), gold,
                                (logits.argmax(-1) == labels).float())

    def consistency_logits(self, model, batch):
        return [model(batch["x"])]


@pytest.fixture
def model():
    m = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([[1.0, -1.0], [0.5, 0.5]]))
    return m


LABELED = {"x": torch.tensor([[1.0, 0.0], [0.0, 1.0]]), "labels": torch.tensor([0, 1])}
VIEWS = ({"x": torch.tensor([[2.0, 0.0], [0.0, 1.0]])}, {"x": torch.tensor([[1.0, 1.0], [0.0, 3.0]])})


def test_uda_step_golden(model):
    # gold probabilities 0.6225 and 0.8176; TSA threshold 0.7 keeps only the first example
    out = uda_step(LinearTask(), model, LABELED, VIEWS, tsa=lambda k: 0.7, lambda_u=2.0, temperature=0.5,
                   class_logits_index=0)
    assert out.sup_loss.item() == pytest.approx(0.4740769841801067, abs=1e-6)  # -log 0.6225, one kept
    assert out.unsup_loss.item() == pytest.approx(0.4311620567250497, abs=1e-6)  # KL(softmax(ori/T) || aug), mean
    assert out.loss.item() == pytest.approx(1.336401097630206, abs=1e-6)  # sup + 2 * unsup
    s = out.stats
    assert s["sup/trained_ratio"] == 0.5 and s["sup/accuracy"] == 1.0
    assert s["sup/gold_prob"] == pytest.approx((0.6224593312018546 + 0.8175744761936437) / 2, abs=1e-6)
    assert s["unsup/mask_ratio"] == 1.0 and s["unsup/max_class_share"] == 0.5
    assert s["unsup/pred_entropy"] == pytest.approx(0.9945939575681225, abs=1e-6)
    assert s["train/loss"] == pytest.approx(out.loss.item())
    # the gradient reaches the weights through the labelled and augmented branches only
    out.loss.backward()
    assert model.weight.grad is not None and model.weight.grad.abs().sum() > 0


def test_uda_step_confidence_and_supervised_only(model):
    # confidence 0.75 keeps the second unlabelled example only (max probabilities 0.731, 0.818)
    out = uda_step(LinearTask(), model, LABELED, VIEWS, tsa=lambda k: 0.7, lambda_u=2.0, temperature=0.5,
                   confidence=0.75, class_logits_index=0)
    assert out.unsup_loss.item() == pytest.approx(0.016799601520600994, abs=1e-6)  # 0.0336 / 2: all in the mean
    assert out.loss.item() == pytest.approx(0.5076761872213087, abs=1e-6)
    assert out.stats["unsup/mask_ratio"] == 0.5
    sup_only = uda_step(LinearTask(), model, LABELED, None, tsa=lambda k: 1.0, lambda_u=2.0, class_logits_index=0)
    assert sup_only.unsup_loss is None and "unsup/loss" not in sup_only.stats
    assert sup_only.loss.item() == pytest.approx((0.4740769841801067 + 0.20141327798275246) / 2, abs=1e-6)


def test_uda_step_all_masked_is_zero_not_nan(model):
    out = uda_step(LinearTask(), model, LABELED, VIEWS, tsa=lambda k: 0.5, lambda_u=1.0, confidence=0.99,
                   class_logits_index=0)
    assert out.sup_loss.item() == 0.0 and out.unsup_loss.item() == 0.0 and not torch.isnan(out.loss)
