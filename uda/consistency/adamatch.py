"""AdaMatch (Berthelot et al., 2022): a threshold relative to the model's confidence on labelled data,
after distribution alignment towards the labelled predictions.

p_a = SumNorm(p_w * (p~_lb + 1e-6) / (p~_ulb + 1e-6)), p~_lb and p~_ulb the EMAs (m 0.999, start 1/C)
of the labelled batch's and the unlabelled batch's mean predictions; threshold = tau * mean over the
labelled batch of max p_lb (tau 0.95); mask = 1[max p_a >= threshold]; the target is p_a's argmax
(or p_a itself when soft). Needs the task's class probabilities on the labelled batch.

On a distribution over positions (span start/end) there is no labelled counterpart: no alignment, and
the threshold is tau itself.
"""

from __future__ import annotations

from typing import Optional

import torch

from uda.consistency.base import Decision, Method, ema, sums, weak_probs
from uda.consistency.softmatch import aligned_to
from uda.errors import ConfigError

READS = ("threshold", "target", "momentum")


def relative_threshold(threshold: float, labeled_probs: Optional[torch.Tensor]) -> float:
    """tau * mean_b max_c p_lb[b, c]; ``labeled_probs`` None: tau."""
    if labeled_probs is None or not len(labeled_probs):
        return threshold
    return threshold * float(labeled_probs.detach().float().max(dim=-1).values.mean())


class AdaMatch(Method):
    name = "adamatch"
    state_names = ("p_labeled", "p_model")

    def init_state(self, c: int) -> None:
        self.p_labeled = torch.full((c,), 1.0 / c, dtype=torch.float64)
        self.p_model = torch.full((c,), 1.0 / c, dtype=torch.float64)

    def _checked(self, labeled_probs):
        if self.classes and labeled_probs is None:
            raise ConfigError("uda.method adamatch needs the labelled batch's class probabilities, which this task "
                              "does not give (SupervisedOutput.class_probs): choose another method")
        return labeled_probs if self.classes else None

    def decide(self, weak_logits, *, idx=None, labeled_probs=None, alignment=None) -> Decision:
        labeled_probs = self._checked(labeled_probs)
        probs = weak_probs(weak_logits)
        aligned = aligned_to(probs, self.p_labeled, self.p_model) if self.classes else probs
        threshold = relative_threshold(self.s.threshold, labeled_probs)
        pseudo = aligned.argmax(dim=-1)
        weight = (aligned.max(dim=-1).values >= threshold).float()
        return Decision(pseudo, weight, None if self.s.hard else aligned, threshold=threshold)

    def observe(self, weak_logits, decision, *, idx=None, labeled_probs=None, alignment=None) -> dict:
        labeled_probs = self._checked(labeled_probs)
        if not self.classes:
            return {}
        probs = weak_probs(weak_logits)
        lp = labeled_probs.detach().float()
        return sums(probs=probs.sum(dim=0), n=torch.tensor(float(len(probs))), labeled=lp.sum(dim=0),
                    n_labeled=torch.tensor(float(len(lp))))

    def update(self, observed: dict) -> None:
        if not self.classes or not float(observed.get("sum_n", 0.0)):
            return
        m = self.s.momentum
        self.p_model = ema(self.p_model, observed["sum_probs"] / float(observed["sum_n"]), m)
        if float(observed["sum_n_labeled"]):
            self.p_labeled = ema(self.p_labeled, observed["sum_labeled"] / float(observed["sum_n_labeled"]), m)
