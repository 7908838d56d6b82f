"""The runs of a sweep: the plan (a run folder and a Config per method, N and seed; the SetFit baselines
after them), and running what is still to do, one after another or ``--jobs`` at a time. A folder that
holds results.json is finished and skipped."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any, Optional

import tasks  # noqa: F401 (registers the built-in tasks)
import uda_compare
from uda.config import ConfigError, build_config, parse_cli
from uda.task import get_task
from uda_compare.methods import ID_SOURCES, SETFIT_QUICK, SWEEP_KEYS, TASKS, method_overrides, run_name
from uda_compare.parallel import run_parallel
from uda_compare.summary import finished_line

RESUME_NOTE = ("sweep stopped. Run the same command again: finished runs are skipped, stopped ones continue "
               "from their last checkpoint")


class SweepEnded(Exception):
    """The sweep ends before its summary with exit status ``status``; what went wrong is printed already."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


# ----------------------------------------------------------------------------- plan

def _check_passthrough(args: argparse.Namespace, task: Optional[str], overrides: dict, want_help: bool) -> None:
    """The options after '--' against the sweep's own: ConfigError for --help or another --task, a note
    for the options the sweep sets in every run."""
    if want_help:
        raise ConfigError(f"--help after '--' is uda-train's: run uda-train --task {args.task} --help to list its options")
    if task is not None and task != args.task:
        raise ConfigError(f"--task {task} after '--' contradicts the sweep's --task {args.task}; give it once")
    clash = [k for k in SWEEP_KEYS if k in overrides]
    if clash:
        print(f"note: {', '.join('--' + k for k in clash)} after '--' is replaced in every run by the sweep's own "
              f"(--out, --seeds, --num_labeled)", file=sys.stderr)


def _check_bt_file(args: argparse.Namespace) -> None:
    """uda_bt (or a variant of it) needs an existing --bt_file: ConfigError otherwise."""
    if "uda_bt" in args.methods or any(base == "uda_bt" for base, _ in args.variants.values()):
        if not args.bt_file:
            raise ConfigError("method uda_bt needs --bt_file PATH (precomputed back-translated copies of the "
                              "unlabelled texts, made by uda-augment); give it or drop uda_bt from --methods")
        if not Path(args.bt_file).expanduser().is_file():
            raise ConfigError(f"--bt_file '{args.bt_file}' does not exist; give the file of back-translated copies "
                              f"made by uda-augment")


def build_plan(args: argparse.Namespace, passthrough: list[str],
               sources: Optional[dict] = None) -> list[tuple[Path, Any]]:
    """(run folder, Config) for every run of the sweep, in run order (the ceiling last). Raises
    ConfigError for a bad option, before anything runs. ``sources``, if given, receives for each folder
    what its Config is built from, (task, config file, overrides): a Config cannot be pickled (its
    section classes are made at run time), so a run in another process rebuilds it from these."""
    task, config_file, overrides, want_help = parse_cli(passthrough)
    _check_passthrough(args, task, overrides, want_help)
    _check_bt_file(args)
    quick = TASKS[args.task].quick if args.quick else {}
    out = Path(args.out)
    runs: list[tuple[str, Optional[int], int]] = []
    for n in args.num_labeled:
        for seed in args.seeds:
            runs.extend((m, n, seed) for m in args.methods if m not in ("ceiling", "setfit"))
    if "ceiling" in args.methods:
        runs.extend(("ceiling", None, seed) for seed in args.seeds)
    plan = []
    for method, n, seed in runs:
        folder = out / run_name(method, n, seed)
        run_over = {**overrides, **quick}
        run_over["data.num_labeled"] = "0" if n is None else str(n)  # 0: every labelled example of the pool
        if args.reference_split_seed is not None and seed != args.reference_split_seed:
            run_over["data.id_order_file"] = "none"  # a random labelled set drawn from this seed
        run_over.update(method_overrides(method, args.bt_file, TASKS[args.task].plain, args.variants))
        run_over.update({"seed": str(seed), "output_dir": str(folder), "report_to": "none"})
        plan.append((folder, build_config(args.task, config_file, run_over)))
        if sources is not None:
            sources[folder] = (args.task, config_file, run_over)
    return plan


def id_source(out: Path, n: int, seed: int) -> Optional[Path]:
    """The run folder (same N and seed) whose labeled_ids.txt / dev_ids.txt / config.yaml setfit reads:
    the first of ID_SOURCES, then any other ``uda*`` run, that holds all three files."""
    names = [run_name(m, n, seed) for m in ID_SOURCES]
    names += sorted(p.name for p in out.glob(f"uda*-n{'all' if n is None else n}-seed{seed}") if p.name not in names)
    for name in names:
        folder = out / name
        if all((folder / f).is_file() for f in ("labeled_ids.txt", "dev_ids.txt", "config.yaml")):
            return folder
    return None


def setfit_plan(args: argparse.Namespace) -> list[tuple[Path, int, int]]:
    """(run folder, N, seed) of every setfit run. Raises ConfigError when a run would have no labelled
    ids to read: neither a method of this sweep nor a run already on disk gives that N and seed."""
    if "setfit" not in args.methods:
        return []
    out = Path(args.out)
    sources = [m for m in args.methods if m in ID_SOURCES]
    plan = []
    for n in args.num_labeled:
        for seed in args.seeds:
            folder = out / run_name("setfit", n, seed)
            if not sources and not (folder / "results.json").exists() and id_source(out, n, seed) is None:
                raise ConfigError(
                    f"method setfit trains on the labelled ids of the supervised/UDA run with the same N and seed, "
                    f"and there is none for N={n}, seed {seed} under {out}; add one of {', '.join(ID_SOURCES)} to "
                    f"--methods (it runs first)")
            plan.append((folder, n, seed))
    return plan


def setfit_missing_error(baselines: list) -> Optional[str]:
    """When a setfit run is still to do and the setfit package (or sentence-transformers) is missing:
    the message that says how to install it; else None. Checked before any run starts."""
    if not any(not (folder / "results.json").exists() for folder, _, _ in baselines):
        return None
    from uda_compare.setfit_baseline import INSTALL_HINT, setfit_missing

    missing = setfit_missing()
    if missing is None:
        return None
    return (f"method setfit needs the {missing} package, which is not installed: {INSTALL_HINT}; "
            f"or drop setfit from --methods")


# ----------------------------------------------------------------------------- run

def run_sweep(args: argparse.Namespace, passthrough: list[str]) -> int:
    """Runs what is still to do of the sweep: the trainer runs, then the SetFit baselines; the number of
    failed runs (with ``--jobs`` above 1 a failed run does not stop the others, and no baseline runs
    then). Raises SweepEnded for a bad option (status 2, before anything runs), a run that failed in
    this process (2) or a stop request (128 + the signal)."""
    from uda.train import RunStopped

    sources: dict = {}
    try:
        plan = build_plan(args, passthrough, sources)
        baselines = setfit_plan(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SweepEnded(2) from None
    err = setfit_missing_error(baselines)
    if err:
        print(f"error: {err}", file=sys.stderr)
        raise SweepEnded(2)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    total = len(plan) + len(baselines)
    todo = [(i, folder, cfg) for i, (folder, cfg) in enumerate(plan, start=1)
            if not _finished(folder, i, total)]
    if args.jobs == 1:
        run_in_order(todo, total, args.task)
        run_baselines(baselines, len(plan) + 1, total, args)
        return 0
    try:
        failed = run_parallel(todo, total, args.jobs, sources, args.task)
    except RunStopped:
        print(RESUME_NOTE, file=sys.stderr)
        raise SweepEnded(128 + signal.SIGINT) from None
    if failed:  # the others finished: summarise them, but run no baseline on a missing run's ids
        print(f"{failed} run(s) failed (above); the summary holds the finished runs only. Rerun the same "
              f"command to run what is missing", file=sys.stderr)
    else:
        run_baselines(baselines, len(plan) + 1, total, args)
    return failed


def _finished(folder: Path, i: int, total: int) -> bool:
    """Whether the run in ``folder`` is finished (it holds results.json); says so when it is."""
    if (folder / "results.json").exists():
        print(f"[{i}/{total}] skip {folder.name}: already finished", flush=True)
        return True
    return False


def run_in_order(todo: list[tuple[int, Path, Any]], total: int, task: str) -> None:
    """Trains ``todo`` (index, folder, Config) one after another in this process. Raises SweepEnded
    at the first run that fails (2) or is stopped by Ctrl-C or SIGTERM (128 + the signal: the run saved
    the step it was in)."""
    from uda.checkpoint import CheckpointError
    from uda.data import DataError
    from uda.hub import OfflineError
    from uda.train import NonFiniteLossError, train

    for i, folder, cfg in todo:
        print(f"[{i}/{total}] start {folder.name}", flush=True)
        t0 = time.time()
        try:
            train(cfg, get_task(cfg.task))
        except (ConfigError, DataError, OfflineError, CheckpointError, NonFiniteLossError) as e:
            print(f"[{i}/{total}] error in {folder.name}: {e}", file=sys.stderr)
            raise SweepEnded(2) from None
        except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM; RunStopped says what was saved
            said = str(e) or "stopped at once; its last checkpoint stands"
            print(f"[{i}/{total}] stopped {folder.name}: {said}", file=sys.stderr)
            print(RESUME_NOTE, file=sys.stderr)
            raise SweepEnded(128 + getattr(e, "signum", signal.SIGINT)) from None
        print(f"[{i}/{total}] done {folder.name}{finished_line(folder, task, time.time() - t0)}", flush=True)


def run_baselines(baselines: list[tuple[Path, int, int]], first: int, total: int, args: argparse.Namespace) -> None:
    """Runs the SetFit baselines still to do (numbered from ``first``); SweepEnded(2) at one that fails."""
    for i, (folder, n, seed) in enumerate(baselines, start=first):
        if _finished(folder, i, total):
            continue
        print(f"[{i}/{total}] start {folder.name}", flush=True)
        t0 = time.time()
        err = run_setfit(folder, n, seed, args)
        if err:
            print(f"[{i}/{total}] error in {folder.name}: {err}", file=sys.stderr)
            raise SweepEnded(2)
        print(f"[{i}/{total}] done {folder.name}{finished_line(folder, args.task, time.time() - t0)}", flush=True)


def run_setfit(folder: Path, n: int, seed: int, args: argparse.Namespace) -> Optional[str]:
    """Run the SetFit baseline (``python -m uda_compare.setfit_baseline``, the module of this installed
    package or checkout) in its own process; an error message, or None."""
    import os
    import subprocess

    source = id_source(Path(args.out), n, seed)
    if source is None:
        return (f"no run with N={n}, seed {seed} under {args.out} wrote labeled_ids.txt, dev_ids.txt and "
                f"config.yaml, so setfit has no labelled set to train on")
    cmd = [sys.executable, "-m", "uda_compare.setfit_baseline", "--run_dir", str(source),
           "--out", str(folder), "--quiet", *(SETFIT_QUICK if args.quick else [])]
    # the child imports this very package: the folder that holds it goes first on its path (a checkout
    # that is not installed, or a command started from another folder)
    root = str(Path(uda_compare.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    print(f"  setfit on the ids of {source.name}", flush=True)
    rc = subprocess.run(cmd, env=env).returncode
    return None if rc == 0 else f"the SetFit baseline exited with status {rc} (command: {' '.join(cmd)})"

