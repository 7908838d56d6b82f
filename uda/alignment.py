"""Distribution alignment's state across steps: the class weights that re-weight the original view's
probabilities before sharpening and masking (a guard against every unlabelled example drifting to
one class). The maths is in ``uda.losses`` (``aligned_log_probs``, ``prior_matching_offsets``); this
holds what it needs from past steps, and is saved in checkpoints so a resumed run aligns the same.
"""

from __future__ import annotations

from typing import Optional

import torch

from uda.losses import estimate_class_prior, prior_matching_offsets

ESTIMATE_BANK = 1024  # recent predictions the class prior is estimated from, when no alignment_bank is set


class ClassAligner:
    """Two ways to turn past unlabelled predictions into alignment weights (both start at weights 1):

    - running mean (``bank_size`` None; ReMixMatch, AdaMatch): weights = prior / m, where m is the
      running mean (``momentum``) of the predicted class distribution;
    - prior matching (``bank_size`` N): weights = exp(b), where b are the class offsets under which the
      last N original-view predictions have the labelled class shares on average
      (``prior_matching_offsets``): the decision boundary moves as far as the drift needs.

    The target is the labelled class prior, or with ``estimate`` the class prior of the unlabelled data
    estimated from the recent predictions (``estimate_class_prior``, the labelled prior as the one the
    model was trained on): on unbalanced data with a per-class labelled sample the labelled prior is
    uniform, and aiming at it would pull a rare class up to 1/K.
    """

    def __init__(self, prior: torch.Tensor, momentum: float, bank_size: Optional[int] = None,
                 estimate: bool = False):
        self.prior = prior.detach().float().cpu()
        self.momentum, self.bank_size, self.estimate = momentum, bank_size, estimate
        self.ema = self.prior.clone()
        self.target = self.prior.clone()
        self.bank = torch.empty(0, len(self.prior))  # (<= bank_size, K) log-probabilities, oldest first
        self._weights = torch.ones(len(self.prior))

    def weights(self) -> torch.Tensor:
        return self._weights

    def update(self, log_probs: torch.Tensor) -> None:
        """Take one optimizer step's original-view log-probabilities (N, K), from every process."""
        log_probs = log_probs.detach().float().cpu()
        if self.bank_size is not None or self.estimate:
            self.bank = torch.cat([self.bank, log_probs])[-(self.bank_size or ESTIMATE_BANK):]
        if self.estimate:
            self.target = estimate_class_prior(self.bank.exp(), self.prior)
        if self.bank_size is None:
            mean = log_probs.exp().mean(dim=0)
            self.ema = self.momentum * self.ema + (1 - self.momentum) * mean
            self._weights = self.target / self.ema
        else:
            self._weights = prior_matching_offsets(self.bank, self.target).exp()

    def state_dict(self) -> dict:
        return {"class_ema": self.ema.tolist(), "bank": self.bank.tolist(), "weights": self._weights.tolist(),
                "target": self.target.tolist()}

    def load_state_dict(self, state: dict) -> None:
        self.ema = torch.tensor(state["class_ema"], dtype=torch.float32)
        self.bank = torch.tensor(state["bank"], dtype=torch.float32).reshape(-1, len(self.prior))
        self._weights = torch.tensor(state["weights"], dtype=torch.float32)
        self.target = torch.tensor(state["target"], dtype=torch.float32)
