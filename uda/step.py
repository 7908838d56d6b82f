"""One UDA training step's losses: supervised loss with TSA, consistency loss, total.

A plain function of the task, the model and the batches, so a test can call it on a tiny model and
compare with golden numbers. It builds the graph; the loop calls ``backward`` and steps the
optimizer (both stay visible in ``uda/train.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from uda.consistency import Decision, Family, MethodOutput
from uda.losses import class_prediction_stats, consistency_loss, total_loss, tsa_supervised_loss
from uda.task import SupervisedTerm


@dataclass
class StepOutput:
    loss: torch.Tensor  # sup + lambda_u * unsup, with its graph
    sup_loss: torch.Tensor
    unsup_loss: Optional[torch.Tensor]  # None: supervised only
    class_log_probs: Optional[torch.Tensor] = None  # (B, K) the original view's class log-probabilities
    stats: dict[str, float] = field(default_factory=dict)  # what the loop logs (measured values only)
    observed: dict = field(default_factory=dict)  # distribution -> what a method's state update needs


def uda_step(task: Any, model: torch.nn.Module, batch_l: dict, views: Optional[tuple[dict, dict]], *,
             tsa: Callable[[int], float], lambda_u: float, tsa_num_classes: int = 2,
             class_logits_index: Optional[int] = None, temperature: Optional[float] = None,
             confidence: Optional[float] = None, hard: bool = False, alignment: Optional[torch.Tensor] = None,
             hidden_labels: Optional[torch.Tensor] = None, family: Optional[Family] = None,
             unlabeled_index: Optional[torch.Tensor] = None, class_prior: Optional[torch.Tensor] = None) -> StepOutput:
    """Losses of one micro-batch.

    batch_l: the labelled batch (model inputs + labels). views: (original, augmented) model inputs of
    the unlabelled batch, or None for supervised only. tsa: the TSA threshold for a head of K classes
    (``lambda k: 1.0``: off); each supervised term is masked with its own. tsa_num_classes: the K of a
    task whose supervised output has no terms of its own. class_logits_index: which of the consistency
    logits is a distribution over classes (None: none), the one that ``alignment`` (the
    distribution-alignment weights) reweights and the class-spread stats describe.
    hidden_labels: labels of the unlabelled examples that training never reads (-1: unknown), for
    the unsup/target_accuracy diagnostic only.
    family: the consistency method when it is not uda (``uda.consistency``; None: uda, with the
    temperature, confidence, hard and alignment arguments); unlabeled_index: the unlabelled examples'
    indices in the pool (FlexMatch's per-example state); class_prior: the labelled class shares (the
    pseudo-label shares are compared with them).
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
    if family is not None:
        return _family_step(family, sup_loss, stats, ori_logits, aug_logits, lambda_u, class_index, alignment,
                            sup.class_probs, unlabeled_index, hidden_labels, class_prior)
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


def _family_step(family: Family, sup_loss: torch.Tensor, stats: dict, ori_logits: list, aug_logits: list,
                 lambda_u: float, class_index: Optional[int], alignment: Optional[torch.Tensor],
                 labeled_probs: Optional[torch.Tensor], idx: Optional[torch.Tensor], hidden: Optional[torch.Tensor],
                 class_prior: Optional[torch.Tensor]) -> StepOutput:
    """The rest of the step for a method of the FixMatch family: each distribution's loss and extra term
    (FreeMatch's fairness, outside lambda_u), and what each method decided, for the logs."""
    outs: list[MethodOutput] = []
    for j, (o, a) in enumerate(zip(ori_logits, aug_logits)):
        here = j == class_index
        outs.append(family.loss(j, o, a, idx=idx if here else None, labeled_probs=labeled_probs if here else None,
                                alignment=alignment if here else None))
    unsup_loss = torch.stack([out.loss for out in outs]).mean()
    extras = [out.extra for out in outs if out.extra is not None]
    loss = total_loss(sup_loss, unsup_loss, lambda_u) + (torch.stack(extras).sum() if extras else 0.0)
    weights = [out.decision.weight for out in outs]
    stats.update({"unsup/loss": unsup_loss.item(), "train/loss": loss.item(),
                  "unsup/mask_ratio": float(torch.stack([w.mean() for w in weights]).mean()),
                  "unsup/used_ratio": float(torch.stack([(w > 0).float().mean() for w in weights]).mean())})
    if extras:
        stats["unsup/fairness"] = float(torch.stack(extras).sum())
    main = outs[class_index] if class_index is not None else outs[0]
    stats.update(decision_stats(main.decision, class_prior if class_index is not None else None))
    class_log_probs = None
    if class_index is not None:
        o = ori_logits[class_index]
        class_log_probs = o.float().log_softmax(-1)
        stats.update({f"unsup/{k}": v for k, v in class_prediction_stats(o).items()})
        stats.update(target_accuracy(o, main.decision.weight, hidden, pseudo=main.decision.pseudo))
    return StepOutput(loss, sup_loss, unsup_loss, class_log_probs, stats,
                      observed={j: out.observed for j, out in enumerate(outs) if out.observed})


def decision_stats(decision: Decision, prior: Optional[torch.Tensor]) -> dict:
    """What a method decided, for the logs: its global threshold, the range of its per-class thresholds,
    and the weighted counts of its pseudo-labels per class (ratios_from_counts compares their shares over
    the logging window with the labelled prior: unsup/pseudo_prior_gap)."""
    out = {}
    if decision.threshold is not None:
        out["unsup/threshold"] = float(decision.threshold)
    if decision.class_thresholds is not None:
        out["unsup/class_threshold_min"] = float(decision.class_thresholds.min())
        out["unsup/class_threshold_max"] = float(decision.class_thresholds.max())
    if prior is not None:  # weighted counts, every class each step: a window (and processes) add them up
        w = decision.weight.detach().float().cpu()
        counts = torch.zeros(len(prior)).index_add_(0, decision.pseudo.cpu(), w)
        out.update({f"unsup/_pseudo_{c}": float(v) for c, v in enumerate(counts)})
    return out


def target_accuracy(ori_logits: torch.Tensor, mask: torch.Tensor, hidden: Optional[torch.Tensor],
                    pseudo: Optional[torch.Tensor] = None) -> dict:
    """Counts behind unsup/target_accuracy (the target's class, by default the original view's argmax,
    against labels training never reads) and unsup/confident_target_accuracy (the same over the examples
    the mask keeps). Counts, not ratios, so that a logging window averages over examples (see
    ratios_from_counts)."""
    if hidden is None:
        return {}
    known = hidden >= 0
    predicted = ori_logits.argmax(-1) if pseudo is None else pseudo
    right = (predicted.cpu() == hidden) & known
    kept = mask.detach().cpu() > 0
    return {"unsup/_target_right": float(right.sum()), "unsup/_target_n": float(known.sum()),
            "unsup/_confident_right": float((right & kept).sum()), "unsup/_confident_n": float((known & kept).sum())}


def ratios_from_counts(scalars: dict, prior: Optional[torch.Tensor] = None) -> dict:
    """Turn the window's mean counts of target_accuracy into the two accuracies, and those of
    decision_stats into unsup/pseudo_prior_gap: the total variation between the kept pseudo-labels'
    class shares over the window and the labelled ``prior`` (0: the same shares, 1: disjoint). Absent
    counts: nothing."""
    out = {k: v for k, v in scalars.items() if not k.startswith("unsup/_")}
    for name, right, n in (("unsup/target_accuracy", "unsup/_target_right", "unsup/_target_n"),
                           ("unsup/confident_target_accuracy", "unsup/_confident_right", "unsup/_confident_n")):
        if scalars.get(n, 0) > 0:
            out[name] = scalars[right] / scalars[n]
    pseudo = [scalars[k] for k in sorted((k for k in scalars if k.startswith("unsup/_pseudo_")),
                                         key=lambda k: int(k.rsplit("_", 1)[1]))]
    if prior is not None and pseudo and sum(pseudo) > 0:
        out["unsup/pseudo_prior_gap"] = 0.5 * sum(abs(p / sum(pseudo) - float(q)) for p, q in zip(pseudo, prior))
    return out
