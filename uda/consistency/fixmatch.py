"""FixMatch (Sohn et al., 2020): train the strong view on the weak view's argmax wherever the weak view
is confident. mask = 1[max p_w >= tau] (tau 0.95), L_u = mean(mask * CE(argmax p_w, strong)).
No state."""

from __future__ import annotations

import torch

from uda.consistency.base import Decision, Method, weak_probs

READS = ("threshold", "target", "temperature")


def fixed_threshold_mask(max_probs: torch.Tensor, threshold: float) -> torch.Tensor:
    """1 where the weak view's max probability reaches ``threshold`` (>=, as USB), else 0."""
    return (max_probs >= threshold).float()


class FixMatch(Method):
    name = "fixmatch"

    def decide(self, weak_logits, *, idx=None, labeled_probs=None, alignment=None) -> Decision:
        probs = weak_probs(weak_logits, alignment)
        pseudo, soft = self.target(weak_logits, probs)
        weight = fixed_threshold_mask(probs.max(dim=-1).values, self.s.threshold)
        return Decision(pseudo, weight, soft, threshold=self.s.threshold)
