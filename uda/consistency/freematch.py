"""FreeMatch (Wang et al., 2023): self-adaptive thresholds and a fairness term.

Global threshold tau_t = m tau_{t-1} + (1 - m) mean(max p_w) (tau_0 = 1/C), class-wise
p~_t = m p~_{t-1} + (1 - m) mean(p_w) and histogram h~_t of the weak argmax (both 1/C at the start),
mask = 1[max p_w >= tau_t * p~_t(q) / max_c p~_t(c)]. The fairness term, over the masked strong
predictions p_s with hard-label histogram h_s: L_f = sum_c a_c log(b_c) with a = SumNorm(p~ / h~)
and b = SumNorm(mean p_s / h_s) (USB's ``entropy_loss``, which adds it as is: the -H(a, b) of the
paper), weighted by lambda_f (0.001 in USB's NLP configs) outside lambda_u.

On a distribution over positions (span start/end) only the global threshold applies (tau_0 = 0 there:
its C changes with the batch), and there is no fairness term.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from uda.consistency.base import MASKED_LOGIT, Decision, Method, MethodOutput, ema, sums, weak_probs, \
    weighted_cross_entropy

READS = ("target", "temperature", "momentum", "fairness_weight")


def self_adaptive_thresholds(tau: float, p_model: torch.Tensor) -> torch.Tensor:
    """Per-class thresholds tau * p~(c) / max p~ (FreeMatch's local thresholds)."""
    return tau * p_model / p_model.max().clamp(min=1e-12)


def _scaled_and_normalised(p: torch.Tensor, hist: torch.Tensor) -> torch.Tensor:
    """SumNorm(p / hist), with 1/0 taken as 0 (a class absent from the histogram gets no mass)."""
    inverse = torch.where(hist > 0, 1.0 / hist.clamp(min=1e-30), torch.zeros_like(hist)).detach()
    scaled = p * inverse
    return scaled / scaled.sum().clamp(min=1e-12)


def fairness_term(strong_logits: torch.Tensor, mask: torch.Tensor, p_model: torch.Tensor,
                  hist: torch.Tensor) -> torch.Tensor:
    """sum_c a_c log(b_c + 1e-12), a = SumNorm(p~ / h~), b = SumNorm(mean p_s / h_s) over the examples the
    mask keeps (p_s: their strong-view probabilities, with gradient; h_s: the histogram of their argmax).
    0 when the mask keeps none."""
    keep = mask > 0
    if not bool(keep.any()):
        return strong_logits.float().sum() * 0.0
    probs_s = F.softmax(strong_logits[keep].float().clamp(min=MASKED_LOGIT), dim=-1)
    hist_s = torch.bincount(probs_s.argmax(dim=-1), minlength=probs_s.shape[-1]).float()
    hist_s = hist_s / hist_s.sum()
    a = _scaled_and_normalised(p_model.float().to(probs_s.device), hist.float().to(probs_s.device))
    b = _scaled_and_normalised(probs_s.mean(dim=0), hist_s)
    return (a.detach() * torch.log(b + 1e-12)).sum()


class FreeMatch(Method):
    name = "freematch"
    state_names = ("tau", "p_model", "hist")

    def init_state(self, c: int) -> None:
        self.tau = torch.tensor(1.0 / c if self.classes else 0.0, dtype=torch.float64)
        self.p_model = torch.full((c,), 1.0 / c, dtype=torch.float64)
        self.hist = torch.full((c,), 1.0 / c, dtype=torch.float64)

    def decide(self, weak_logits, *, idx=None, labeled_probs=None, alignment=None) -> Decision:
        probs = weak_probs(weak_logits, alignment)
        max_p = probs.max(dim=-1).values
        pseudo, soft = self.target(weak_logits, probs)
        tau = float(self.tau)
        if not self.classes:
            return Decision(pseudo, (max_p >= tau).float(), soft, threshold=tau)
        thresholds = self_adaptive_thresholds(tau, self.p_model).float().to(max_p.device)
        return Decision(pseudo, (max_p >= thresholds[pseudo]).float(), soft, threshold=tau,
                        class_thresholds=thresholds)

    def observe(self, weak_logits, decision, *, idx=None, labeled_probs=None, alignment=None) -> dict:
        probs = weak_probs(weak_logits, alignment)
        observed = sums(max_p=probs.max(dim=-1).values.sum(), n=torch.tensor(float(len(probs))))
        if self.classes:
            counts = torch.bincount(probs.argmax(dim=-1), minlength=probs.shape[-1])
            observed.update(sums(probs=probs.sum(dim=0), hist=counts))
        return observed

    def update(self, observed: dict) -> None:
        n = float(observed.get("sum_n", 0.0))
        if n == 0:
            return
        m = self.s.momentum
        self.tau = ema(self.tau, observed["sum_max_p"] / n, m)
        if self.classes:
            self.p_model = ema(self.p_model, observed["sum_probs"] / n, m)
            self.hist = ema(self.hist, observed["sum_hist"] / n, m)

    def loss(self, weak_logits, strong_logits, **kw) -> MethodOutput:
        decision = self.decide(weak_logits, **kw)
        extra: Optional[torch.Tensor] = None
        if self.classes and self.s.fairness_weight:
            extra = self.s.fairness_weight * fairness_term(strong_logits, decision.weight, self.p_model, self.hist)
        return MethodOutput(weighted_cross_entropy(strong_logits, decision), decision, extra,
                            self.observe(weak_logits, decision, **kw))
