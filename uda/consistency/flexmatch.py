"""FlexMatch (Zhang et al., 2021): curriculum pseudo-labelling. Each class's threshold follows how many
unlabelled examples it has "learned": sigma_c = the number of unlabelled examples whose latest
confident (max p_w >= tau) prediction was c, beta_c = sigma_c / max(max_c sigma_c, n_unused) (with
threshold warm-up the examples never confident count in the normaliser, n_unused; without, they do
not), and the mask is max p_w >= tau * beta_q / (2 - beta_q) (the convex mapping). State: each
unlabelled example's latest confident class (-1: never) and beta; needs each example's index.

On a distribution over positions (span start/end) there are no classes to count: the threshold is
the fixed tau there.
"""

from __future__ import annotations

from typing import Optional

import torch

from uda.consistency.base import Decision, Method, weak_probs
from uda.consistency.fixmatch import fixed_threshold_mask
from uda.errors import ConfigError

READS = ("threshold", "target", "temperature", "threshold_warmup")


def class_learning_effect(selected: torch.Tensor, num_classes: int, warmup: bool) -> Optional[torch.Tensor]:
    """beta (C,) from each unlabelled example's latest confident class ``selected`` (N,), -1 for never.

    beta_c = sigma_c / max(sigma_c' over classes, and the never-confident count when ``warmup``). None
    while every example sits in one bucket (at the start: all never confident): beta then stays as it
    was (USB), 0 at the start, so that every class's threshold starts at 0."""
    counts = torch.bincount(selected[selected >= 0], minlength=num_classes).double()
    unused = float((selected < 0).sum())
    if max(float(counts.max()), unused) >= len(selected):
        return None
    denominator = max(float(counts.max()), unused) if warmup else float(counts.max())
    return counts / max(denominator, 1.0)


def flexible_thresholds(beta: torch.Tensor, threshold: float) -> torch.Tensor:
    """Per-class thresholds tau * beta / (2 - beta) (FlexMatch's convex mapping): 0 for a class not yet
    learned, tau for the best-learned one."""
    return threshold * beta / (2.0 - beta)


def record_confident(selected: torch.Tensor, idx: torch.Tensor, pseudo: torch.Tensor, max_probs: torch.Tensor,
                     threshold: float) -> torch.Tensor:
    """A copy of ``selected`` where each example of the batch whose max probability reaches ``threshold``
    now holds its pseudo-label (a later row of the same example wins)."""
    out = selected.clone()
    keep = max_probs >= threshold
    out[idx[keep].long().cpu()] = pseudo[keep].long().cpu()
    return out


class FlexMatch(Method):
    name = "flexmatch"
    state_names = ("selected", "beta")

    def init_state(self, c: int) -> None:
        self.selected = torch.full((self.num_unlabeled,), -1, dtype=torch.long)
        self.beta = torch.zeros(c, dtype=torch.float64)

    def decide(self, weak_logits, *, idx=None, labeled_probs=None, alignment=None) -> Decision:
        probs = weak_probs(weak_logits, alignment)
        max_p = probs.max(dim=-1).values
        pseudo, soft = self.target(weak_logits, probs)
        if not self.classes:
            return Decision(pseudo, fixed_threshold_mask(max_p, self.s.threshold), soft, threshold=self.s.threshold)
        thresholds = flexible_thresholds(self.beta, self.s.threshold).float().to(max_p.device)
        weight = (max_p >= thresholds[pseudo]).float()
        return Decision(pseudo, weight, soft, threshold=float(thresholds.mean()), class_thresholds=thresholds)

    def observe(self, weak_logits, decision, *, idx=None, labeled_probs=None, alignment=None) -> dict:
        if not self.classes:
            return {}
        if idx is None or len(idx) != len(decision.pseudo):
            raise ConfigError("uda.method flexmatch needs one row of the class distribution per unlabelled example "
                              "(its index); this task's rows do not match its examples: choose another method")
        max_p = weak_probs(weak_logits, alignment).max(dim=-1).values
        return {"idx": idx.long().cpu(), "pseudo": decision.pseudo.long().cpu(), "max_p": max_p.cpu()}

    def update(self, observed: dict) -> None:
        if not self.classes or "idx" not in observed:
            return
        self.selected = record_confident(self.selected, observed["idx"], observed["pseudo"], observed["max_p"],
                                         self.s.threshold)
        beta = class_learning_effect(self.selected, self.num_classes, self.s.threshold_warmup)
        if beta is not None:
            self.beta = beta

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if len(self.selected) != self.num_unlabeled:
            raise ConfigError(f"the checkpoint's flexmatch state covers {len(self.selected)} unlabelled examples and "
                              f"this run has {self.num_unlabeled}: the unlabelled pool changed; start a new run")
