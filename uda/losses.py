"""UDA loss maths as small pure functions (plain tensors in, tensors out).

Each function matches google-research/uda ``text/uda.py`` (``get_tsa_threshold``, the TSA mask in
``get_sup_loss``/``model_fn`` and ``kl_for_log_probs``/the ``unsup`` branch). ``None`` always means
"off". All probability maths runs in float32 whatever dtype the logits arrive in.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F

# A finite stand-in for -inf logits (masked-out classes, e.g. padding positions in QA span
# distributions): softmax still gives them probability 0, but p * (log p - log q) stays 0 instead
# of 0 * (-inf - -inf) = NaN, in the forward and the backward pass.
_MASKED_LOGIT = -1e9


def tsa_threshold(schedule: Optional[str], progress: float, num_classes: int) -> float:
    """Training Signal Annealing threshold eta_t = alpha_t * (1 - 1/K) + 1/K.

    ``progress`` = global_step / num_train_steps in [0, 1].
      linear: alpha = p                 # [0, 1]
      exp:    alpha = exp(5 (p - 1))    # [exp(-5), 1] = [6.7e-3, 1]
      log:    alpha = 1 - exp(-5 p)     # [0, 1 - exp(-5)] = [0, 0.993]
    ``None`` turns TSA off: the threshold is 1.0, so no example is ever dropped.
    """
    if schedule is None:
        return 1.0
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}")
    p = min(max(float(progress), 0.0), 1.0)
    if schedule == "linear":
        alpha = p
    elif schedule == "exp":
        alpha = math.exp((p - 1.0) * 5.0)
    elif schedule == "log":
        alpha = 1.0 - math.exp(-p * 5.0)
    else:
        raise ValueError(f"unknown TSA schedule {schedule!r}: use 'linear', 'exp', 'log' or None")
    return alpha * (1.0 - 1.0 / num_classes) + 1.0 / num_classes


def tsa_supervised_loss(
    per_example_loss: torch.Tensor, correct_prob: torch.Tensor, threshold: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask out labelled examples the model is already sure of.

    per_example_loss: (B,) cross-entropy of each labelled example.
    correct_prob:     (B,) model probability of the *gold* label (not the max probability).
    An example is dropped when correct_prob > threshold (strictly). The mask carries no gradient.
    Returns (loss, mask) with loss = sum(loss * mask) / max(sum(mask), 1): an all-masked batch
    gives 0, not NaN.
    """
    mask = (correct_prob.detach() <= threshold).to(per_example_loss.dtype)
    loss = (per_example_loss * mask).sum() / mask.sum().clamp(min=1.0)
    return loss, mask


def kl_divergence(target_log_probs: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
    """Per-example KL(target || q) = sum_c p_c (log p_c - log q_c), over the last dim. (B, C) -> (B,)."""
    p = target_log_probs.exp()
    return (p * (target_log_probs - log_probs)).sum(dim=-1)


def aligned_log_probs(logits: torch.Tensor, alignment: Optional[torch.Tensor]) -> torch.Tensor:
    """Distribution alignment (ReMixMatch, AdaMatch): log of p * w / sum(p * w), p = softmax(logits).

    ``alignment`` is a (C,) vector of positive weights, target class prior / running mean of the
    model's predictions, that pulls the predictions' class marginal towards the labelled prior (a
    guard against every unlabelled example drifting to one class). ``None``: log_softmax(logits).
    """
    log_p = F.log_softmax(logits.float(), dim=-1)
    if alignment is None:
        return log_p
    return F.log_softmax(log_p + alignment.float().clamp(min=1e-12).log(), dim=-1)


def prior_matching_offsets(log_probs: torch.Tensor, prior: torch.Tensor, iterations: int = 100) -> torch.Tensor:
    """Class offsets b (C,) such that mean_i softmax(log_probs_i + b) equals ``prior``.

    log_probs: (N, C) log-probabilities of N recent unlabelled predictions; prior: (C,) positive, sums to 1.
    Distribution alignment solved to its fixed point: ReMixMatch/AdaMatch re-weight once by
    prior / mean(p), which barely moves saturated predictions (90% of examples at p = 0.99 for one class
    stay there), so a model that has drifted to one class keeps producing one-class targets. Iterating
    b <- b + log prior - log mean softmax(log_probs + b) (Sinkhorn's scaling with a single marginal,
    written here because it is three lines) moves the decision boundary until the aligned predictions
    have the labelled class shares. Returns b normalised to mean 0; exp(b) is an alignment weight vector
    for ``aligned_log_probs``.
    """
    lp = log_probs.detach().float()
    log_prior = prior.detach().float().clamp(min=1e-12).log().to(lp.device)
    b = torch.zeros(lp.shape[-1], device=lp.device)
    for _ in range(iterations):
        mean = F.softmax(lp + b, dim=-1).mean(dim=0)
        b = b + log_prior - mean.clamp(min=1e-12).log()
    return b - b.mean()


def estimate_class_prior(probs: torch.Tensor, train_prior: torch.Tensor, iterations: int = 100) -> torch.Tensor:
    """The class prior of unlabelled data from a classifier's predictions on it (Saerens, Latinne and
    Decaestecker, 2002): EM that alternates re-weighting each prediction by pi / train_prior
    (renormalised) and taking their mean as the new pi, from pi = train_prior.

    probs: (N, C) predicted probabilities of N unlabelled examples; train_prior: (C,) the class shares
    the classifier was trained on (a per-class labelled sample: uniform). A classifier trained on even
    classes predicts a rare class too often; this is the share that is consistent with its
    predictions, what distribution alignment should aim at on unbalanced data. Written here because it
    is five lines."""
    p = probs.detach().double()
    base = train_prior.detach().double().clamp(min=1e-12).to(p.device)
    pi = base.clone()
    for _ in range(iterations):
        w = p * (pi / base)
        pi = (w / w.sum(dim=-1, keepdim=True).clamp(min=1e-300)).mean(dim=0)
    return pi.float()


def consistency_loss(
    ori_logits: torch.Tensor,
    aug_logits: torch.Tensor,
    temperature: Optional[float] = None,
    confidence: Optional[float] = None,
    hard: bool = False,
    alignment: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """UDA consistency loss between the original view (target) and the augmented view.

    ori_logits, aug_logits: (B, C). Classes that do not exist for an example may be given as -inf
    (or any very negative logit) in both; they contribute exactly 0.
    The target is computed without gradient (stop-gradient: no gradient ever reaches ``ori_logits``):
      p = softmax(ori_logits), re-weighted by ``alignment`` when given (see aligned_log_probs);
      soft (UDA):      target = p^(1/T) / sum p^(1/T), i.e. softmax(ori_logits / T) without alignment;
                       ``temperature=None`` means no sharpening;
      hard (FixMatch): target = one-hot argmax p (the temperature plays no part).
    mask = 1 where max p (the *unsharpened* probabilities) > confidence (strictly);
    ``confidence=None`` keeps every example.
    loss = sum(KL(target || softmax(aug_logits)) * mask) / B (for a one-hot target the KL is the
    cross-entropy -log q[argmax]): masked examples still count in the denominator (the reference's
    reduce_mean over all unlabelled examples).
    Returns (loss, mask).
    """
    if ori_logits.shape != aug_logits.shape:
        raise ValueError(f"ori_logits {tuple(ori_logits.shape)} and aug_logits {tuple(aug_logits.shape)} differ")
    with torch.no_grad():
        log_p = aligned_log_probs(ori_logits.detach().float().clamp(min=_MASKED_LOGIT), alignment)
        if confidence is not None:
            mask = (log_p.exp().max(dim=-1).values > confidence).float()
        else:
            mask = torch.ones(log_p.shape[0], device=log_p.device)
        if hard:
            target_log_probs = None
            pseudo = log_p.argmax(dim=-1)
        elif temperature is not None:
            target_log_probs = F.log_softmax(log_p / temperature, dim=-1)
        else:
            target_log_probs = log_p
    aug_log_probs = F.log_softmax(aug_logits.float().clamp(min=_MASKED_LOGIT), dim=-1)
    if hard:
        per_example = -aug_log_probs.gather(1, pseudo[:, None]).squeeze(1)
    else:
        per_example = kl_divergence(target_log_probs, aug_log_probs)
    loss = (per_example * mask).sum() / max(per_example.shape[0], 1)
    return loss, mask


def class_prediction_stats(logits: torch.Tensor) -> dict[str, float]:
    """How the predictions on an unlabelled batch spread over the classes (collapse shows at once).

    logits: (B, C). Returns the entropy of the batch's mean predicted distribution divided by log C
    (1: spread evenly, 0: one class), and the largest share of the argmax predictions.
    """
    probs = F.softmax(logits.detach().float(), dim=-1)
    mean = probs.mean(dim=0)
    c = probs.shape[-1]
    entropy = float(-(mean * mean.clamp(min=1e-12).log()).sum() / math.log(c)) if c > 1 else 0.0
    counts = torch.bincount(probs.argmax(dim=-1), minlength=c).float()
    return {"pred_entropy": entropy, "max_class_share": float(counts.max() / max(probs.shape[0], 1))}


def ramp(step: int, ramp_steps: Optional[int]) -> float:
    """Linear ramp-up weight min(step / ramp_steps, 1) in [0, 1]; ``None`` (or 0): 1 from the start."""
    if not ramp_steps:
        return 1.0
    return min(max(step, 0) / ramp_steps, 1.0)


def total_loss(sup_loss: torch.Tensor, unsup_loss: Optional[torch.Tensor], lambda_u: float) -> torch.Tensor:
    """total = sup + lambda_u * unsup (unsup None or lambda_u == 0: supervised only)."""
    if unsup_loss is None or lambda_u == 0:
        return sup_loss
    return sup_loss + lambda_u * unsup_loss
