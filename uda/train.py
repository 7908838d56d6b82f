"""Training, as the best recipes split it: ``train`` runs ``setup`` (run folder, data, model,
optimizer, resume), ``fit`` (the loop, one function you read top to bottom) and ``finish`` (select on
dev, test once, save).

The loop: labelled and unlabelled batches -> ``uda_step`` (forward on the labelled batch, TSA-masked
supervised loss, forward on the original view without a graph, forward on the augmented view,
consistency loss, total; ``uda/step.py``) -> non-finite guard -> backward -> clip -> step -> log ->
eval -> checkpoint. The caller gives ``train`` its task (``tasks/cli.py`` makes it from ``--task``).

The run folder (what it holds, its lock, whether a run starts fresh or continues) is
``uda/rundir.py``; the checkpoints are ``uda/checkpoint.py``. A run that stopped before finishing
continues exactly from its latest checkpoint when started again with the same options: weights,
optimizer, scheduler, grad scaler, step, both data streams, the task's augmentation RNG and the
Python/NumPy/torch RNGs are restored, and the logs continue with no gap or repeat.
"""

from __future__ import annotations

import math
import os
import time
from contextlib import ExitStack, nullcontext
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from uda import checkpoint
from uda.alignment import ClassAligner
from uda.config import Config, ConfigError
from uda.devices import environment, kept_accelerate_state, make_accelerator
from uda.consistency import Family, settings_from
from uda.distributed import finite_everywhere, gathered, main_decides, mean_over_processes, reduced_observations
from uda.errors import NonFiniteLossError, RunStopped
from uda.io import atomic_write_json
from uda.losses import ramp, tsa_threshold
from uda.metrics_log import MetricsLogger
from uda.optim import param_groups
from uda.rundir import open_run_dir, record_data
from uda.run_state import LoopState, Run
from uda.signals import stop_requests
from uda.step import StepOutput, ratios_from_counts, uda_step
from uda.streams import BatchStream, take
from uda.task import RunContext, Task, TaskData

__all__ = ["NonFiniteLossError", "RunStopped", "Run", "train", "setup", "fit", "finish"]


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

def setup(cfg: Config, task: Task, clock: Callable[[], float] = time.monotonic,
          held: Optional[ExitStack] = None) -> Run:
    """Run folder, data, model, optimizer and scheduler, batch streams, and (when continuing a run)
    everything its latest checkpoint holds. The main process locks the run folder until ``held`` closes
    (no lock without it)."""
    from accelerate.utils import set_seed

    select_metric = cfg.eval.select_metric or task.main_metric
    known = task.selectable_metrics  # checked now; a task with an empty list, at the first eval
    if known and select_metric not in known:
        raise _unknown_select_metric(cfg, select_metric, known)
    t_start, cpu_start = time.time(), time.process_time()
    accelerator = make_accelerator(cfg)
    main = accelerator.is_main_process
    rankings = checkpoint.rankings_for(select_metric, task.rank_metrics)
    run_dir, resume_from = open_run_dir(cfg, rankings, main, held, accelerator.wait_for_everyone)

    set_seed(cfg.seed)
    context = RunContext(run_dir, wants_unlabeled=cfg.uda.lambda_u > 0)
    data = task.setup(cfg, context)
    record_data(cfg, run_dir, data, resumed=resume_from is not None, main=main)
    if cfg.uda.distribution_alignment and data.class_logits_index is None:
        raise ConfigError(f"--uda.distribution_alignment needs a task whose consistency distribution is over classes; "
                          f"task '{cfg.task}' has none")
    set_seed(cfg.seed)  # the new head's initialisation does not depend on how much data loading drew
    model, optimizer, scheduler = _model_and_optimizer(cfg, task, accelerator)

    B, r = cfg.train.batch_size, cfg.uda.unsup_ratio
    rank, world = accelerator.process_index, accelerator.num_processes
    labeled = BatchStream(len(data.train), B, cfg.seed, rank, world)
    unlabeled = BatchStream(len(data.unlabeled), r * B, cfg.seed + 1, rank, world) if context.wants_unlabeled else None
    state = LoopState()
    if cfg.uda.distribution_alignment and unlabeled is not None:  # aligns the unlabelled targets: none
        # when supervised only (a recipe with alignment run as its own baseline, --uda.lambda_u 0);
        # starts at the labelled prior, so the first weights are 1
        state.aligner = ClassAligner(data.class_prior, cfg.uda.alignment_momentum, cfg.uda.alignment_bank,
                                     estimate=cfg.uda.alignment_target == "estimated")
    if cfg.uda.method != "uda" and unlabeled is not None:  # a method of the FixMatch family and its state
        state.family = Family(cfg.uda.method, settings_from(cfg.uda), data.class_logits_index, len(data.unlabeled),
                              data.class_prior)
    run = Run(cfg, task, accelerator, model, accelerator.unwrap_model(model), optimizer, scheduler, data,
              labeled, unlabeled, None, run_dir, select_metric, state, t_start, cpu_start,  # type: ignore[arg-type]
              rankings=rankings, clock=clock)
    keep_lines = restore(run, resume_from) if resume_from is not None else None
    run.logger = MetricsLogger(run_dir, cfg.report_to == "tensorboard", main,
                               resume_step=state.step if resume_from is not None else None, keep_lines=keep_lines)
    return run


def _model_and_optimizer(cfg: Config, task: Task, accelerator: Any) -> tuple[torch.nn.Module, Any, Any]:
    """The task's model, AdamW and the linear warm-up schedule, prepared by accelerate. The scheduler is
    stepped by hand once per optimizer step (accelerate's wrapper would step it once per process), so
    warm-up means the same number of steps on 1 or 8 processes."""
    from transformers import get_linear_schedule_with_warmup

    with kept_accelerate_state():  # a stage before the run (contrastive, MLM) may set up accelerate its own way
        model = task.build_model(cfg)
    used = accelerator.precision_choice["used"]  # train.mixed_precision resolved for the device ("auto")
    if accelerator.mixed_precision != used:  # what trains is what the config chose
        raise RuntimeError(f"accelerate's mixed precision is '{accelerator.mixed_precision}' after the model was "
                           f"built, not '{used}' (train.mixed_precision {cfg.train.mixed_precision})")
    optimizer = torch.optim.AdamW(param_groups(model, cfg.train.weight_decay, cfg.train.lr, cfg.train.head_lr),
                                  lr=cfg.train.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, cfg.train.warmup_steps, cfg.train.max_steps)
    model, optimizer = accelerator.prepare(model, optimizer)
    return model, optimizer, scheduler


def _unknown_select_metric(cfg: Config, select_metric: str, choices: Any) -> ConfigError:
    return ConfigError(f"--eval.select_metric '{select_metric}' is not a dev metric of task '{cfg.task}'; "
                       f"choose one of: {', '.join(choices)}")


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
    st = run.state
    st.load_state_dict(saved["loop"], saved["step"])
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

def fit(run: Run) -> None:
    """The training loop, from the step the run is at to train.max_steps."""
    from tqdm.auto import tqdm

    cfg, task, acc, st = run.cfg, run.task, run.accelerator, run.state
    accum, options = cfg.train.grad_accum_steps, _step_options(cfg, run.data)
    t_loop = window_t0 = time.time()
    last_save = run.clock()  # checkpoint.every_minutes counts from here, and from each save
    run.model.train()
    bar = tqdm(total=cfg.train.max_steps, initial=st.step, disable=not acc.is_main_process, desc="train",
               dynamic_ncols=True)
    if run.restore_rng is not None:  # last, so that nothing between here and the first step draws from the RNGs
        task.load_state_dict(run.restore_rng["task"])
        checkpoint.set_rng_state(run.restore_rng["rng"])
    with stop_requests(st):  # Ctrl-C / SIGTERM: stop after this step, with its checkpoint
        for step in range(st.step, cfg.train.max_steps):
            progress = step / cfg.train.max_steps
            lambda_u = cfg.uda.lambda_u * ramp(step, cfg.uda.lambda_u_ramp_steps)
            tsa = partial(tsa_threshold, cfg.uda.tsa, progress)  # K -> the threshold of a head of K classes
            alignment = st.aligner.weights().to(acc.device) if st.aligner is not None else None
            step_ok, stats, class_log_probs, observed = True, {}, [], []
            for micro in range(accum):
                # gradients are synchronised across processes only on the last micro-batch
                with nullcontext() if micro == accum - 1 else acc.no_sync(run.model):
                    batch_l, views, hidden, idx_u = _next_batches(run)
                    # one autocast context over the step's forward passes: the weights are cast to the
                    # compute dtype once and reused (accelerate's per-forward autocast casts them every pass)
                    with acc.autocast():
                        out: StepOutput = uda_step(task, run.model, batch_l, views, tsa=tsa, lambda_u=lambda_u,
                                                   alignment=alignment, hidden_labels=hidden, family=st.family,
                                                   unlabeled_index=idx_u, **options)
                    step_ok = finite_everywhere(out.loss, acc)
                    if not step_ok:
                        break  # a NaN/inf loss never reaches the weights: the step is skipped
                    acc.backward(out.loss / accum)
                _add_micro_batch(stats, class_log_probs, out, accum)
                observed.append(out.observed)
            if step_ok and cfg.train.max_grad_norm is not None:
                grad_norm = float(acc.clip_grad_norm_(run.model.parameters(), cfg.train.max_grad_norm))
                stats["train/grad_norm"] = grad_norm
                # an overflow in the backward pass (fp16's grad scaler skips such steps by itself)
                step_ok = math.isfinite(grad_norm) or acc.scaler is not None
            if step_ok and st.aligner is not None:
                st.aligner.update(gathered(torch.cat(class_log_probs), acc))
            if step_ok and st.family is not None:  # the method's thresholds and running means, alike on every process
                st.family.update(reduced_observations(observed, acc))
            if step_ok:
                run.optimizer.step()
                if not acc.optimizer_step_was_skipped:
                    run.scheduler.step()
            _count_step(run, step_ok, stats)
            run.optimizer.zero_grad(set_to_none=True)
            done = st.step = step + 1
            if cfg.train.max_nonfinite_steps is not None and st.bad_run >= cfg.train.max_nonfinite_steps:
                bar.close()
                raise run.nonfinite_error(done)
            if done % cfg.train.log_every == 0 or done == cfg.train.max_steps:
                window_t0 = _log_window(run, done, progress, lambda_u, window_t0, bar)
            bar.update(1)
            t_pause = time.time()
            saved, stop = _evaluate_and_save(run, done, last_save, t_loop)
            if saved:
                last_save = run.clock()
            if stop:
                bar.close()
                raise run.stopped_error(done, saved)
            window_t0 += time.time() - t_pause  # evaluation and checkpoint time is not training throughput
    bar.close()
    if cfg.train.max_steps == 0:  # the start alone, evaluated on dev and kept as the step-0 checkpoint
        _evaluate_and_save(run, 0, last_save, t_loop)
    st.train_seconds_before += time.time() - t_loop  # now the training time of the whole run


def _step_options(cfg: Config, data: TaskData) -> dict:
    """The arguments of ``uda_step`` that stay the same for the whole run."""
    return {"tsa_num_classes": data.tsa_num_classes, "class_logits_index": data.class_logits_index,
            "temperature": cfg.uda.temperature, "confidence": cfg.uda.confidence, "hard": cfg.uda.target == "hard",
            "class_prior": data.class_prior}


def _next_batches(run: Run) -> tuple[dict, Optional[tuple[dict, dict]], Optional[torch.Tensor],
                                     Optional[torch.Tensor]]:
    """The next micro-batch on the device: (labelled batch, (original, augmented) unlabelled views or
    None when supervised only, the unlabelled examples' hidden labels or None, their indices in the pool
    or None)."""
    device, st, task = run.accelerator.device, run.state, run.task
    idx_l = next(run.labeled)
    batch_l = _to(task.collate_labeled([run.data.train[i] for i in idx_l]), device)
    st.drawn["labeled"] += len(idx_l)
    if run.unlabeled is None:
        return batch_l, None, None, None
    idx_u = next(run.unlabeled)
    unl = take(run.data.unlabeled, idx_u)
    ori, aug = task.collate_unlabeled(unl)
    st.drawn["unlabeled"] += len(unl)
    return batch_l, (_to(ori, device), _to(aug, device)), task.hidden_labels(unl), torch.as_tensor(idx_u)


def _to(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def _add_micro_batch(stats: dict, class_log_probs: list, out: StepOutput, accum: int) -> None:
    """Add one micro-batch's stats (averaged over the step's ``accum`` micro-batches) and keep its class
    log-probabilities for distribution alignment."""
    if out.class_log_probs is not None:
        class_log_probs.append(out.class_log_probs)
    for k, v in out.stats.items():
        stats[k] = stats.get(k, 0.0) + v / accum


def _count_step(run: Run, step_ok: bool, stats: dict) -> None:
    """Add a step taken to the logging window, or count a skipped one."""
    st = run.state
    if not step_ok:
        st.skipped, st.bad_run = st.skipped + 1, st.bad_run + 1
        return
    st.bad_run = 0
    for k, v in stats.items():
        st.window[k] = st.window.get(k, 0.0) + v
    st.window_steps += 1
    cfg = run.cfg
    unlabeled = cfg.uda.unsup_ratio * cfg.train.batch_size if run.unlabeled is not None else 0
    st.window_examples += (cfg.train.batch_size + unlabeled) * cfg.train.grad_accum_steps * run.accelerator.num_processes


def _log_window(run: Run, done: int, progress: float, lambda_u: float, window_t0: float, bar: Any) -> float:
    """Log the means of the scalars since the last log line (over processes too) with the step's
    schedule values and throughput; returns the new window's start time."""
    st = run.state
    elapsed = max(time.time() - window_t0, 1e-9)
    scalars = mean_over_processes({k: v / max(st.window_steps, 1) for k, v in st.window.items()}, run.accelerator)
    scalars = ratios_from_counts(scalars, run.data.class_prior)
    threshold = tsa_threshold(run.cfg.uda.tsa, progress, run.data.tsa_num_classes)
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
    every, minutes = cfg.checkpoint.every_steps, cfg.checkpoint.every_minutes
    # every process must decide alike (a save gathers from all of them): the main process's clock and
    # signals decide for all
    minutes_due, stop = main_decides((minutes is not None and run.clock() - last_save >= 60.0 * minutes,
                                      st.stop_signal != 0), run.accelerator)
    due = at_eval or (every is not None and done % every == 0) or minutes_due or stop
    saved = due and st.bad_run == 0  # the last good checkpoint stays the latest
    if saved:
        save_checkpoint(run, done, metric, st.train_seconds_before + time.time() - t_loop)
    return saved, stop


def evaluate_dev(run: Run, step: int) -> Optional[float]:
    """Dev metrics, logged and kept in the dev history; returns the selection metric's value."""
    if not len(run.data.dev):
        return None
    run.model.eval()
    metrics = run.task.evaluate(run.unwrapped, run.data.dev, run.accelerator, run.cfg.train.eval_batch_size, "dev")
    run.model.train()
    run.logger.log(step, {f"dev/{k}": float(v) for k, v in metrics.items()})
    run.state.dev_history.append({"step": step, **metrics})
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
        "loop": st.state_dict(train_seconds, run.cpu_seconds()),
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

def _test_last_step(run: Run, best: Any) -> Optional[dict]:
    """Test metrics of the weights in memory, the last step's, when dev selected another step (None when
    it selected the last one, there is no test set, or eval.test_last_step is off)."""
    cfg = run.cfg
    if not (cfg.eval.test and cfg.eval.test_last_step and len(run.data.test)) or best is None \
            or best.step == cfg.train.max_steps:
        return None
    run.model.eval()
    metrics = run.task.evaluate(run.unwrapped, run.data.test, run.accelerator, cfg.train.eval_batch_size, "test")
    return {"step": cfg.train.max_steps, **metrics}


def finish(run: Run) -> dict:
    """Load the model selected on dev, evaluate the test set once, save the model and results.json."""
    from accelerate.utils import gather_object
    from tqdm.auto import tqdm

    cfg, acc, st = run.cfg, run.accelerator, run.state
    acc.wait_for_everyone()  # the main process has written the last checkpoint
    best = checkpoint.best(run.ckpt_root)
    last = _test_last_step(run, best)  # before the selected weights replace the last step's
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
        "test_last_step": last or ({"step": selected["step"], **test_metrics}  # the selected step is the last
                                   if test_metrics and selected["step"] == cfg.train.max_steps else None),
        # the labelled budget: the examples trained on, and the dev labels that chose the step
        "labels": {"train": len(run.data.train), "dev_for_selection": len(run.data.dev) if best is not None else 0},
        "train_seconds": round(st.train_seconds_before, 1),
        "test_eval_seconds": test_seconds,
        "total_seconds": round(time.time() - run.t_start, 1),
        # CPU seconds, all threads, setup to here over every attempt; on one thread about the wall time
        # of the run alone on a core
        "cpu_seconds": round(run.cpu_seconds(), 1),
        "num_processes": acc.num_processes,
        "processes": processes,
        "environment": environment(acc.device),
        "mixed_precision": acc.mixed_precision,  # accelerate's, as the run ends (setup checks it against the config)
        "mixed_precision_choice": acc.precision_choice,  # {requested, used, reason}: what "auto" became, and why
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
