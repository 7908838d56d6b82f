"""The training loop: one function you can read top to bottom.

forward (labelled) -> TSA-masked supervised loss -> forward (original view, no graph) ->
forward (augmented view) -> consistency loss -> backward -> clip -> step -> log -> eval -> save.
"""

from __future__ import annotations

import json
import math
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from uda.config import Config, ConfigError, save_config
from uda.losses import consistency_loss, total_loss, tsa_supervised_loss, tsa_threshold


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
    """Writes every scalar to metrics.jsonl and (optionally) TensorBoard, from the main process."""

    def __init__(self, run_dir: Path, tensorboard: bool, enabled: bool) -> None:
        self.enabled = enabled
        self.writer = None
        self.file = None
        if enabled:
            self.file = (run_dir / "metrics.jsonl").open("a", encoding="utf-8")
            if tensorboard:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def log(self, step: int, scalars: dict[str, float]) -> None:
        if not self.enabled:
            return
        self.file.write(json.dumps({"step": step, **scalars}) + "\n")
        self.file.flush()
        if self.writer is not None:
            for k, v in scalars.items():
                self.writer.add_scalar(k, v, step)

    def close(self) -> None:
        if self.file:
            self.file.close()
        if self.writer:
            self.writer.close()


def prepare_run_dir(cfg: Config) -> Path:
    run_dir = Path(cfg.output_dir or f"runs/{cfg.task}-{time.strftime('%Y%m%d-%H%M%S')}")
    if run_dir.exists() and any(run_dir.iterdir()) and not cfg.overwrite:
        what = "a finished run" if (run_dir / "results.json").exists() else "another run's files"
        raise ConfigError(
            f"output folder '{run_dir}' already holds {what}; choose a new --output_dir, "
            f"or pass --overwrite true to write over it"
        )
    return run_dir


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


def train(cfg: Config, task: Optional[Any] = None) -> dict:
    from accelerate import Accelerator
    from accelerate.utils import set_seed
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    from tasks import get_task

    task = task if task is not None else get_task(cfg.task)
    t_start = time.time()
    accelerator = Accelerator(mixed_precision=cfg.train.mixed_precision)
    main = accelerator.is_main_process
    run_dir = prepare_run_dir(cfg)
    accelerator.wait_for_everyone()
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, run_dir / "config.yaml")

    # ---------------------------------------------------------------- data, model, optimizer
    set_seed(cfg.seed)
    data = task.setup(cfg)
    if main:
        (run_dir / "data_info.json").write_text(json.dumps(data.info, indent=2), encoding="utf-8")
    set_seed(cfg.seed)  # the new head's initialisation does not depend on how much data loading drew
    model = task.build_model(cfg)
    optimizer = torch.optim.AdamW(param_groups(model, cfg.train.weight_decay), lr=cfg.train.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, cfg.train.warmup_steps, cfg.train.max_steps)
    # The scheduler is stepped by hand once per optimizer step (accelerate's wrapper would step it
    # once per process), so warm-up means the same number of steps on 1 or 8 processes.
    model, optimizer = accelerator.prepare(model, optimizer)

    B, r, accum = cfg.train.batch_size, cfg.uda.unsup_ratio, cfg.train.grad_accum_steps
    use_uda = cfg.uda.lambda_u > 0
    rank, world = accelerator.process_index, accelerator.num_processes
    labeled = BatchStream(len(data.train), B, cfg.seed, rank, world)
    unlabeled = BatchStream(len(data.unlabeled), r * B, cfg.seed + 1, rank, world) if use_uda else None

    logger = MetricsLogger(run_dir, cfg.report_to == "tensorboard", main)
    best_metric, best_step, best_state = -math.inf, -1, None
    dev_history: list[dict] = []
    window: dict[str, float] = {}
    window_steps, window_examples, window_t0 = 0, 0, time.time()
    examples_per_step = (B + (r * B if use_uda else 0)) * accum * world

    def evaluate_dev(step: int) -> None:
        nonlocal best_metric, best_step, best_state
        if not len(data.dev):
            return
        model.eval()
        metrics = task.evaluate(model, data.dev, accelerator, cfg.train.eval_batch_size, "dev")
        model.train()
        logger.log(step, {f"dev/{k}": float(v) for k, v in metrics.items()})
        dev_history.append({"step": step, **metrics})
        score = metrics[task.main_metric]
        if score > best_metric:  # ties keep the earlier model
            best_metric, best_step = score, step
            best_state = {k: v.detach().to("cpu", copy=True) for k, v in accelerator.unwrap_model(model).state_dict().items()}
        if main:
            tqdm.write(f"step {step}: dev {task.main_metric} {score:.4f} (best {best_metric:.4f} at step {best_step})")

    model.train()
    bar = tqdm(total=cfg.train.max_steps, disable=not main, desc="train", dynamic_ncols=True)
    for step in range(cfg.train.max_steps):
        threshold = tsa_threshold(cfg.uda.tsa, step / cfg.train.max_steps, task.tsa_num_classes)
        for micro in range(accum):
            # gradients are synchronised across processes only on the last micro-batch
            sync = nullcontext() if micro == accum - 1 else accelerator.no_sync(model)
            with sync:
                batch_l = _to(task.collate_labeled([data.train[i] for i in next(labeled)]), accelerator.device)
                sup = task.supervised(model, batch_l)
                sup_loss, sup_mask = tsa_supervised_loss(sup.per_example_loss, sup.gold_prob, threshold)
                unsup_loss, unsup_mask_ratio = None, None
                if use_uda:
                    ori, aug = task.collate_unlabeled([data.unlabeled[i] for i in next(unlabeled)])
                    ori, aug = _to(ori, accelerator.device), _to(aug, accelerator.device)
                    # The original view is a stop-gradient target: no graph is built for it. The model
                    # stays in train mode (dropout on), as in the reference.
                    with torch.no_grad():
                        ori_logits = task.consistency_logits(model, ori)
                    aug_logits = task.consistency_logits(model, aug)
                    terms = [consistency_loss(o, a, cfg.uda.temperature, cfg.uda.confidence)
                             for o, a in zip(ori_logits, aug_logits)]
                    unsup_loss = torch.stack([t[0] for t in terms]).mean()
                    unsup_mask_ratio = float(torch.stack([t[1].mean() for t in terms]).mean())
                loss = total_loss(sup_loss, unsup_loss, cfg.uda.lambda_u)
                accelerator.backward(loss / accum)
            # window statistics for logging (measured values only)
            stats = {"sup/loss": sup_loss.item(), "sup/trained_ratio": sup_mask.mean().item(),
                     "sup/accuracy": sup.correct.mean().item(), "train/loss": loss.item()}
            if use_uda:
                stats.update({"unsup/loss": unsup_loss.item(), "unsup/mask_ratio": unsup_mask_ratio})
            for k, v in stats.items():
                window[k] = window.get(k, 0.0) + v / accum
        if cfg.train.max_grad_norm is not None:
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), cfg.train.max_grad_norm)
            window["train/grad_norm"] = window.get("train/grad_norm", 0.0) + float(grad_norm)
        optimizer.step()
        if not accelerator.optimizer_step_was_skipped:
            scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        window_steps += 1
        window_examples += examples_per_step
        done = step + 1

        if done % cfg.train.log_every == 0 or done == cfg.train.max_steps:
            elapsed = max(time.time() - window_t0, 1e-9)
            scalars = {k: v / window_steps for k, v in window.items()}
            scalars.update({"sup/tsa_threshold": threshold, "train/lr": scheduler.get_last_lr()[0],
                            "train/examples_per_sec": window_examples / elapsed,
                            "train/steps_per_sec": window_steps / elapsed})
            logger.log(done, scalars)
            bar.set_postfix({name: f"{scalars[k]:.4f}" for name, k in
                             (("loss", "train/loss"), ("sup", "sup/loss"), ("unsup", "unsup/loss")) if k in scalars})
            window, window_steps, window_examples, window_t0 = {}, 0, 0, time.time()
        bar.update(1)
        if done % cfg.train.eval_every == 0 or done == cfg.train.max_steps:
            evaluate_dev(done)
    bar.close()
    train_seconds = time.time() - t_start

    # ---------------------------------------------------------------- select, test once, save
    unwrapped = accelerator.unwrap_model(model)
    if best_state is not None:
        unwrapped.load_state_dict(best_state)
    selected = {"step": best_step if best_state is not None else cfg.train.max_steps,
                "by": f"dev/{task.main_metric}" if best_state is not None else "last step (no dev split)"}
    test_metrics: dict = {}
    if cfg.eval.test and len(data.test):
        model.eval()
        test_metrics = task.evaluate(model, data.test, accelerator, cfg.train.eval_batch_size, "test",
                                     out_dir=run_dir)
        logger.log(selected["step"], {f"test/{k}": float(v) for k, v in test_metrics.items()})
    results = {
        "task": cfg.task,
        "selected_model": selected,
        "dev_best": next((h for h in dev_history if h["step"] == best_step), None),
        "dev_history": dev_history,
        "test": test_metrics,
        "train_seconds": round(train_seconds, 1),
        "total_seconds": round(time.time() - t_start, 1),
        "num_processes": world,
        "data": data.info,
    }
    if main:
        task.save(unwrapped, run_dir / "model")
        (run_dir / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
        if test_metrics:
            tqdm.write(f"test ({selected['by']}, step {selected['step']}): "
                       + ", ".join(f"{k} {v:.4f}" for k, v in test_metrics.items() if isinstance(v, float)))
        tqdm.write(f"run folder: {run_dir}")
    logger.close()
    accelerator.wait_for_everyone()
    return results
