"""Device facts, the run's Accelerator, and accelerate's process-wide state: what the loop and the
stages before it share."""

from __future__ import annotations

import os
import platform
from contextlib import contextmanager
from typing import Any, Iterator

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


def make_accelerator(cfg: Any) -> Any:
    """The run's Accelerator, checked against the launch and the config: every launched process joined
    (over gloo on a machine without a GPU), no fp16 on the CPU, a warning for emulated bf16."""
    from accelerate import Accelerator

    from uda.errors import ConfigError

    launched = int(os.environ.get("WORLD_SIZE", "1"))  # processes started by torchrun / accelerate launch
    # On a machine without a GPU, accelerate leaves each launched process on its own (all of them then
    # write the same run folder) unless it is told to join them over gloo on the CPU.
    accelerator = Accelerator(mixed_precision=cfg.train.mixed_precision,
                              cpu=launched > 1 and not torch.accelerator.is_available())
    if accelerator.num_processes != launched:
        raise ConfigError(f"{launched} processes were launched but accelerate joined {accelerator.num_processes}; "
                          f"check the launcher's options (see README: multi-GPU and multi-node runs)")
    if cfg.train.mixed_precision == "fp16" and accelerator.device.type == "cpu":
        raise ConfigError("train.mixed_precision=fp16 needs a GPU (on the CPU accelerate would silently train in "
                          "float32); use --train.mixed_precision bf16 on the CPU")
    if cfg.train.mixed_precision == "bf16" and accelerator.device.type == "cpu" and not cpu_has_native_bf16():
        from tqdm.auto import tqdm
        tqdm.write("warning: train.mixed_precision=bf16, but this CPU has no native bfloat16 instructions "
                   "(oneDNN needs AVX-512 or AMX for them), so bf16 is emulated and much slower than float32; "
                   "use --train.mixed_precision no here")
    return accelerator


def environment(device: torch.device) -> dict:
    """What the run ran on and with, for results.json: runs of one curve may come from different
    machines (a GPU box and a laptop), and a reader of the numbers must be able to tell them apart."""
    import transformers

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{platform.machine()} CPU, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"
    return {"device": device.type, "device_name": name, "python": platform.python_version(),
            "torch": torch.__version__, "transformers": transformers.__version__}
