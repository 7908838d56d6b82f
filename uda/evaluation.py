"""Evaluation helpers shared by tasks: length-sorted batches and a multi-process inference loop."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, Sequence

import numpy as np
import torch


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length (longest first), so that dynamic padding
    wastes little compute. Every index appears in exactly one batch."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def pad_right(sequences: Sequence[Sequence[int]], pad_id: int) -> dict[str, torch.Tensor]:
    """input_ids (B, T) right-padded with ``pad_id`` to the longest sequence, and their attention
    mask. What ``tokenizer.pad`` returns for right padding, built directly: evaluation pads every
    batch, and the tokenizer's per-example Python path costs a few per cent of it."""
    lens = np.fromiter((len(seq) for seq in sequences), dtype=np.int64, count=len(sequences))
    width = int(lens.max()) if len(lens) else 0
    mask = np.arange(width)[None, :] < lens[:, None]  # (B, T): row-major, the order of the flat tokens
    ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    ids[mask] = np.fromiter((t for seq in sequences for t in seq), dtype=np.int64, count=int(lens.sum()))
    return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask.astype(np.int64))}


def run_inference(
    forward: Callable[[dict], Any],
    batches: list[list[int]],
    collate: Callable[[list[int]], dict],
    accelerator: Any,
) -> tuple[np.ndarray, Any]:
    """Run ``forward`` without gradients (the caller puts the model in eval mode) over ``batches``, sharded across processes.

    Process r takes batches r, r + W, r + 2W, ... so every example is computed by exactly one
    process; the outputs are gathered to every process. ``forward`` returns a tensor (B, ...) or a
    dict of such tensors. Returns (indices, outputs) with outputs concatenated over batches on the
    CPU (tensors of different trailing lengths are right-padded with -inf).
    """
    device = accelerator.device
    rank, world = accelerator.process_index, accelerator.num_processes
    local: list[tuple[list[int], Any]] = []
    # one autocast context over every batch: the weights are cast to the compute dtype once per
    # evaluation, not at each forward (accelerate's per-forward autocast alone exits its context, and
    # so drops the cast weights, after every batch: 4-11% more CPU time on the offline MiniLM, batches
    # of 64 x 128 tokens, bf16, one thread; benchmarks/autocast_cache.py)
    autocast = accelerator.autocast() if hasattr(accelerator, "autocast") else nullcontext()
    with torch.inference_mode(), autocast:
        for b in range(rank, len(batches), world):
            batch = {k: v.to(device) for k, v in collate(batches[b]).items()}
            out = forward(batch)
            if isinstance(out, dict):
                out = {k: v.detach().float().cpu() for k, v in out.items()}
            else:
                out = out.detach().float().cpu()
            local.append((batches[b], out))
    if world > 1:
        from accelerate.utils import gather_object

        gathered = gather_object([local])
        local = [item for part in gathered for item in part]
    indices = np.array([i for idx, _ in local for i in idx], dtype=np.int64)
    if not local:
        return indices, torch.empty(0)
    if isinstance(local[0][1], dict):
        keys = local[0][1].keys()
        return indices, {k: _cat([o[k] for _, o in local]) for k in keys}
    return indices, _cat([o for _, o in local])


def _cat(tensors: list[torch.Tensor]) -> torch.Tensor:
    if tensors[0].dim() >= 2:
        width = max(t.shape[1] for t in tensors)
        tensors = [
            torch.nn.functional.pad(t, (0, width - t.shape[1]), value=float("-inf")) if t.shape[1] < width else t
            for t in tensors
        ]
    return torch.cat(tensors, dim=0)
