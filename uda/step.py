"""One UDA training step's losses: supervised loss with TSA, consistency loss, total.

A plain function of the task, the model and the batches, so a test can call it on a tiny model and
compare with golden numbers. It builds the graph; the loop calls ``backward`` and steps the
optimizer (both stay visible in ``uda/train.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from uda.losses import class_prediction_stats, consistency_loss, total_loss, tsa_supervised_loss
from uda.task import SupervisedTerm


@dataclass
class StepOutput:
    loss: torch.Tensor  # sup + lambda_u * unsup, with its graph
    sup_loss: torch.Tensor
    unsup_loss: Optional[torch.Tensor]  # None: supervised only
    class_log_probs: Optional[torch.Tensor] = None  # (B, K) the original view's class log-probabilities
    stats: dict[str, float] = field(default_factory=dict)  # what the loop logs (measured values only)


def uda_step(task: Any, model: torch.nn.Module, batch_l: dict, views: Optional[tuple[dict, dict]], *,
             tsa: Callable[[int], float], lambda_u: float, tsa_num_classes: int = 2,
             class_logits_index: Optional[int] = None, temperature: Optional[float] = None,
             confidence: Optional[float] = None, hard: bool = False, alignment: Optional[torch.Tensor] = None,
             hidden_labels: Optional[torch.Tensor] = None) -> StepOutput:
    """Losses of one micro-batch.

    batch_l: the labelled batch (model inputs + labels). views: (original, augmented) model inputs of
    the unlabelled batch, or None for supervised only. tsa: the TSA threshold for a head of K classes
    (``lambda k: 1.0``: off); each supervised term is masked with its own. tsa_num_classes: the K of a
    task whose supervised output has no terms of its own. class_logits_index: which of the consistency
    logits is a distribution over classes (None: none), the one that ``alignment`` (the
    distribution-alignment weights) reweights and the class-spread stats describe.
    hidden_labels: labels of the unlabelled examples that training never reads (-1: unknown), for
    the unsup/target_accuracy diagnostic only.
    """
    sup = task.supervised(model, batch_l)
    terms = sup.terms or [SupervisedTerm("sup", sup.per_example_loss, sup.gold_prob, tsa_num_classes)]
    parts, masks = [], []
    for term in terms:
        loss_t, mask_t = tsa_supervised_loss(term.per_example_loss, term.gold_prob, tsa(term.num_classes))
        parts.append(term.weight * loss_t)
        masks.append(mask_t)
    sup_loss = torch.stack(parts).sum()
    stats = {"sup/loss": sup_loss.item(), "sup/trained_ratio": masks[0].mean().item(),
             "sup/accuracy": sup.correct.mean().item(), "sup/gold_prob": sup.gold_prob.mean().item()}
    if len(terms) > 1:  # each head's own share of examples TSA kept, and its own threshold (its K)
        stats.update({f"sup/trained_ratio_{t.name}": m.mean().item() for t, m in zip(terms, masks)})
        stats.update({f"sup/tsa_threshold_{t.name}": float(tsa(t.num_classes)) for t in terms})
    if views is None:
        stats["train/loss"] = sup_loss.item()
        return StepOutput(sup_loss, sup_loss, None, stats=stats)
    ori, aug = views
    # The original view is a stop-gradient target: no graph is built for it. The model stays in
    # train mode (dropout on), as in the reference.
    with torch.no_grad():
        ori_logits = task.consistency_logits(model, ori)
    aug_logits = task.consistency_logits(model, aug)
    class_index = class_logits_index
    terms = [consistency_loss(o, a, temperature, confidence, hard=hard,
                              alignment=alignment if j == class_index else None)
             for j, (o, a) in enumerate(zip(ori_logits, aug_logits))]
    unsup_loss = torch.stack([t[0] for t in terms]).mean()
    loss = total_loss(sup_loss, unsup_loss, lambda_u)
    stats.update({"unsup/loss": unsup_loss.item(),
                  "unsup/mask_ratio": float(torch.stack([t[1].mean() for t in terms]).mean()),
                  "train/loss": loss.item()})
    class_log_probs = None
    if class_index is not None:
        o = ori_logits[class_index]
        class_log_probs = o.float().log_softmax(-1)
        stats.update({f"unsup/{k}": v for k, v in class_prediction_stats(o).items()})
        stats.update(target_accuracy(o, terms[class_index][1], hidden_labels))
    return StepOutput(loss, sup_loss, unsup_loss, class_log_probs, stats)


def target_accuracy(ori_logits: torch.Tensor, mask: torch.Tensor, hidden: Optional[torch.Tensor]) -> dict:
    """Counts behind unsup/target_accuracy (the original view's argmax against labels training never
    reads) and unsup/confident_target_accuracy (the same over the examples the confidence mask keeps).
    Counts, not ratios, so that a logging window averages over examples (see ratios_from_counts)."""
    if hidden is None:
        return {}
    known = hidden >= 0
    right = (ori_logits.argmax(-1).cpu() == hidden) & known
    kept = mask.detach().cpu() > 0
    return {"unsup/_target_right": float(right.sum()), "unsup/_target_n": float(known.sum()),
            "unsup/_confident_right": float((right & kept).sum()), "unsup/_confident_n": float((known & kept).sum())}


def ratios_from_counts(scalars: dict) -> dict:
    """Turn the window's mean counts of target_accuracy into the two accuracies (absent: nothing)."""
    out = {k: v for k, v in scalars.items() if not k.startswith("unsup/_")}
    for name, right, n in (("unsup/target_accuracy", "unsup/_target_right", "unsup/_target_n"),
                           ("unsup/confident_target_accuracy", "unsup/_confident_right", "unsup/_confident_n")):
        if scalars.get(n, 0) > 0:
            out[name] = scalars[right] / scalars[n]
    return out
