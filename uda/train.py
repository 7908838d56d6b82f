"""The training loop: one function you can read top to bottom.

forward (labelled) -> TSA-masked supervised loss -> forward (original view, no graph) ->
forward (augmented view) -> consistency loss -> non-finite guard -> backward -> clip -> step ->
log -> eval -> checkpoint.

The run folder holds config.yaml, data_info.json, metrics.jsonl, tensorboard/ and checkpoints/
(see ``uda/checkpoint.py``), and once the run has finished model/ and results.json. A run that
stopped before finishing continues exactly from its latest checkpoint when started again with the
same options: weights, optimizer, scheduler, grad scaler, step, both data streams, the task's
augmentation RNG and the Python/NumPy/torch RNGs are restored, and the logs continue with no gap or
repeat.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
import yaml

from uda import checkpoint
from uda.config import Config, ConfigError, save_config
from uda.losses import class_prediction_stats, consistency_loss, ramp, total_loss, tsa_supervised_loss, tsa_threshold

# What a run writes into its folder (what --overwrite deletes), besides predictions_*.jsonl.
RUN_FILES = ("config.yaml", "data_info.json", "labeled_ids.txt", "dev_ids.txt", "metrics.jsonl", "results.json",
             "tensorboard", "checkpoints", "model")
# What a run has written before its first training step: a folder holding only these holds no run.
NOT_YET_TRAINED = ("config.yaml", "data_info.json", "labeled_ids.txt", "dev_ids.txt", "tensorboard")
# Options that may differ when a run is continued automatically: they do not change what is trained.
RESUME_MAY_DIFFER = ("checkpoint.", "overwrite", "output_dir", "report_to", "train.eval_batch_size")


class NonFiniteLossError(RuntimeError):
    """The loss was NaN/inf for too many steps in a row; the message names the last good checkpoint."""


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
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text("".join(kept), encoding="utf-8")
            os.replace(tmp, self.path)
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


def prepare_run_dir(cfg: Config) -> tuple[Path, Optional[Path]]:
    """The run folder, and the checkpoint to resume from (None: a fresh run).

    A finished run (results.json) is never written over without --overwrite. An unfinished run with
    a checkpoint is continued when the options are the same (checkpoint.auto_resume) or when
    --checkpoint.resume asks for it. A folder holding other files (metrics of a run that never saved
    a checkpoint, or anything else) is an error that says what to do; what a run leaves before its
    first step (config.yaml, data_info.json, tensorboard/) does not count.
    """
    run_dir = Path(cfg.output_dir or f"runs/{cfg.task}-{time.strftime('%Y%m%d-%H%M%S')}")
    resume = cfg.checkpoint.resume
    if cfg.overwrite:
        return run_dir, None
    if (run_dir / "results.json").exists():
        raise ConfigError(
            f"output folder '{run_dir}' already holds a finished run; choose a new --output_dir, "
            f"or pass --overwrite true to write over it"
        )
    last = checkpoint.latest(run_dir / "checkpoints")
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


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: no weight decay on biases and LayerNorm weights (as BERT's optimizer)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


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


def write_ids(run_dir: Path, data: Any) -> None:
    """labeled_ids.txt and dev_ids.txt, one example id a line, so that any other tool (a SetFit
    baseline, a fully supervised run) can be trained and selected on exactly the same examples."""
    for name, rows in (("labeled_ids.txt", data.train), ("dev_ids.txt", data.dev)):
        ids = [str(r.get("id")) if isinstance(r, dict) else str(getattr(r, "id", "")) for r in rows]
        (run_dir / name).write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")


def target_accuracy(ori_logits: torch.Tensor, mask: torch.Tensor, hidden: Optional[torch.Tensor]) -> dict:
    """Counts behind unsup/target_accuracy (the original view's argmax against labels training never
    reads) and unsup/confident_target_accuracy (the same over the examples the confidence mask keeps).
    Counts, not ratios, so that a logging window averages over examples (see ratios_from_counts)."""
    if hidden is None:
        return {}
    known = hidden >= 0
    right = (ori_logits.argmax(-1).cpu() == hidden) & known
    kept = mask.detach().cpu() > 0
    return {"unsup/_target_right": float(right.sum()), "unsup/_target_n": float(known.sum()),
            "unsup/_confident_right": float((right & kept).sum()), "unsup/_confident_n": float((known & kept).sum())}


def ratios_from_counts(scalars: dict) -> dict:
    """Turn the window's mean counts of target_accuracy into the two accuracies (absent: nothing)."""
    out = {k: v for k, v in scalars.items() if not k.startswith("unsup/_")}
    for name, right, n in (("unsup/target_accuracy", "unsup/_target_right", "unsup/_target_n"),
                           ("unsup/confident_target_accuracy", "unsup/_confident_right", "unsup/_confident_n")):
        if scalars.get(n, 0) > 0:
            out[name] = scalars[right] / scalars[n]
    return out


def train(cfg: Config, task: Optional[Any] = None) -> dict:
    from accelerate import Accelerator
    from accelerate.utils import gather_object, set_seed
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    from tasks import get_task

    task = task if task is not None else get_task(cfg.task)
    select_metric = cfg.eval.select_metric or task.main_metric

    def unknown_select_metric(choices: Any) -> ConfigError:
        return ConfigError(f"--eval.select_metric '{select_metric}' is not a dev metric of task '{cfg.task}'; "
                           f"choose one of: {', '.join(choices)}")

    known = getattr(task, "selectable_metrics", None)  # checked now; a task without the list, at the first eval
    if known is not None and select_metric not in known:
        raise unknown_select_metric(known)
    t_start = time.time()
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
    main = accelerator.is_main_process
    run_dir, resume_from = prepare_run_dir(cfg)
    accelerator.wait_for_everyone()  # every process has looked at the folder before the main one changes it
    ckpt_root = run_dir / "checkpoints"
    if main:
        if resume_from is None:  # --overwrite, or what an attempt that never trained left behind
            clear_run_files(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        if resume_from is not None:
            changes = config_changes(run_dir / "config.yaml", cfg)
            tqdm.write(f"resuming from {resume_from}" + (f" with changed options: {'; '.join(changes)}" if changes else ""))
        if resume_from is None or cfg.checkpoint.resume:  # an explicit resume may change options: record them
            save_config(cfg, run_dir / "config.yaml")

    # ---------------------------------------------------------------- data, model, optimizer
    set_seed(cfg.seed)
    data = task.setup(cfg)
    if main:
        (run_dir / "data_info.json").write_text(json.dumps(data.info, indent=2), encoding="utf-8")
        write_ids(run_dir, data)
    class_index = getattr(task, "class_logits_index", None)
    if cfg.uda.distribution_alignment and class_index is None:
        raise ConfigError(f"--uda.distribution_alignment needs a task whose consistency distribution is over classes; "
                          f"task '{cfg.task}' has none")
    set_seed(cfg.seed)  # the new head's initialisation does not depend on how much data loading drew
    model = task.build_model(cfg)
    optimizer = torch.optim.AdamW(param_groups(model, cfg.train.weight_decay), lr=cfg.train.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, cfg.train.warmup_steps, cfg.train.max_steps)
    # The scheduler is stepped by hand once per optimizer step (accelerate's wrapper would step it
    # once per process), so warm-up means the same number of steps on 1 or 8 processes.
    model, optimizer = accelerator.prepare(model, optimizer)
    unwrapped = accelerator.unwrap_model(model)  # same parameters; evaluation and saving use it

    B, r, accum = cfg.train.batch_size, cfg.uda.unsup_ratio, cfg.train.grad_accum_steps
    use_uda = cfg.uda.lambda_u > 0
    rank, world = accelerator.process_index, accelerator.num_processes
    labeled = BatchStream(len(data.train), B, cfg.seed, rank, world)
    unlabeled = BatchStream(len(data.unlabeled), r * B, cfg.seed + 1, rank, world) if use_uda else None

    # ---------------------------------------------------------------- state a checkpoint restores
    start_step = 0
    dev_history: list[dict] = []
    skipped, bad_run = 0, 0  # steps skipped for a non-finite loss: in all, and in a row
    window: dict[str, float] = {}
    window_steps, window_examples = 0, 0
    drawn = {"labeled": 0, "unlabeled": 0}  # examples this process has trained on
    # running mean of the model's predicted class distribution on unlabelled batches (distribution
    # alignment); starts at the labelled prior, so the first weights are 1
    prior = getattr(task, "class_prior", None)
    class_ema = prior.clone().float() if cfg.uda.distribution_alignment else None
    seconds_before, resumed_at = 0.0, []
    mine: Optional[dict] = None  # this process's RNG and task state, restored just before the loop
    keep_lines: Optional[int] = None  # metrics.jsonl lines logged up to the checkpoint
    if resume_from is not None:
        state = checkpoint.load_state(resume_from)
        checkpoint.load_model_weights(unwrapped, resume_from / checkpoint.MODEL_DIR)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if accelerator.scaler is not None and state["scaler"] is not None:
            accelerator.scaler.load_state_dict(state["scaler"])
        labeled.load_state_dict(state["streams"]["labeled"])
        if unlabeled is not None:
            unlabeled.load_state_dict(state["streams"]["unlabeled"])
        loop = state["loop"]
        start_step, dev_history, skipped = state["step"], loop["dev_history"], loop["skipped"]
        window, window_steps, window_examples = loop["window"], loop["window_steps"], loop["window_examples"]
        if class_ema is not None:
            class_ema = torch.tensor(loop["class_ema"], dtype=torch.float32)
        seconds_before, resumed_at = loop["train_seconds"], loop["resumed_at"] + [state["step"]]
        processes = state["processes"]
        if len(processes) != world and main:
            tqdm.write(f"warning: the checkpoint was written by {len(processes)} processes and this run has {world}; "
                       f"training continues, but not exactly as an uninterrupted run would")
        mine = processes[rank % len(processes)]
        drawn = dict(mine["examples"])
        keep_lines = state["metrics_lines"]
        if main:  # checkpoints saved under another --eval.select_metric are re-ranked by this one
            rescored = checkpoint.rescore(ckpt_root, select_metric,
                                          {h["step"]: h.get(select_metric) for h in dev_history})
            if rescored:
                tqdm.write(f"re-ranked {len(rescored)} checkpoint(s) by dev {select_metric} from the dev history; "
                           f"checkpoints pruned earlier (keep_top_k) were chosen by the metric of that time")

    logger = MetricsLogger(run_dir, cfg.report_to == "tensorboard", main,
                           resume_step=start_step if resume_from is not None else None, keep_lines=keep_lines)
    examples_per_step = (B + (r * B if use_uda else 0)) * accum * world
    t_loop = window_t0 = time.time()

    def evaluate_dev(step: int) -> Optional[float]:
        if not len(data.dev):
            return None
        model.eval()
        metrics = task.evaluate(unwrapped, data.dev, accelerator, cfg.train.eval_batch_size, "dev")
        model.train()
        logger.log(step, {f"dev/{k}": float(v) for k, v in metrics.items()})
        dev_history.append({"step": step, **metrics})
        if main and metrics.get("accuracy", 0) - metrics.get("macro_f1", 1) > 0.1:
            tqdm.write(f"warning: step {step}: dev macro-F1 {metrics['macro_f1']:.3f} is far below accuracy "
                       f"{metrics['accuracy']:.3f}: the model predicts some classes for almost every example "
                       f"(see unsup/max_class_share)")
        if select_metric not in metrics:
            raise unknown_select_metric(sorted(metrics))
        return float(metrics[select_metric])

    def save_checkpoint(step: int, metric: Optional[float]) -> None:
        # every process hands in its own RNG and augmentation state; only the main one writes
        local = {"rng": checkpoint.rng_state(), "task": task.state_dict(), "examples": dict(drawn)}
        processes = gather_object([local]) if world > 1 else [local]
        if not main:
            return
        state = {
            "step": step, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "scaler": accelerator.scaler.state_dict() if accelerator.scaler is not None else None,
            "streams": {"labeled": labeled.state_dict(),
                        "unlabeled": unlabeled.state_dict() if unlabeled is not None else None},
            "processes": processes,
            "loop": {"dev_history": dev_history, "skipped": skipped, "window": window, "window_steps": window_steps,
                     "window_examples": window_examples, "train_seconds": seconds_before + time.time() - t_loop,
                     "resumed_at": resumed_at,
                     "class_ema": class_ema.tolist() if class_ema is not None else None},
            "metrics_lines": logger.lines,
        }
        checkpoint.save(ckpt_root, step, metric, cfg.checkpoint.keep_top_k, lambda d: task.save(unwrapped, d), state,
                        metric_name=select_metric)
        best = checkpoint.best(ckpt_root)
        if metric is not None and best is not None:
            tqdm.write(f"step {step}: dev {select_metric} {metric:.4f} "
                       f"(best {best.metric:.4f} at step {best.step})")

    model.train()
    bar = tqdm(total=cfg.train.max_steps, initial=start_step, disable=not main, desc="train", dynamic_ncols=True)
    if mine is not None:  # last, so that nothing between here and the first step draws from the RNGs
        task.load_state_dict(mine["task"])
        checkpoint.set_rng_state(mine["rng"])
    for step in range(start_step, cfg.train.max_steps):
        threshold = tsa_threshold(cfg.uda.tsa, step / cfg.train.max_steps, task.tsa_num_classes)
        lambda_u = cfg.uda.lambda_u * ramp(step, cfg.uda.lambda_u_ramp_steps)
        alignment = (prior / class_ema).to(accelerator.device) if class_ema is not None else None
        step_ok, step_stats, batch_means = True, {}, []
        for micro in range(accum):
            # gradients are synchronised across processes only on the last micro-batch
            sync = nullcontext() if micro == accum - 1 else accelerator.no_sync(model)
            with sync:
                idx_l = next(labeled)
                batch_l = _to(task.collate_labeled([data.train[i] for i in idx_l]), accelerator.device)
                drawn["labeled"] += len(idx_l)
                sup = task.supervised(model, batch_l)
                sup_loss, sup_mask = tsa_supervised_loss(sup.per_example_loss, sup.gold_prob, threshold)
                unsup_loss, unsup_mask_ratio = None, None
                if use_uda:
                    idx_u = next(unlabeled)
                    ori, aug = task.collate_unlabeled([data.unlabeled[i] for i in idx_u])
                    ori, aug = _to(ori, accelerator.device), _to(aug, accelerator.device)
                    drawn["unlabeled"] += len(idx_u)
                    # The original view is a stop-gradient target: no graph is built for it. The model
                    # stays in train mode (dropout on), as in the reference.
                    with torch.no_grad():
                        ori_logits = task.consistency_logits(model, ori)
                    aug_logits = task.consistency_logits(model, aug)
                    terms = [consistency_loss(o, a, cfg.uda.temperature, cfg.uda.confidence,
                                              hard=cfg.uda.target == "hard",
                                              alignment=alignment if j == class_index else None)
                             for j, (o, a) in enumerate(zip(ori_logits, aug_logits))]
                    unsup_loss = torch.stack([t[0] for t in terms]).mean()
                    unsup_mask_ratio = float(torch.stack([t[1].mean() for t in terms]).mean())
                loss = total_loss(sup_loss, unsup_loss, lambda_u)
                if not _finite_everywhere(loss, accelerator):
                    step_ok = False  # a NaN/inf loss never reaches the weights: the whole step is skipped
                    break
                accelerator.backward(loss / accum)
            # window statistics for logging (measured values only)
            stats = {"sup/loss": sup_loss.item(), "sup/trained_ratio": sup_mask.mean().item(),
                     "sup/accuracy": sup.correct.mean().item(), "sup/gold_prob": sup.gold_prob.mean().item(),
                     "train/loss": loss.item()}
            if use_uda:
                stats.update({"unsup/loss": unsup_loss.item(), "unsup/mask_ratio": unsup_mask_ratio})
                if class_index is not None:
                    o = ori_logits[class_index]
                    batch_means.append(o.softmax(-1).mean(0))
                    stats.update({f"unsup/{k}": v for k, v in class_prediction_stats(o).items()})
                    stats.update(target_accuracy(o, terms[class_index][1],
                                                 task.hidden_labels([data.unlabeled[i] for i in idx_u])))
            for k, v in stats.items():
                step_stats[k] = step_stats.get(k, 0.0) + v / accum
        if step_ok and cfg.train.max_grad_norm is not None:
            grad_norm = float(accelerator.clip_grad_norm_(model.parameters(), cfg.train.max_grad_norm))
            step_stats["train/grad_norm"] = grad_norm
            # an overflow in the backward pass (fp16's grad scaler skips such steps by itself)
            step_ok = math.isfinite(grad_norm) or accelerator.scaler is not None
        if step_ok and class_ema is not None:
            mean = torch.stack(batch_means).mean(0).float()
            if world > 1:
                mean = accelerator.reduce(mean.to(accelerator.device), reduction="mean")
            m = cfg.uda.alignment_momentum
            class_ema = m * class_ema + (1 - m) * mean.cpu()
        if step_ok:
            optimizer.step()
            if not accelerator.optimizer_step_was_skipped:
                scheduler.step()
            bad_run = 0
            for k, v in step_stats.items():
                window[k] = window.get(k, 0.0) + v
            window_steps += 1
            window_examples += examples_per_step
        else:
            skipped, bad_run = skipped + 1, bad_run + 1
        optimizer.zero_grad(set_to_none=True)
        done = step + 1
        if cfg.train.max_nonfinite_steps is not None and bad_run >= cfg.train.max_nonfinite_steps:
            last = checkpoint.latest(ckpt_root)
            kept = f"the last good checkpoint is '{last.path}' (step {last.step})" if last else \
                "no checkpoint had been written yet"
            bar.close()
            raise NonFiniteLossError(
                f"the loss (or gradient norm) was NaN/inf for {bad_run} steps in a row (steps {done - bad_run + 1}-"
                f"{done}), so training stopped; {kept}. Lower --train.lr, prefer bf16 to fp16, check the data, "
                f"or raise --train.max_nonfinite_steps")

        if done % cfg.train.log_every == 0 or done == cfg.train.max_steps:
            elapsed = max(time.time() - window_t0, 1e-9)
            scalars = _mean_over_processes({k: v / max(window_steps, 1) for k, v in window.items()}, accelerator)
            scalars = ratios_from_counts(scalars)
            scalars.update({"sup/tsa_threshold": threshold, "train/lr": scheduler.get_last_lr()[0],
                            **({"unsup/lambda_u": lambda_u} if use_uda else {}),
                            "train/nonfinite_skipped": skipped,
                            "train/examples_per_sec": window_examples / elapsed,
                            "train/steps_per_sec": window_steps / elapsed})
            logger.log(done, scalars)
            bar.set_postfix({name: f"{scalars[k]:.4f}" for name, k in
                             (("loss", "train/loss"), ("sup", "sup/loss"), ("unsup", "unsup/loss")) if k in scalars})
            window, window_steps, window_examples, window_t0 = {}, 0, 0, time.time()
        bar.update(1)
        at_eval = done % cfg.train.eval_every == 0 or done == cfg.train.max_steps
        t_pause = time.time()
        metric = evaluate_dev(done) if at_eval else None
        every = cfg.checkpoint.every_steps
        if (at_eval or (every is not None and done % every == 0)) and bad_run == 0:
            save_checkpoint(done, metric)  # never during a run of skipped steps: the last good one stays latest
        window_t0 += time.time() - t_pause  # evaluation and checkpoint time is not training throughput
    bar.close()
    train_seconds = seconds_before + time.time() - t_loop

    # ---------------------------------------------------------------- select, test once, save
    accelerator.wait_for_everyone()  # the main process has written the last checkpoint
    best = checkpoint.best(ckpt_root)
    if best is not None:
        checkpoint.load_model_weights(unwrapped, best.path / checkpoint.MODEL_DIR)
    selected = {"step": best.step if best is not None else cfg.train.max_steps,
                "by": f"dev/{select_metric}" if best is not None else "last step (no dev split)"}
    test_metrics: dict = {}
    if cfg.eval.test and len(data.test):
        model.eval()
        test_metrics = task.evaluate(unwrapped, data.test, accelerator, cfg.train.eval_batch_size, "test",
                                     out_dir=run_dir)
        logger.log(selected["step"], {f"test/{k}": float(v) for k, v in test_metrics.items()})
    local = {"rank": rank, "device": str(accelerator.device), "pid": os.getpid(), "examples": drawn}
    processes = gather_object([local]) if world > 1 else [local]
    results = {
        "task": cfg.task,
        "selected_model": selected,
        "dev_best": next((h for h in dev_history if best is not None and h["step"] == best.step), None),
        "dev_history": dev_history,
        "test": test_metrics,
        "train_seconds": round(train_seconds, 1),
        "total_seconds": round(time.time() - t_start, 1),
        "num_processes": world,
        "processes": processes,
        "mixed_precision": cfg.train.mixed_precision,
        "nonfinite_skipped_steps": skipped,
        "resumed_at_steps": resumed_at,
        "data": data.info,
    }
    if main:
        task.save(unwrapped, run_dir / "model")
        # results.json marks the run finished, so it appears whole or not at all
        tmp = run_dir / "results.json.tmp"
        tmp.write_text(json.dumps(results, indent=2), encoding="utf-8")
        os.replace(tmp, run_dir / "results.json")
        if test_metrics:
            tqdm.write(f"test ({selected['by']}, step {selected['step']}): "
                       + ", ".join(f"{k} {v:.4f}" for k, v in test_metrics.items() if isinstance(v, float)))
        tqdm.write(f"run folder: {run_dir}")
    logger.close()
    accelerator.wait_for_everyone()
    return results
