"""Training, as the best recipes split it: ``setup`` (run folder, data, model, optimizer, resume),
``fit`` (the loop, one function you read top to bottom), ``finish`` (select on dev, test once, save).

The loop: labelled and unlabelled batches -> ``uda_step`` (forward on the labelled batch, TSA-masked
supervised loss, forward on the original view without a graph, forward on the augmented view,
consistency loss, total; ``uda/step.py``) -> non-finite guard -> backward -> clip -> step -> log ->
eval -> checkpoint. The caller gives ``train`` its task (``tasks/cli.py`` makes it from ``--task``).

The run folder holds config.yaml, data_info.json, metrics.jsonl, tensorboard/, checkpoints/
(see ``uda/checkpoint.py``), run.lock while a run uses it (``run_lock``) and, for a task that builds
files from its data in setup, data/; once the run has finished, model/ and results.json. A run that
stopped before finishing continues exactly from its latest checkpoint when started again with the
same options: weights, optimizer, scheduler, grad scaler, step, both data streams, the task's
augmentation RNG and the Python/NumPy/torch RNGs are restored, and the logs continue with no gap or
repeat.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import shutil
import signal
import time
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import numpy as np
import torch
import yaml

from uda import checkpoint
from uda.alignment import ClassAligner
from uda.config import Config, ConfigError, save_config
from uda.devices import cpu_has_native_bf16, kept_accelerate_state
from uda.signals import stop_requests
from uda.data import DataError
from uda.io import atomic_write_json, atomic_write_text, file_fingerprint, pid_alive
from uda.losses import ramp, tsa_threshold
from uda.optim import param_groups
from uda.step import StepOutput, ratios_from_counts, uda_step
from uda.task import Task

# What a run writes into its folder (what --overwrite deletes), besides predictions_*.jsonl.
# data/ holds what a task builds from its data in setup (the passages task's retrieval file).
RUN_FILES = ("config.yaml", "data_info.json", "data_fingerprint.json", "labeled_ids.txt", "dev_ids.txt",
             "metrics.jsonl", "results.json", "tensorboard", "checkpoints", "model", "data")
# What a run has written before its first training step: a folder holding only these holds no run.
NOT_YET_TRAINED = ("config.yaml", "data_info.json", "data_fingerprint.json", "labeled_ids.txt", "dev_ids.txt",
                   "tensorboard", "data", "run.lock")
FINGERPRINT_FILE = "data_fingerprint.json"  # the run's data when it started (see data_fingerprint)
LOCK_FILE = "run.lock"  # the PID and host of the process whose run uses the folder (see run_lock)
# Options that may differ when a run is continued automatically: they do not change what is trained.
RESUME_MAY_DIFFER = ("checkpoint.", "overwrite", "output_dir", "report_to", "train.eval_batch_size")


class NonFiniteLossError(RuntimeError):
    """The loss was NaN/inf for too many steps in a row; the message names the last good checkpoint."""


class RunStopped(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped training after the step it was in, whose checkpoint was saved; running
    the same command again continues from it. A KeyboardInterrupt, so that nothing that catches
    errors (a sweep going on to its next run) mistakes a stop for a failed run."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


class BatchStream:
    """Endless full batches of indices drawn from successive seeded permutations of ``n`` examples
    (the reference's repeat -> shuffle -> batch). In a multi-process run every process takes its own
    slice of each global batch. The position is two integers, so a resumed run continues exactly."""

    def __init__(self, n: int, batch_size: int, seed: int, rank: int = 0, world: int = 1) -> None:
        if n <= 0:
            raise ValueError("cannot draw batches from an empty set")
        self.n, self.batch_size, self.seed, self.rank, self.world = n, batch_size, seed, rank, world
        self.epoch, self.pos = 0, 0
        self._perm = self._permutation(0)

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.n)

    def __next__(self) -> list[int]:
        needed = self.batch_size * self.world
        out: list[int] = []
        while len(out) < needed:
            take = self._perm[self.pos:self.pos + needed - len(out)]
            out.extend(int(i) for i in take)
            self.pos += len(take)
            if self.pos >= self.n:
                self.epoch, self.pos = self.epoch + 1, 0
                self._perm = self._permutation(self.epoch)
        return out[self.rank * self.batch_size:(self.rank + 1) * self.batch_size]

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])
        self._perm = self._permutation(self.epoch)


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


def run_dir_for(cfg: Config) -> Path:
    """--output_dir (default: a new runs/<task>-<time> folder), checked not to be a file."""
    run_dir = Path(cfg.output_dir or f"runs/{cfg.task}-{time.strftime('%Y%m%d-%H%M%S')}")
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"--output_dir '{run_dir}' is a file, not a folder; choose a new --output_dir "
                          f"(the file is left as it is)")
    return run_dir


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run folder for this process: ``run.lock`` in it holds the PID and host, from before the
    folder is looked at until the run ends, so a second run into the same folder is refused (it would
    continue from the same checkpoint and write over the first). A lock left by a process that is no
    longer running (killed with SIGKILL, a crashed machine) is taken over with a warning."""
    from tqdm.auto import tqdm

    path, me = run_dir / LOCK_FILE, f"{os.getpid()} {platform.node()}"
    made = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            with open(path, "x", encoding="utf-8") as f:
                f.write(me + "\n")
            break
        except FileExistsError:
            pid, _, host = path.read_text(encoding="utf-8").strip().partition(" ")
            if host != platform.node() and pid.isdigit():
                raise ConfigError(f"output folder '{run_dir}' is in use by process {pid} on host '{host}' (lock "
                                  f"file '{path}'); wait for that run to end or choose another --output_dir. If "
                                  f"no run is using the folder, delete the lock file") from None
            if pid.isdigit() and pid_alive(int(pid)):
                raise ConfigError(f"output folder '{run_dir}' is in use by a running process ({pid}, lock file "
                                  f"'{path}'); wait for that run to end, or choose another --output_dir") from None
            tqdm.write(f"warning: output folder '{run_dir}' was locked by process {pid or '?'}, which is no longer "
                       f"running; taking its lock over")
            path.unlink(missing_ok=True)
    try:
        yield
    finally:
        if path.is_file() and path.read_text(encoding="utf-8").strip() == me:
            path.unlink()
        if made and not any(run_dir.iterdir()):  # a folder made for a run that stopped at once
            run_dir.rmdir()


def prepare_run_dir(cfg: Config, run_dir: Optional[Path] = None) -> tuple[Path, Optional[Path]]:
    """The run folder (``run_dir``, default :func:`run_dir_for`), and the checkpoint to resume from
    (None: a fresh run).

    A finished run (results.json) is never written over without --overwrite. An unfinished run with
    a checkpoint is continued when the options are the same (checkpoint.auto_resume) or when
    --checkpoint.resume asks for it. A folder holding other files (metrics of a run that never saved
    a checkpoint, or anything else) is an error that says what to do; what a run leaves before its
    first step (config.yaml, data_info.json, tensorboard/) does not count.
    """
    run_dir = run_dir or run_dir_for(cfg)
    resume = cfg.checkpoint.resume
    if cfg.overwrite:
        return run_dir, None
    if (run_dir / "results.json").exists():
        raise ConfigError(
            f"output folder '{run_dir}' already holds a finished run; choose a new --output_dir, "
            f"or pass --overwrite true to write over it"
        )
    last = checkpoint.latest_loadable(run_dir / "checkpoints")  # a newer one cut short is set aside by setup
    newest = checkpoint.latest(run_dir / "checkpoints")
    if last is None and newest is not None:
        raise checkpoint.CheckpointError(
            f"output folder '{run_dir}' holds checkpoints, but none can be loaded (the newest, '{newest.path}': "
            f"{checkpoint.problem(newest.path)}); choose a new --output_dir, or pass --overwrite true to start over")
    if last is None:
        if resume:
            raise ConfigError(f"--checkpoint.resume: output folder '{run_dir}' holds no checkpoint to resume from")
        held = sorted(p.name for p in run_dir.iterdir() if p.name not in NOT_YET_TRAINED) if run_dir.is_dir() else []
        if held:
            raise ConfigError(f"output folder '{run_dir}' holds another run's files ({', '.join(held[:5])}) and no "
                              f"checkpoint to resume from; choose a new --output_dir, or pass --overwrite true to "
                              f"start over in it")
        return run_dir, None
    if resume:
        return run_dir, last.path
    if not cfg.checkpoint.auto_resume:
        raise ConfigError(f"output folder '{run_dir}' holds an unfinished run (latest checkpoint: step {last.step}); "
                          f"pass --checkpoint.resume true to continue it, --overwrite true to start over, "
                          f"or choose a new --output_dir")
    changes = config_changes(run_dir / "config.yaml", cfg)
    if changes:
        raise ConfigError(f"output folder '{run_dir}' holds an unfinished run (latest checkpoint: step {last.step}) "
                          f"with other options: {'; '.join(changes)}. Run with the same options to continue it, "
                          f"pass --checkpoint.resume true to continue with the new ones, or choose a new --output_dir")
    return run_dir, last.path


def config_changes(saved_path: Path, cfg: Config) -> list[str]:
    """'key: old -> new' for every option that differs from the run's saved config.yaml (options in
    RESUME_MAY_DIFFER, and options that only one side knows, are not compared)."""
    if not saved_path.is_file():
        return []
    old = _flatten(yaml.safe_load(saved_path.read_text(encoding="utf-8")) or {})
    new = _flatten(cfg.to_dict())
    changes = []
    for key in sorted(old.keys() & new.keys()):
        if key.startswith(RESUME_MAY_DIFFER):
            continue
        a, b = old[key], new[key]
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
        if not (math.isclose(a, b, rel_tol=1e-12) if numbers else a == b):
            changes.append(f"{key}: {a!r} -> {b!r}")
    return changes


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def clear_run_files(run_dir: Path) -> None:
    """Delete what an earlier run wrote into ``run_dir``; other files stay."""
    for p in [run_dir / name for name in RUN_FILES] + sorted(run_dir.glob("predictions_*.jsonl")):
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def _to(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def _finite_everywhere(loss: torch.Tensor, accelerator: Any) -> bool:
    """True when the loss is finite on every process. All processes must take the same branch:
    one that skipped the backward pass would leave the others waiting in the gradient all-reduce."""
    bad = (~torch.isfinite(loss.detach())).float().reshape(1)
    if accelerator.num_processes > 1:
        bad = accelerator.reduce(bad, reduction="sum")
    return bad.item() == 0


def _mean_over_processes(values: dict[str, float], accelerator: Any) -> dict[str, float]:
    """Average logged scalars over processes (each saw its own shard of the batch)."""
    if accelerator.num_processes == 1 or not values:
        return values
    keys = sorted(values)
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=accelerator.device)
    t = accelerator.reduce(t, reduction="mean")
    return dict(zip(keys, t.tolist()))


def id_lists(data: Any) -> dict[str, str]:
    """labeled_ids.txt and dev_ids.txt as texts: one example id a line, each id once, in order of first
    appearance (a QA question cut into several windows (features) is one line)."""
    out = {}
    for name, rows in (("labeled_ids.txt", data.train), ("dev_ids.txt", data.dev)):
        ids = [r.get("id") if isinstance(r, dict) else getattr(r, "id", None) for r in rows]
        out[name] = "".join(f"{i}\n" for i in dict.fromkeys(str(i) for i in ids if i is not None))
    return out


def write_ids(run_dir: Path, data: Any) -> None:
    """labeled_ids.txt and dev_ids.txt (:func:`id_lists`), so that any other tool (a SetFit baseline, a
    fully supervised run) can be trained and selected on exactly the same examples."""
    for name, text in id_lists(data).items():
        atomic_write_text(run_dir / name, text, fsync=False)


def data_fingerprint(cfg: Config, data: Any) -> dict:
    """What a run's data was when it started: each data file it names (the task's ``info["files"]`` and
    every option called path, file or *_file that names a file) by :func:`uda.io.file_fingerprint`, and
    a sha256 of the labelled and dev ids chosen from them."""
    files = data.info.get("files") if isinstance(getattr(data, "info", None), dict) else None
    paths = [v for v in (files or {}).values() if isinstance(v, str)]
    for key, value in _flatten(cfg.to_dict()).items():
        name = key.rsplit(".", 1)[-1]
        if isinstance(value, str) and (name in ("path", "file") or name.endswith("_file")):
            paths.append(value)
    found = {str(Path(p).expanduser().resolve()) for p in paths if Path(p).expanduser().is_file()}
    return {"files": {p: file_fingerprint(p) for p in sorted(found)},
            "ids": {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in id_lists(data).items()}}


def data_changes(before: dict, now: dict) -> list[str]:
    """What differs between two :func:`data_fingerprint` s (the modification time alone is no change)."""
    changes = []
    for p in sorted(before["files"].keys() | now["files"].keys()):
        a, b = before["files"].get(p), now["files"].get(p)
        if a is None or b is None or (a["size"], a["sha256_ends"]) != (b["size"], b["sha256_ends"]):
            how = "no longer read" if b is None else "newly read" if a is None else \
                f"size {a['size']} -> {b['size']} bytes" if a["size"] != b["size"] else "content changed"
            changes.append(f"'{p}' ({how})")
    changes += [f"the ids in {name} (the examples chosen)" for name in before["ids"]
                if before["ids"][name] != now["ids"].get(name)]
    return changes


def check_data_unchanged(cfg: Config, run_dir: Path, data: Any) -> Optional[dict]:
    """On resuming, compare the data with the fingerprint the run stored when it started: a change is an
    error (the checkpoints were trained on other data) unless --checkpoint.allow_data_change. Returns
    the fingerprint to store (None: keep the stored one)."""
    from tqdm.auto import tqdm

    now = data_fingerprint(cfg, data)
    path = run_dir / FINGERPRINT_FILE
    if not path.is_file():
        return now
    changes = data_changes(json.loads(path.read_text(encoding="utf-8")), now)
    if not changes:
        return None
    what = f"the data changed since the run in '{run_dir}' started: {'; '.join(changes)}"
    if not cfg.checkpoint.allow_data_change:
        raise DataError(f"{what}. Its checkpoints were trained on the old data: restore it, start a new run "
                        f"(another --output_dir, or --overwrite true), or pass --checkpoint.allow_data_change true "
                        f"to continue on the new data")
    tqdm.write(f"warning: {what}; continuing on the new data (--checkpoint.allow_data_change)")
    return now


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
    # the run would take alone on a core, whatever else the machine runs; None: continued from a
    # checkpoint written without it
    cpu_seconds_before: Optional[float] = 0.0
    resumed_at: list = field(default_factory=list)
    aligner: Optional[ClassAligner] = None  # distribution alignment's state (None: off)
    stop_signal: int = 0  # SIGINT/SIGTERM received during the loop (0: none); never saved


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
    data: Any
    labeled: BatchStream
    unlabeled: Optional[BatchStream]
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


def train(cfg: Config, task: Task, clock: Callable[[], float] = time.monotonic) -> dict:
    """Train ``task`` with ``cfg``: setup, the loop, finish. Returns what results.json holds.
    ``clock`` (seconds) times the every-N-minutes checkpoints; a test passes a fake one."""
    # kept_accelerate_state: a second train() in this process starts from the state the first found;
    # held: what setup holds until the run ends (the run folder's lock)
    with kept_accelerate_state(), ExitStack() as held:
        run = setup(cfg, task, clock, held)
        fit(run)
        return finish(run)


# ----------------------------------------------------------------------------- setup

def _unknown_select_metric(cfg: Config, select_metric: str, choices: Any) -> ConfigError:
    return ConfigError(f"--eval.select_metric '{select_metric}' is not a dev metric of task '{cfg.task}'; "
                       f"choose one of: {', '.join(choices)}")


def _accelerator(cfg: Config) -> Any:
    from accelerate import Accelerator

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
                   "(oneDNN needs AVX-512 or AMX for them), so bf16 is emulated: the IMDB few-label recipe "
                   "took 68 s a step with it against 5.9 s in float32 on a 2-core AVX2 CPU. "
                   "Use --train.mixed_precision no here.")
    return accelerator


def setup(cfg: Config, task: Task, clock: Callable[[], float] = time.monotonic,
          held: Optional[ExitStack] = None) -> Run:
    """Run folder, data, model, optimizer and scheduler, batch streams, and (when continuing a run)
    everything its latest checkpoint holds. The main process locks the run folder until ``held`` closes
    (no lock without it)."""
    from accelerate.utils import set_seed
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    select_metric = cfg.eval.select_metric or task.main_metric
    known = task.selectable_metrics  # checked now; a task with an empty list, at the first eval
    if known and select_metric not in known:
        raise _unknown_select_metric(cfg, select_metric, known)
    t_start, cpu_start = time.time(), time.process_time()
    accelerator = _accelerator(cfg)
    main = accelerator.is_main_process
    run_dir = run_dir_for(cfg)
    if main and held is not None:
        held.enter_context(run_lock(run_dir))  # before the folder is looked at
    run_dir, resume_from = prepare_run_dir(cfg, run_dir)
    accelerator.wait_for_everyone()  # every process has looked at the folder before the main one changes it
    if main:
        if resume_from is None:  # --overwrite, or what an attempt that never trained left behind
            clear_run_files(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        if resume_from is not None:
            _set_aside_broken(run_dir / "checkpoints", resume_from,
                              checkpoint.rankings_for(select_metric, task.rank_metrics))
            changes = config_changes(run_dir / "config.yaml", cfg)
            tqdm.write(f"resuming from {resume_from}" + (f" with changed options: {'; '.join(changes)}" if changes else ""))
        if resume_from is None or cfg.checkpoint.resume:  # an explicit resume may change options: record them
            save_config(cfg, run_dir / "config.yaml")

    set_seed(cfg.seed)
    task.run_dir = run_dir  # a task that writes files of its own (under data/) reads the run folder here
    data = task.setup(cfg)
    fingerprint = check_data_unchanged(cfg, run_dir, data) if resume_from is not None else \
        data_fingerprint(cfg, data)
    if main:
        atomic_write_json(run_dir / "data_info.json", data.info)
        write_ids(run_dir, data)
        if fingerprint is not None:
            atomic_write_json(run_dir / FINGERPRINT_FILE, fingerprint)
    if cfg.uda.distribution_alignment and task.class_logits_index is None:
        raise ConfigError(f"--uda.distribution_alignment needs a task whose consistency distribution is over classes; "
                          f"task '{cfg.task}' has none")
    set_seed(cfg.seed)  # the new head's initialisation does not depend on how much data loading drew
    with kept_accelerate_state():  # a stage before the run (contrastive, MLM) may set up accelerate its own way
        model = task.build_model(cfg)
    if accelerator.mixed_precision != cfg.train.mixed_precision:  # what trains is what the config says
        raise RuntimeError(f"accelerate's mixed precision is '{accelerator.mixed_precision}' after the model was "
                           f"built, not train.mixed_precision '{cfg.train.mixed_precision}'")
    optimizer = torch.optim.AdamW(param_groups(model, cfg.train.weight_decay, cfg.train.lr, cfg.train.head_lr),
                                  lr=cfg.train.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, cfg.train.warmup_steps, cfg.train.max_steps)
    # The scheduler is stepped by hand once per optimizer step (accelerate's wrapper would step it
    # once per process), so warm-up means the same number of steps on 1 or 8 processes.
    model, optimizer = accelerator.prepare(model, optimizer)

    B, r = cfg.train.batch_size, cfg.uda.unsup_ratio
    rank, world = accelerator.process_index, accelerator.num_processes
    labeled = BatchStream(len(data.train), B, cfg.seed, rank, world)
    unlabeled = BatchStream(len(data.unlabeled), r * B, cfg.seed + 1, rank, world) if cfg.uda.lambda_u > 0 else None
    state = LoopState()
    if cfg.uda.distribution_alignment and unlabeled is not None:  # aligns the unlabelled targets: none
        # when supervised only (a recipe with alignment run as its own baseline, --uda.lambda_u 0);
        # starts at the labelled prior, so the first weights are 1
        state.aligner = ClassAligner(task.class_prior, cfg.uda.alignment_momentum, cfg.uda.alignment_bank)
    run = Run(cfg, task, accelerator, model, accelerator.unwrap_model(model), optimizer, scheduler, data,
              labeled, unlabeled, None, run_dir, select_metric, state, t_start, cpu_start,  # type: ignore[arg-type]
              rankings=checkpoint.rankings_for(select_metric, task.rank_metrics), clock=clock)
    keep_lines = restore(run, resume_from) if resume_from is not None else None
    run.logger = MetricsLogger(run_dir, cfg.report_to == "tensorboard", main,
                               resume_step=state.step if resume_from is not None else None, keep_lines=keep_lines)
    return run


def _set_aside_broken(root: Path, resume_from: Path, rankings: Optional[dict]) -> None:
    """The checkpoints newer than ``resume_from`` cannot be loaded (prepare_run_dir chose the newest good
    one): rename them out of the way, with a warning naming both, so that no pointer or ranking uses them."""
    from tqdm.auto import tqdm

    broken = [c for c in checkpoint.list_checkpoints(root) if c.path.name > resume_from.name]
    for c in broken:
        why = checkpoint.problem(c.path)
        moved = checkpoint.set_aside(c)
        tqdm.write(f"warning: the newer checkpoint '{c.path}' cannot be loaded ({why}); resuming from the newest "
                   f"good one, '{resume_from}', instead (the broken one is kept as '{moved}')")
    if broken:
        checkpoint.write_pointers(root, rankings)


def restore(run: Run, ckpt: Path) -> int:
    """Load a checkpoint into ``run``; returns the metrics.jsonl line count it recorded."""
    from tqdm.auto import tqdm

    saved = checkpoint.load_state(ckpt)
    checkpoint.load_model_weights(run.unwrapped, ckpt / checkpoint.MODEL_DIR)
    run.optimizer.load_state_dict(saved["optimizer"])
    run.scheduler.load_state_dict(saved["scheduler"])
    scaler = run.accelerator.scaler
    if scaler is not None and saved["scaler"] is not None:
        scaler.load_state_dict(saved["scaler"])
    run.labeled.load_state_dict(saved["streams"]["labeled"])
    if run.unlabeled is not None:
        run.unlabeled.load_state_dict(saved["streams"]["unlabeled"])
    loop, st = saved["loop"], run.state
    st.step, st.dev_history, st.skipped = saved["step"], loop["dev_history"], loop["skipped"]
    st.window, st.window_steps, st.window_examples = loop["window"], loop["window_steps"], loop["window_examples"]
    st.train_seconds_before, st.resumed_at = loop["train_seconds"], loop["resumed_at"] + [saved["step"]]
    st.cpu_seconds_before = loop.get("cpu_seconds")  # absent in checkpoints of before 2026-12-02
    if st.aligner is not None:  # checkpoints of before 2026-12-03 hold the running mean as "class_ema"
        st.aligner.load_state_dict(loop.get("aligner") or {"class_ema": loop["class_ema"]})
    processes = saved["processes"]
    world, main = run.accelerator.num_processes, run.accelerator.is_main_process
    if len(processes) != world and main:
        tqdm.write(f"warning: the checkpoint was written by {len(processes)} processes and this run has {world}; "
                   f"training continues, but not exactly as an uninterrupted run would")
    run.restore_rng = processes[run.accelerator.process_index % len(processes)]
    st.drawn = dict(run.restore_rng["examples"])
    if main:  # checkpoints saved under another --eval.select_metric are re-ranked by this one
        rescored = checkpoint.rescore(run.ckpt_root, run.select_metric,
                                      {h["step"]: h.get(run.select_metric) for h in st.dev_history},
                                      run.rankings, {h["step"]: h for h in st.dev_history})
        if rescored:
            tqdm.write(f"re-ranked {len(rescored)} checkpoint(s) by dev {run.select_metric} from the dev history; "
                       f"checkpoints pruned earlier (keep_top_k) were chosen by the metric of that time")
    return saved["metrics_lines"]


# ----------------------------------------------------------------------------- the loop

def take(examples: Any, positions: Any) -> list:
    """The examples at ``positions``: through the sequence's ``examples_at`` when it has one (a pool read
    from disk reads a batch together), else one item at a time."""
    at = getattr(examples, "examples_at", None)
    return at(positions) if at is not None else [examples[i] for i in positions]


def fit(run: Run) -> None:
    """The training loop, from the step the run is at to train.max_steps."""
    from tqdm.auto import tqdm

    cfg, task, accelerator, st = run.cfg, run.task, run.accelerator, run.state
    t_loop = window_t0 = time.time()
    last_save = run.clock()  # checkpoint.every_minutes counts from here, and from each save
    run.model.train()
    bar = tqdm(total=cfg.train.max_steps, initial=st.step, disable=not accelerator.is_main_process, desc="train",
               dynamic_ncols=True)
    if run.restore_rng is not None:  # last, so that nothing between here and the first step draws from the RNGs
        task.load_state_dict(run.restore_rng["task"])
        checkpoint.set_rng_state(run.restore_rng["rng"])
    with stop_requests(st):  # Ctrl-C / SIGTERM: stop after this step, with its checkpoint
        for step in range(st.step, cfg.train.max_steps):
            progress = step / cfg.train.max_steps
            threshold = tsa_threshold(cfg.uda.tsa, progress, task.tsa_num_classes)  # logged as sup/tsa_threshold
            lambda_u = cfg.uda.lambda_u * ramp(step, cfg.uda.lambda_u_ramp_steps)
            step_ok, step_stats, class_log_probs = _forward_backward(run, progress, lambda_u)
            if step_ok and cfg.train.max_grad_norm is not None:
                grad_norm = float(accelerator.clip_grad_norm_(run.model.parameters(), cfg.train.max_grad_norm))
                step_stats["train/grad_norm"] = grad_norm
                # an overflow in the backward pass (fp16's grad scaler skips such steps by itself)
                step_ok = math.isfinite(grad_norm) or accelerator.scaler is not None
            if step_ok and st.aligner is not None:
                st.aligner.update(_gathered(torch.cat(class_log_probs), accelerator))
            if step_ok:
                run.optimizer.step()
                if not accelerator.optimizer_step_was_skipped:
                    run.scheduler.step()
                st.bad_run = 0
                for k, v in step_stats.items():
                    st.window[k] = st.window.get(k, 0.0) + v
                st.window_steps += 1
                st.window_examples += _examples_per_step(run)
            else:
                st.skipped, st.bad_run = st.skipped + 1, st.bad_run + 1
            run.optimizer.zero_grad(set_to_none=True)
            done = st.step = step + 1
            if cfg.train.max_nonfinite_steps is not None and st.bad_run >= cfg.train.max_nonfinite_steps:
                bar.close()
                raise _nonfinite_error(run, done)
            if done % cfg.train.log_every == 0 or done == cfg.train.max_steps:
                window_t0 = _log_window(run, done, threshold, lambda_u, window_t0, bar)
            bar.update(1)
            t_pause = time.time()
            saved, stop = _evaluate_and_save(run, done, last_save, t_loop)
            if saved:
                last_save = run.clock()
            if stop:
                bar.close()
                raise _stopped(run, done, saved)
            window_t0 += time.time() - t_pause  # evaluation and checkpoint time is not training throughput
    bar.close()
    st.train_seconds_before += time.time() - t_loop  # now the training time of the whole run


def _examples_per_step(run: Run) -> int:
    cfg = run.cfg
    unlabeled = cfg.uda.unsup_ratio * cfg.train.batch_size if run.unlabeled is not None else 0
    return (cfg.train.batch_size + unlabeled) * cfg.train.grad_accum_steps * run.accelerator.num_processes


def _forward_backward(run: Run, progress: float, lambda_u: float) -> tuple[bool, dict, list]:
    """One optimizer step's micro-batches: collate, ``uda_step``, backward. Returns (every loss was finite
    on every process, the step's stats averaged over the micro-batches, the class log-probabilities of
    the unlabelled originals for distribution alignment)."""
    cfg, task, accelerator, st = run.cfg, run.task, run.accelerator, run.state
    accum = cfg.train.grad_accum_steps
    alignment = st.aligner.weights().to(accelerator.device) if st.aligner is not None else None
    stats: dict = {}
    class_log_probs: list = []
    for micro in range(accum):
        # gradients are synchronised across processes only on the last micro-batch
        with nullcontext() if micro == accum - 1 else accelerator.no_sync(run.model):
            idx_l = next(run.labeled)
            batch_l = _to(task.collate_labeled([run.data.train[i] for i in idx_l]), accelerator.device)
            st.drawn["labeled"] += len(idx_l)
            views, hidden = None, None
            if run.unlabeled is not None:
                unl = take(run.data.unlabeled, next(run.unlabeled))
                ori, aug = task.collate_unlabeled(unl)
                views = (_to(ori, accelerator.device), _to(aug, accelerator.device))
                st.drawn["unlabeled"] += len(unl)
                hidden = task.hidden_labels(unl)
            # one autocast context over the step's forward passes: the weights are cast to the compute
            # dtype once and reused (accelerate's per-forward autocast alone casts them for every pass)
            with accelerator.autocast():
                out: StepOutput = uda_step(task, run.model, batch_l, views,
                                           tsa=lambda k: tsa_threshold(cfg.uda.tsa, progress, k),
                                           lambda_u=lambda_u, temperature=cfg.uda.temperature,
                                           confidence=cfg.uda.confidence, hard=cfg.uda.target == "hard",
                                           alignment=alignment, hidden_labels=hidden)
            if not _finite_everywhere(out.loss, accelerator):
                return False, stats, class_log_probs  # a NaN/inf loss never reaches the weights: the step is skipped
            accelerator.backward(out.loss / accum)
        if out.class_log_probs is not None:
            class_log_probs.append(out.class_log_probs)
        for k, v in out.stats.items():
            stats[k] = stats.get(k, 0.0) + v / accum
    return True, stats, class_log_probs


def _log_window(run: Run, done: int, threshold: float, lambda_u: float, window_t0: float, bar: Any) -> float:
    """Log the means of the scalars since the last log line (over processes too) with the step's
    schedule values and throughput; returns the new window's start time."""
    st = run.state
    elapsed = max(time.time() - window_t0, 1e-9)
    scalars = _mean_over_processes({k: v / max(st.window_steps, 1) for k, v in st.window.items()}, run.accelerator)
    scalars = ratios_from_counts(scalars)
    scalars.update({"sup/tsa_threshold": threshold, "train/lr": run.scheduler.get_last_lr()[0],
                    **({"unsup/lambda_u": lambda_u} if run.unlabeled is not None else {}),
                    "train/nonfinite_skipped": st.skipped,
                    "train/examples_per_sec": st.window_examples / elapsed,
                    "train/steps_per_sec": st.window_steps / elapsed})
    run.logger.log(done, scalars)
    # refresh=False: shown at the bar's next update, so its mininterval (TQDM_MININTERVAL) holds
    shown = (("loss", "train/loss"), ("sup", "sup/loss"), ("unsup", "unsup/loss"))
    bar.set_postfix({name: f"{scalars[k]:.4f}" for name, k in shown if k in scalars}, refresh=False)
    st.window, st.window_steps, st.window_examples = {}, 0, 0
    return time.time()


def _evaluate_and_save(run: Run, done: int, last_save: float, t_loop: float) -> tuple[bool, bool]:
    """Dev evaluation when due, then a checkpoint when due (evaluation, every_steps, every_minutes, a stop
    request), never during a run of skipped steps. Returns (saved, stop requested)."""
    cfg, st = run.cfg, run.state
    at_eval = done % cfg.train.eval_every == 0 or done == cfg.train.max_steps
    metric = evaluate_dev(run, done) if at_eval else None
    every = cfg.checkpoint.every_steps
    minutes_due, stop = _decisions(run, last_save)
    due = at_eval or (every is not None and done % every == 0) or minutes_due or stop
    saved = due and st.bad_run == 0  # the last good checkpoint stays the latest
    if saved:
        save_checkpoint(run, done, metric, st.train_seconds_before + time.time() - t_loop)
    return saved, stop


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


def cpu_seconds(run: Run) -> Optional[float]:
    """CPU seconds of the run so far: the attempts before this one, and this process since setup."""
    before = run.state.cpu_seconds_before
    return None if before is None else before + time.process_time() - run.cpu_start


def _decisions(run: Run, last_save: float) -> tuple[bool, bool]:
    """(checkpoint.every_minutes have passed since the last save, a stop was requested). Every process
    must decide alike (a save gathers from all of them), so the main process's clock and signals
    decide for all."""
    minutes = run.cfg.checkpoint.every_minutes
    due = minutes is not None and run.clock() - last_save >= 60.0 * minutes
    stop = run.state.stop_signal != 0
    if run.accelerator.num_processes == 1:
        return due, stop
    from accelerate.utils import broadcast

    flags = broadcast(torch.tensor([float(due), float(stop)], device=run.accelerator.device), from_process=0)
    return bool(flags[0].item()), bool(flags[1].item())


def _stopped(run: Run, done: int, saved: bool) -> RunStopped:
    signum = run.state.stop_signal or signal.SIGTERM  # another process of the run received it
    if saved:
        kept = f"its checkpoint is saved in '{run.ckpt_root / checkpoint.name_for(done)}'"
    else:
        kept = f"its steps since the last good checkpoint were skipped as non-finite, so nothing was saved; " \
               f"{_last_good(run)}"
    return RunStopped(f"training stopped by {signal.Signals(signum).name} after step {done} of "
                      f"{run.cfg.train.max_steps}: {kept}. Run the same command again to continue from it "
                      f"(output folder '{run.run_dir}').", signum)


def _gathered(rows: torch.Tensor, accelerator: Any) -> torch.Tensor:
    """This step's rows from every process (each process has the same number of rows)."""
    return accelerator.gather(rows.to(accelerator.device)) if accelerator.num_processes > 1 else rows


def _last_good(run: Run) -> str:
    last = checkpoint.latest(run.ckpt_root)
    return f"the last good checkpoint is '{last.path}' (step {last.step})" if last else \
        "no checkpoint had been written yet"


def _nonfinite_error(run: Run, done: int) -> NonFiniteLossError:
    kept = _last_good(run)
    bad = run.state.bad_run
    return NonFiniteLossError(
        f"the loss (or gradient norm) was NaN/inf for {bad} steps in a row (steps {done - bad + 1}-"
        f"{done}), so training stopped; {kept}. Lower --train.lr, prefer bf16 to fp16, check the data, "
        f"or raise --train.max_nonfinite_steps")


def evaluate_dev(run: Run, step: int) -> Optional[float]:
    """Dev metrics, logged and kept in the dev history; returns the selection metric's value."""
    from tqdm.auto import tqdm

    if not len(run.data.dev):
        return None
    run.model.eval()
    metrics = run.task.evaluate(run.unwrapped, run.data.dev, run.accelerator, run.cfg.train.eval_batch_size, "dev")
    run.model.train()
    run.logger.log(step, {f"dev/{k}": float(v) for k, v in metrics.items()})
    run.state.dev_history.append({"step": step, **metrics})
    if run.accelerator.is_main_process and metrics.get("accuracy", 0) - metrics.get("macro_f1", 1) > 0.1:
        tqdm.write(f"warning: step {step}: dev macro-F1 {metrics['macro_f1']:.3f} is far below accuracy "
                   f"{metrics['accuracy']:.3f}: the model predicts some classes for almost every example "
                   f"(see unsup/max_class_share)")
    if run.select_metric not in metrics:
        raise _unknown_select_metric(run.cfg, run.select_metric, sorted(metrics))
    return float(metrics[run.select_metric])


def save_checkpoint(run: Run, step: int, metric: Optional[float], train_seconds: float) -> None:
    """Every process hands in its own RNG and augmentation state; only the main one writes."""
    from accelerate.utils import gather_object
    from tqdm.auto import tqdm

    acc, st = run.accelerator, run.state
    local = {"rng": checkpoint.rng_state(), "task": run.task.state_dict(), "examples": dict(st.drawn)}
    processes = gather_object([local]) if acc.num_processes > 1 else [local]
    if not acc.is_main_process:
        return
    state = {
        "step": step, "optimizer": run.optimizer.state_dict(), "scheduler": run.scheduler.state_dict(),
        "scaler": acc.scaler.state_dict() if acc.scaler is not None else None,
        "streams": {"labeled": run.labeled.state_dict(),
                    "unlabeled": run.unlabeled.state_dict() if run.unlabeled is not None else None},
        "processes": processes,
        "loop": {"dev_history": st.dev_history, "skipped": st.skipped, "window": st.window,
                 "window_steps": st.window_steps, "window_examples": st.window_examples,
                 "train_seconds": train_seconds, "cpu_seconds": cpu_seconds(run), "resumed_at": st.resumed_at,
                 "aligner": st.aligner.state_dict() if st.aligner is not None else None},
        "metrics_lines": run.logger.lines,
    }
    dev = st.dev_history[-1] if st.dev_history and st.dev_history[-1]["step"] == step and metric is not None else {}
    checkpoint.save(run.ckpt_root, step, metric, run.cfg.checkpoint.keep_top_k,
                    lambda d: run.task.save(run.unwrapped, d), state, metric_name=run.select_metric,
                    rankings=run.rankings, metrics={n: dev.get(n) for n in (run.rankings or {}).values()})
    best = checkpoint.best(run.ckpt_root)
    if metric is not None and best is not None:
        tqdm.write(f"step {step}: dev {run.select_metric} {metric:.4f} (best {best.metric:.4f} at step {best.step})")


# ----------------------------------------------------------------------------- finish

def finish(run: Run) -> dict:
    """Load the model selected on dev, evaluate the test set once, save the model and results.json."""
    from accelerate.utils import gather_object
    from tqdm.auto import tqdm

    cfg, acc, st = run.cfg, run.accelerator, run.state
    acc.wait_for_everyone()  # the main process has written the last checkpoint
    best = checkpoint.best(run.ckpt_root)
    if best is not None:
        checkpoint.load_model_weights(run.unwrapped, best.path / checkpoint.MODEL_DIR)
    selected = {"step": best.step if best is not None else cfg.train.max_steps,
                "by": f"dev/{run.select_metric}" if best is not None else "last step (no dev split)"}
    test_metrics: dict = {}
    test_seconds = None
    if cfg.eval.test and len(run.data.test):
        run.model.eval()
        t0 = time.time()
        test_metrics = run.task.evaluate(run.unwrapped, run.data.test, acc, cfg.train.eval_batch_size, "test",
                                         out_dir=run.run_dir)
        test_seconds = round(time.time() - t0, 1)  # wall time of the test evaluation (with a task's own dev fitting)
        run.logger.log(selected["step"], {f"test/{k}": float(v) for k, v in test_metrics.items()})
    local = {"rank": acc.process_index, "device": str(acc.device), "pid": os.getpid(), "examples": st.drawn}
    processes = gather_object([local]) if acc.num_processes > 1 else [local]
    results = {
        "task": cfg.task,
        "selected_model": selected,
        "dev_best": next((h for h in st.dev_history if best is not None and h["step"] == best.step), None),
        "dev_history": st.dev_history,
        "test": test_metrics,
        "train_seconds": round(st.train_seconds_before, 1),
        "test_eval_seconds": test_seconds,
        "total_seconds": round(time.time() - run.t_start, 1),
        # CPU seconds, all threads, setup to here over every attempt (None: resumed from a checkpoint
        # without the count); on one thread about the wall time of the run alone on a core
        "cpu_seconds": None if cpu_seconds(run) is None else round(cpu_seconds(run), 1),
        "num_processes": acc.num_processes,
        "processes": processes,
        "environment": environment(acc.device),
        "mixed_precision": acc.mixed_precision,  # accelerate's, as the run ends (setup checks it against the config)
        "nonfinite_skipped_steps": st.skipped,
        "resumed_at_steps": st.resumed_at,
        "data": run.data.info,
    }
    if acc.is_main_process:
        run.task.save(run.unwrapped, run.run_dir / "model")
        atomic_write_json(run.run_dir / "results.json", results)  # marks the run finished: whole or not at all
        if test_metrics:
            tqdm.write(f"test ({selected['by']}, step {selected['step']}): "
                       + ", ".join(f"{k} {v:.4f}" for k, v in test_metrics.items() if isinstance(v, float)))
        tqdm.write(f"run folder: {run.run_dir}")
    run.logger.close()
    acc.wait_for_everyone()
    return results
