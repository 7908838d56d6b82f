"""SoftMatch (Chen et al., 2023): a soft weight instead of a hard mask, from a truncated Gaussian over
the weak view's confidence.

The weak probabilities are first aligned towards the labelled class prior (uniform for a per-class
labelled sample, USB's uniform alignment): p_a = SumNorm(p * prior / p~), p~ the EMA of the unlabelled
predictions. weight = exp(-min(max p_a - mu_t, 0)^2 / (2 sigma_t^2 / n_sigma^2)) (n_sigma 2), mu_t and
sigma_t^2 the EMAs (m 0.999) of the batch mean and unbiased variance of max p_a (start 1/C and 1).
The pseudo-label is the argmax of the unaligned probabilities (USB: alignment decides the weight only).

On a distribution over positions (span start/end) there is no alignment and mu_0 = 0 (its C changes
with the batch).
"""

from __future__ import annotations

import torch

from uda.consistency.base import Decision, Method, ema, sums, weak_probs

READS = ("target", "temperature", "momentum", "n_sigma")


def aligned_to(probs: torch.Tensor, target: torch.Tensor, p_model: torch.Tensor) -> torch.Tensor:
    """SumNorm(p * (target + 1e-6) / (p_model + 1e-6)) per row (USB's DistAlignEMAHook)."""
    ratio = (target.float() + 1e-6) / (p_model.float() + 1e-6)
    out = probs * ratio.to(probs.device)
    return out / out.sum(dim=-1, keepdim=True).clamp(min=1e-12)


def truncated_gaussian_weight(max_probs: torch.Tensor, mu: float, var: float, n_sigma: float) -> torch.Tensor:
    """exp(-min(max_p - mu, 0)^2 / (2 var / n_sigma^2)): 1 at or above the mean confidence, falling off
    below it."""
    below = torch.clamp(max_probs - mu, max=0.0)
    return torch.exp(-(below ** 2) / (2.0 * max(var, 1e-12) / n_sigma ** 2))


def mean_and_variance(total: float, total_sq: float, n: float) -> tuple[float, float]:
    """The mean and unbiased variance of n values from their sum and sum of squares (n >= 2 for a
    variance; n = 1 gives variance 0)."""
    mean = total / n
    var = (total_sq - n * mean * mean) / (n - 1) if n > 1 else 0.0
    return mean, max(var, 0.0)


class SoftMatch(Method):
    name = "softmatch"
    state_names = ("mu", "var", "p_model")

    def init_state(self, c: int) -> None:
        self.mu = torch.tensor(1.0 / c if self.classes else 0.0, dtype=torch.float64)
        self.var = torch.tensor(1.0, dtype=torch.float64)
        prior = self.labeled_prior if self.labeled_prior is not None and self.classes else torch.full((c,), 1.0 / c)
        self.target_prior = prior.double()
        self.p_model = self.target_prior.clone()

    def _aligned(self, weak_logits) -> tuple[torch.Tensor, torch.Tensor]:
        probs = weak_probs(weak_logits)
        return probs, aligned_to(probs, self.target_prior, self.p_model) if self.classes else probs

    def decide(self, weak_logits, *, idx=None, labeled_probs=None, alignment=None) -> Decision:
        probs, aligned = self._aligned(weak_logits)
        pseudo, soft = self.target(weak_logits, probs)
        weight = truncated_gaussian_weight(aligned.max(dim=-1).values, float(self.mu), float(self.var), self.s.n_sigma)
        return Decision(pseudo, weight, soft, threshold=float(self.mu))

    def observe(self, weak_logits, decision, *, idx=None, labeled_probs=None, alignment=None) -> dict:
        probs, aligned = self._aligned(weak_logits)
        max_a = aligned.max(dim=-1).values
        observed = sums(max_p=max_a.sum(), max_p_sq=(max_a.double() ** 2).sum(), n=torch.tensor(float(len(probs))))
        if self.classes:
            observed.update(sums(probs=probs.sum(dim=0)))
        return observed

    def update(self, observed: dict) -> None:
        n = float(observed.get("sum_n", 0.0))
        if n == 0:
            return
        mean, var = mean_and_variance(float(observed["sum_max_p"]), float(observed["sum_max_p_sq"]), n)
        m = self.s.momentum
        self.mu = ema(self.mu, torch.tensor(mean, dtype=torch.float64), m)
        self.var = ema(self.var, torch.tensor(var, dtype=torch.float64), m)
        if self.classes:
            self.p_model = ema(self.p_model, observed["sum_probs"] / n, m)
