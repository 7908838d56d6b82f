"""The run's scalar log: metrics.jsonl and, optionally, TensorBoard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from uda.io import atomic_write_text


class MetricsLogger:
    """Writes every scalar to metrics.jsonl and (optionally) TensorBoard, from the main process.

    Each line is appended and each TensorBoard event flushed at once, so a killed run loses nothing it
    logged. A resumed run passes the checkpoint's step and line count: what the interrupted run logged
    after its checkpoint is cut from metrics.jsonl and hidden in TensorBoard (``purge_step``), so the
    curves continue without a gap or a repeat."""

    def __init__(self, run_dir: Path, tensorboard: bool, enabled: bool,
                 resume_step: Optional[int] = None, keep_lines: Optional[int] = None) -> None:
        self.enabled = enabled
        self.path = run_dir / "metrics.jsonl"
        self.lines = 0  # lines in metrics.jsonl; a checkpoint records it
        self.writer = None
        if not enabled:
            return
        if keep_lines is not None and self.path.exists():
            kept = self.path.read_text(encoding="utf-8").splitlines(keepends=True)[:keep_lines]
            atomic_write_text(self.path, "".join(kept))
        if self.path.exists():
            self.lines = len(self.path.read_text(encoding="utf-8").splitlines())
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"),
                                        purge_step=None if resume_step is None else resume_step + 1)

    def log(self, step: int, scalars: dict[str, float]) -> None:
        if not self.enabled:
            return
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, **scalars}) + "\n")
        self.lines += 1
        if self.writer is not None:
            for k, v in scalars.items():
                self.writer.add_scalar(k, v, step)
            self.writer.flush()

    def close(self) -> None:
        if self.writer:
            self.writer.close()

