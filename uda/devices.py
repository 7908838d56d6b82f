"""Device facts and accelerate's process-wide state: what the loop and the stages before it share."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


@contextmanager
def kept_accelerate_state() -> Iterator[None]:
    """Give accelerate's process-wide state back as it was, whatever the block does to it.

    accelerate keeps one state per process (device, processes, mixed precision), which every
    Accelerator shares. transformers' TrainingArguments (which SetFit's trainer builds, in the
    contrastive stage) resets it and sets up its own, so the run's Accelerator, made before the
    stage, would train after it without its mixed precision. And a run's state, left behind, would
    refuse the next run in the same process another precision (a sweep, a notebook)."""
    from accelerate.state import AcceleratorState, GradientState, PartialState

    kept = [(cls, dict(cls._shared_state)) for cls in (PartialState, AcceleratorState, GradientState)]
    try:
        yield
    finally:
        for cls, state in kept:  # in place: the Borg instances hold this very dict (see accelerate.state)
            cls._shared_state.clear()
            cls._shared_state.update(state)


def cpu_has_native_bf16() -> bool:
    """Whether oneDNN runs bfloat16 matmuls natively on this CPU (it needs AVX-512 or AMX). Where it does not,
    bf16 autocast is emulated and far slower than float32."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a private op: if a torch build lacks it, assume the CPU can
        return True
