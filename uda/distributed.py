"""What the processes of a multi-process run agree on in the loop: whether a loss is finite, the
logged means, the rows each process saw, and the decisions the main process takes for all. With one
process each is a no-op."""

from __future__ import annotations

from typing import Any

import torch


def finite_everywhere(loss: torch.Tensor, accelerator: Any) -> bool:
    """True when the loss is finite on every process. All processes must take the same branch:
    one that skipped the backward pass would leave the others waiting in the gradient all-reduce."""
    bad = (~torch.isfinite(loss.detach())).float().reshape(1)
    if accelerator.num_processes > 1:
        bad = accelerator.reduce(bad, reduction="sum")
    return bad.item() == 0


def mean_over_processes(values: dict[str, float], accelerator: Any) -> dict[str, float]:
    """Average logged scalars over processes (each saw its own shard of the batch)."""
    if accelerator.num_processes == 1 or not values:
        return values
    keys = sorted(values)
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=accelerator.device)
    t = accelerator.reduce(t, reduction="mean")
    return dict(zip(keys, t.tolist()))


def gathered(rows: torch.Tensor, accelerator: Any) -> torch.Tensor:
    """This step's rows from every process (each process has the same number of rows)."""
    return accelerator.gather(rows.to(accelerator.device)) if accelerator.num_processes > 1 else rows


def main_decides(flags: tuple[bool, ...], accelerator: Any) -> tuple[bool, ...]:
    """The main process's ``flags`` on every process (a decision that all must take alike, such as a
    save that gathers from all of them)."""
    if accelerator.num_processes == 1:
        return flags
    from accelerate.utils import broadcast

    t = broadcast(torch.tensor([float(f) for f in flags], device=accelerator.device), from_process=0)
    return tuple(bool(v) for v in t.tolist())


def reduced_observations(micro_batches: list[dict], accelerator: Any) -> dict:
    """One optimizer step's observations for a consistency method's state (``uda.consistency``): for each
    distribution, the ``sum_*`` entries added up over the step's micro-batches and every process, the
    other entries (one row per example) concatenated and gathered from every process. Each process then
    updates its copy of the state with the same numbers."""
    out: dict = {}
    for j in sorted({j for mb in micro_batches for j in mb}):
        parts = [mb[j] for mb in micro_batches if j in mb]
        merged = {}
        for key in parts[0]:
            if key.startswith("sum_"):
                total = sum(p[key] for p in parts)
                if accelerator.num_processes > 1:
                    total = accelerator.reduce(total.to(accelerator.device), reduction="sum").cpu()
                merged[key] = total
            else:
                merged[key] = gathered(torch.cat([p[key] for p in parts]), accelerator).cpu()
        out[j] = merged
    return out
