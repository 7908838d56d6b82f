"""What every method of the consistency family shares: the decision a method takes on one unlabelled
batch, the loss it trains, and how its state is kept.

The weak view is the original text (no gradient), the strong view its augmented copy. A method turns
the weak view's probabilities into a target for each example (its pseudo-label, one-hot, or a soft
distribution) and a weight in [0, 1] (a confidence mask, or SoftMatch's soft weight), and the strong
view is trained towards the target: L_u = mean_b w_b * CE(target_b, strong_b), masked examples still
counted in the mean (USB's ``consistency_loss(..., 'ce', mask)``).

State (thresholds, EMAs, counts) changes once per optimizer step, from what every micro-batch and every
process observed in that step (``update``): each process then holds the same state, and a step's
micro-batches all decide with the state of the step before. USB updates with the batch just before
masking it; here the batch's own statistics count from the next step on (with momentum 0.999, one step
of the EMA), which is what keeps processes and micro-batches in agreement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn.functional as F

# A finite stand-in for -inf logits (padding positions of span distributions): probability 0, no NaN.
MASKED_LOGIT = -1e9


@dataclass
class Decision:
    """What a method decided for one distribution of an unlabelled batch (all without gradient)."""

    pseudo: torch.Tensor  # (B,) the target's class (its argmax)
    weight: torch.Tensor  # (B,) in [0, 1]; 0 drops the example
    target_probs: Optional[torch.Tensor] = None  # (B, C) soft target; None: one-hot pseudo
    threshold: Optional[float] = None  # the global threshold of this step (None: the method has none)
    class_thresholds: Optional[torch.Tensor] = None  # (C,) per-class thresholds, where the method has them


@dataclass
class MethodOutput:
    """One distribution's consistency loss, the extra term a method may add (outside lambda_u), what
    it decided, and what the step observed for the state update (sums, or rows with one per example)."""

    loss: torch.Tensor
    decision: Decision
    extra: Optional[torch.Tensor] = None  # FreeMatch's fairness term, already weighted
    observed: dict = field(default_factory=dict)  # "sum_*": summed over micro-batches and processes; else rows


def weak_probs(logits: torch.Tensor, alignment: Optional[torch.Tensor] = None) -> torch.Tensor:
    """softmax of the weak view's logits in float32, without gradient, optionally re-weighted by
    ``alignment`` (C,) and renormalised (distribution alignment)."""
    probs = F.softmax(logits.detach().float().clamp(min=MASKED_LOGIT), dim=-1)
    if alignment is not None:
        probs = probs * alignment.float().to(probs.device)
        probs = probs / probs.sum(dim=-1, keepdim=True).clamp(min=1e-12)
    return probs


def weighted_cross_entropy(strong_logits: torch.Tensor, decision: Decision) -> torch.Tensor:
    """mean over the batch of weight * CE(target, softmax(strong_logits)); the target is the one-hot
    pseudo-label, or ``decision.target_probs`` when soft. An all-zero weight gives 0 (not NaN)."""
    log_q = F.log_softmax(strong_logits.float().clamp(min=MASKED_LOGIT), dim=-1)
    if decision.target_probs is None:
        per_example = -log_q.gather(1, decision.pseudo[:, None].to(log_q.device)).squeeze(1)
    else:
        per_example = -(decision.target_probs.to(log_q.device) * log_q).sum(dim=-1)
    return (per_example * decision.weight.to(log_q.device)).sum() / max(per_example.shape[0], 1)


def sharpened(probs: torch.Tensor, temperature: float) -> torch.Tensor:
    """p^(1/T) / sum p^(1/T): the soft target of a method whose target is soft; for p = softmax(logits),
    softmax(logits / T) (USB's pseudo-label hook), and it keeps an alignment made before it."""
    return F.softmax(probs.float().clamp(min=1e-30).log() / temperature, dim=-1)


def ema(old: torch.Tensor, new: torch.Tensor, momentum: float) -> torch.Tensor:
    """m * old + (1 - m) * new."""
    return momentum * old + (1.0 - momentum) * new


@dataclass
class Settings:
    """A method's options, resolved (each method module says which it reads and their defaults)."""

    threshold: float = 0.95  # confidence threshold tau (fixmatch, flexmatch, adamatch)
    hard: bool = True  # one-hot pseudo-labels (False: soft targets softmax(logits / T))
    temperature: float = 0.5  # T of soft targets
    momentum: float = 0.999  # EMA momentum (freematch, softmatch, adamatch)
    fairness_weight: float = 0.001  # lambda_f of FreeMatch's fairness term
    n_sigma: float = 2.0  # SoftMatch's width of the truncated Gaussian
    threshold_warmup: bool = True  # FlexMatch counts the never-confident examples in its normaliser


class Method:
    """One distribution's method: ``decide`` and ``loss`` read the state, ``update`` changes it.

    ``classes`` tells whether the distribution is over the task's classes (a fixed C: the per-class
    parts apply) or over positions (span start/end, C varies with the batch: only the global parts
    apply). Subclasses list their state tensors in ``state_names``; ``state_dict`` saves them.
    """

    name = ""
    state_names: tuple[str, ...] = ()

    def __init__(self, settings: Settings, num_classes: Optional[int], num_unlabeled: int,
                 labeled_prior: Optional[torch.Tensor]):
        self.s, self.num_classes, self.num_unlabeled = settings, num_classes, num_unlabeled
        self.classes = num_classes is not None
        self.labeled_prior = labeled_prior
        self.init_state(num_classes or 1)

    def init_state(self, c: int) -> None:
        """Set the state tensors to their start for a distribution of ``c`` classes (1 over positions)."""

    def decide(self, weak_logits: torch.Tensor, *, idx: Optional[torch.Tensor] = None,
               labeled_probs: Optional[torch.Tensor] = None, alignment: Optional[torch.Tensor] = None) -> Decision:
        raise NotImplementedError

    def observe(self, weak_logits: torch.Tensor, decision: Decision, *, idx: Optional[torch.Tensor] = None,
                labeled_probs: Optional[torch.Tensor] = None, alignment: Optional[torch.Tensor] = None) -> dict:
        """What this batch adds to the state update ({} for a method without state)."""
        return {}

    def update(self, observed: dict) -> None:
        """Change the state with one optimizer step's observations, summed / gathered over micro-batches
        and processes."""

    def loss(self, weak_logits: torch.Tensor, strong_logits: torch.Tensor, **kw) -> MethodOutput:
        decision = self.decide(weak_logits, **kw)
        return MethodOutput(weighted_cross_entropy(strong_logits, decision), decision,
                            observed=self.observe(weak_logits, decision, **kw))

    def target(self, weak_logits: torch.Tensor, probs: torch.Tensor) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """(pseudo-label, soft target or None) of the weak view, by ``settings.hard``."""
        pseudo = probs.argmax(dim=-1)
        return pseudo, None if self.s.hard else sharpened(probs, self.s.temperature)

    def state_dict(self) -> dict:
        return {n: getattr(self, n).tolist() for n in self.state_names}

    def load_state_dict(self, state: dict) -> None:
        for n in self.state_names:
            old = getattr(self, n)
            setattr(self, n, torch.tensor(state[n], dtype=old.dtype))


def sums(**values: torch.Tensor) -> dict:
    """Observations that add up over micro-batches and processes, keyed ``sum_<name>`` (float64 on CPU)."""
    return {f"sum_{k}": v.detach().double().cpu() for k, v in values.items()}
