"""What a training run is made of while it runs: the loop's own state (what a checkpoint restores
besides weights, optimizer and streams) and the run that ``uda.train.setup`` builds and the loop and
``finish`` use."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from uda import checkpoint
from uda.alignment import ClassAligner
from uda.config import Config
from uda.consistency import Family
from uda.errors import NonFiniteLossError, RunStopped
from uda.metrics_log import MetricsLogger
from uda.streams import BatchStream
from uda.task import Task, TaskData


@dataclass
class LoopState:
    """Everything of the loop that a checkpoint restores (besides weights, optimizer and streams)."""

    step: int = 0
    dev_history: list = field(default_factory=list)
    skipped: int = 0  # steps skipped for a non-finite loss
    bad_run: int = 0  # ... in a row
    window: dict = field(default_factory=dict)  # sums of the logged scalars since the last log line
    window_steps: int = 0
    window_examples: int = 0
    drawn: dict = field(default_factory=lambda: {"labeled": 0, "unlabeled": 0})  # examples this process trained on
    train_seconds_before: float = 0.0  # training time of the runs this one continues
    # their CPU time (all threads, setup to their last checkpoint): on one thread, about the wall time
    # the run would take alone on a core, whatever else the machine runs
    cpu_seconds_before: float = 0.0
    resumed_at: list = field(default_factory=list)
    aligner: Optional[ClassAligner] = None  # distribution alignment's state (None: off)
    family: Optional[Family] = None  # the consistency method's state when it is not uda (None: uda)
    stop_signal: int = 0  # SIGINT/SIGTERM received during the loop (0: none); never saved

    def state_dict(self, train_seconds: float, cpu_seconds: float) -> dict:
        """The checkpoint's "loop" entry; ``train_seconds`` and ``cpu_seconds``: the run's so far."""
        return {"dev_history": self.dev_history, "skipped": self.skipped, "window": self.window,
                "window_steps": self.window_steps, "window_examples": self.window_examples,
                "train_seconds": train_seconds, "cpu_seconds": cpu_seconds, "resumed_at": self.resumed_at,
                "aligner": self.aligner.state_dict() if self.aligner is not None else None,
                "method": self.family.state_dict() if self.family is not None else None}

    def load_state_dict(self, loop: dict, step: int) -> None:
        """Continue from a checkpoint's "loop" entry, saved at ``step``."""
        self.step, self.dev_history, self.skipped = step, loop["dev_history"], loop["skipped"]
        self.window, self.window_steps, self.window_examples = loop["window"], loop["window_steps"], \
            loop["window_examples"]
        self.train_seconds_before, self.cpu_seconds_before = loop["train_seconds"], loop["cpu_seconds"]
        self.resumed_at = loop["resumed_at"] + [step]
        if self.aligner is not None and loop["aligner"] is not None:  # else alignment was off: it starts at the prior
            self.aligner.load_state_dict(loop["aligner"])
        if self.family is not None and loop.get("method") is not None:  # else it starts from its initial state
            self.family.load_state_dict(loop["method"])


@dataclass
class Run:
    """What setup builds and the loop and finish use."""

    cfg: Config
    task: Task
    accelerator: Any
    model: torch.nn.Module  # as prepared by accelerate (DDP-wrapped on several processes)
    unwrapped: torch.nn.Module  # the same parameters; evaluation and saving use it
    optimizer: Any
    scheduler: Any
    data: TaskData
    labeled: BatchStream
    unlabeled: Optional[BatchStream]  # None: supervised only
    logger: MetricsLogger
    run_dir: Path
    select_metric: str
    state: LoopState
    t_start: float
    cpu_start: float  # time.process_time() at setup
    restore_rng: Optional[dict] = None  # this process's RNG and task state, restored just before the loop
    # pointer -> dev metric of each checkpoint ranking (None: one, "best" by select_metric; see
    # checkpoint.rankings_for and a task's optional ``rank_metrics``)
    rankings: Optional[dict] = None
    clock: Callable[[], float] = time.monotonic  # seconds; what checkpoint.every_minutes measures

    @property
    def ckpt_root(self) -> Path:
        return self.run_dir / "checkpoints"

    def cpu_seconds(self) -> float:
        """CPU seconds of the run so far: the attempts before this one, and this process since setup."""
        return self.state.cpu_seconds_before + time.process_time() - self.cpu_start

    def stopped_error(self, done: int, saved: bool) -> RunStopped:
        """The error of a run stopped by a signal after step ``done`` (its checkpoint ``saved`` or not)."""
        signum = self.state.stop_signal or signal.SIGTERM  # another process of the run received it
        if saved:
            kept = f"its checkpoint is saved in '{self.ckpt_root / checkpoint.name_for(done)}'"
        else:
            kept = f"its steps since the last good checkpoint were skipped as non-finite, so nothing was saved; " \
                   f"{self._last_good()}"
        return RunStopped(f"training stopped by {signal.Signals(signum).name} after step {done} of "
                          f"{self.cfg.train.max_steps}: {kept}. Run the same command again to continue from it "
                          f"(output folder '{self.run_dir}').", signum)

    def nonfinite_error(self, done: int) -> NonFiniteLossError:
        """The error of a run whose loss was non-finite for train.max_nonfinite_steps steps in a row."""
        bad = self.state.bad_run
        return NonFiniteLossError(
            f"the loss (or gradient norm) was NaN/inf for {bad} steps in a row (steps {done - bad + 1}-"
            f"{done}), so training stopped; {self._last_good()}. Lower --train.lr, prefer bf16 to fp16, check the "
            f"data, or raise --train.max_nonfinite_steps")

    def _last_good(self) -> str:
        last = checkpoint.latest(self.ckpt_root)
        return f"the last good checkpoint is '{last.path}' (step {last.step})" if last else \
            "no checkpoint had been written yet"
