"""The optimizer's parameter groups: what the training loop, the MLM stage and the QA start share."""

from __future__ import annotations

from typing import Optional

import torch

from uda.errors import ConfigError


def encoder_parameter_ids(model: torch.nn.Module) -> set[int]:
    """ids of the pretrained encoder's parameters: those of transformers' ``base_model`` of the model
    (or of the model it wraps, ``.inner``); every other parameter is a head the task added."""
    inner = getattr(model, "inner", model)
    base = getattr(inner, "base_model", None)
    if not isinstance(base, torch.nn.Module):
        raise ConfigError(f"train.head_lr needs a transformers model (with base_model); {type(inner).__name__} has none")
    return {id(p) for p in base.parameters()}


def param_groups(model: torch.nn.Module, weight_decay: float, lr: float,
                 head_lr: Optional[float] = None) -> list[dict]:
    """AdamW groups: no weight decay on biases and LayerNorm weights (as BERT's optimizer); with
    ``head_lr``, the parameters outside the pretrained encoder (see :func:`encoder_parameter_ids`)
    in groups of their own at that learning rate."""
    encoder = encoder_parameter_ids(model) if head_lr is not None else None
    groups: dict[tuple[bool, bool], list] = {(h, d): [] for h in (False, True) for d in (True, False)}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        head = encoder is not None and id(p) not in encoder
        decay = not (p.ndim < 2 or "LayerNorm" in name or "layer_norm" in name)
        groups[(head, decay)].append(p)
    return [{"params": ps, "weight_decay": weight_decay if decay else 0.0, "lr": head_lr if head else lr}
            for (head, decay), ps in groups.items() if ps or not head]
