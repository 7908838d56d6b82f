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


def resolve_precision(requested: str, device_type: str, native_bf16: bool, cuda_bf16: bool = False,
                      allow_emulated: bool = False) -> tuple[str, str]:
    """(the mixed precision to train in: "no", "bf16" or "fp16"; a one-line reason for the user) of
    train.mixed_precision ``requested`` on a device of type ``device_type`` ("cpu", "cuda", ...).
    ``native_bf16``: the CPU runs bfloat16 natively (:func:`cpu_has_native_bf16`); ``cuda_bf16``: the
    GPU supports it (``torch.cuda.is_bf16_supported()``). "auto" picks bf16 only where the device runs
    it natively, else float32. An explicit "bf16" on a CPU that would emulate it is refused unless
    ``allow_emulated``; "fp16" on the CPU is refused (accelerate would silently train in float32)."""
    from uda.errors import ConfigError

    on_cpu = device_type == "cpu"
    if requested == "auto":
        if on_cpu:
            return ("bf16", "auto: this CPU runs bfloat16 natively (AVX-512 or AMX)") if native_bf16 else \
                ("no", "auto: this CPU has no native bfloat16, so float32")
        if device_type == "cuda":
            return ("bf16", "auto: this GPU supports bfloat16") if cuda_bf16 else \
                ("no", "auto: this GPU has no bfloat16, so float32")
        return "no", f"auto: bfloat16 support is not known on device '{device_type}', so float32"
    if requested == "no":
        return "no", "train.mixed_precision no: float32"
    if requested == "fp16":
        if on_cpu:
            raise ConfigError("train.mixed_precision=fp16 needs a GPU (on the CPU accelerate would silently train in "
                              "float32); use --train.mixed_precision auto (bf16 where the CPU runs it natively) or no")
        return "fp16", "train.mixed_precision fp16, with loss scaling"
    if requested != "bf16":
        raise ConfigError(f"train.mixed_precision must be auto, no, fp16 or bf16, got {requested!r}")
    if not on_cpu or native_bf16:
        return "bf16", "train.mixed_precision bf16"
    if not allow_emulated:
        raise ConfigError("train.mixed_precision=bf16, but this CPU has no native bfloat16 instructions (oneDNN needs "
                          "AVX-512 or AMX for them): bf16 would be emulated and many times slower than float32; use "
                          "--train.mixed_precision auto (bf16 only where the CPU runs it natively) or no, or add "
                          "--train.allow_emulated_bf16 true to train in emulated bf16 anyway")
    return "bf16", ("train.mixed_precision bf16 with train.allow_emulated_bf16: this CPU has no native bfloat16 "
                    "instructions, so bf16 is emulated and much slower than float32")


def _device_type(cpu: bool) -> str:
    """The type of the device accelerate trains on: its process-wide state's (set up here if it is not yet)."""
    from accelerate.state import PartialState

    return PartialState(cpu=cpu).device.type


def _join_on_cpu() -> bool:
    # On a machine without a GPU, accelerate leaves each launched process on its own (all of them then
    # write the same run folder) unless it is told to join them over gloo on the CPU.
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.accelerator.is_available()


def _choice(cfg: Any, device_type: str) -> dict:
    cuda_bf16 = device_type == "cuda" and torch.cuda.is_bf16_supported()
    native = cpu_has_native_bf16() if device_type == "cpu" else False
    used, reason = resolve_precision(cfg.train.mixed_precision, device_type, native, cuda_bf16,
                                     cfg.train.allow_emulated_bf16)
    return {"requested": cfg.train.mixed_precision, "used": used, "reason": reason}


def used_precision(cfg: Any) -> str:
    """The mixed precision a run of ``cfg`` trains in on this process's device (train.mixed_precision with
    "auto" resolved): what a stage inside the run (the MLM stage) trains in and keys its cache by."""
    return _choice(cfg, _device_type(_join_on_cpu()))["used"]


def make_accelerator(cfg: Any) -> Any:
    """The run's Accelerator, checked against the launch and the config: every launched process joined
    (over gloo on a machine without a GPU), train.mixed_precision resolved for the device
    (:func:`resolve_precision`). The choice is ``accelerator.precision_choice`` ({"requested", "used",
    "reason"}) and the run's first lines say it."""
    from accelerate import Accelerator
    from tqdm.auto import tqdm

    from uda.errors import ConfigError

    launched = int(os.environ.get("WORLD_SIZE", "1"))  # processes started by torchrun / accelerate launch
    cpu = _join_on_cpu()
    choice = _choice(cfg, _device_type(cpu))  # refused before the Accelerator (and anything on disk) exists
    accelerator = Accelerator(mixed_precision=choice["used"], cpu=cpu)
    if accelerator.num_processes != launched:
        raise ConfigError(f"{launched} processes were launched but accelerate joined {accelerator.num_processes}; "
                          f"check the launcher's options (see README: multi-GPU and multi-node runs)")
    accelerator.precision_choice = choice
    if accelerator.is_main_process:
        tqdm.write(f"mixed precision: {choice['used']} ({choice['reason']})")
        if choice["used"] == "bf16" and accelerator.device.type == "cpu" and not cpu_has_native_bf16():
            tqdm.write("warning: bf16 is emulated on this CPU (no native bfloat16 instructions) and much slower "
                       "than float32; --train.mixed_precision auto picks float32 here")
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
