"""``--jobs K``: K runs of a sweep at once, each in a fresh spawned process with one CPU thread and its
console output in ``<out>/<run name>.log``. Ctrl-C or SIGTERM asks the running ones to save and stop."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any, Optional

import tasks  # noqa: F401 (registers the built-in tasks)
from uda.config import build_config
from uda.task import get_task
from uda_compare.summary import finished_line

STOPPED = "stopped: "  # how _run_in_child reports a run that a stop request ended


def log_path(folder: Path) -> Path:
    """Console output of a run started by run_parallel: <out>/<run name>.log."""
    return folder.parent / f"{folder.name}.log"


def _run_in_child(folder: str, source: tuple, progress: str = "") -> Optional[str]:
    """One run in a fresh process (``run_parallel``): one CPU thread, its console output appended to
    ``<folder>.log`` beside the run folder (the trainer refuses a folder holding files it did not
    write); an error message, or None. ``progress`` ("[3/16]") starts the line it prints on the
    sweep's stdout when the run starts."""
    import traceback

    os.environ.setdefault("TQDM_MININTERVAL", "30")  # a progress line every 30 s in the log, not every 0.1 s
    log = open(log_path(Path(folder)), "a", encoding="utf-8")
    print(f"{progress} start {Path(folder).name}; output in {log_path(Path(folder))}".lstrip(), flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)  # file descriptors, so tqdm and native libraries write there too
    os.dup2(log.fileno(), 2)
    import torch

    torch.set_num_threads(1)
    from uda.train import train

    try:
        cfg = build_config(*source)
        train(cfg, get_task(cfg.task))
    except KeyboardInterrupt as e:  # the parent's SIGTERM (see _run_pool); RunStopped says what was saved
        print(f"stopped: {e}", flush=True)
        return f"{STOPPED}{str(e) or 'stopped at once; its last checkpoint stands'}"
    except Exception as e:  # noqa: BLE001: reported by the parent with the run's name; the log has the trace
        traceback.print_exc()
        return f"{type(e).__name__}: {e}"
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return None


def _child_signals() -> None:
    """A pool process's signal handling: Ctrl-C at the terminal reaches every process of the group, but
    only the parent decides (it asks its running children to stop with SIGTERM, see _run_pool); SIGTERM
    outside the training loop (which saves and stops on it) ends the run as a KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def run_parallel(todo: list[tuple[int, Path, Any]], total: int, jobs: int, sources: dict, task: str) -> int:
    """Runs ``todo`` (index, folder, Config; the Config rebuilt in the child from ``sources[folder]``,
    see :func:`uda_compare.runs.build_plan`) ``jobs`` at a time, each in a fresh spawned process
    (nothing shared: its own CUDA context, its own random state); returns the number of failed runs.
    A failed run is reported and the others go on (its folder keeps what it wrote: rerun the sweep to
    continue it from its last checkpoint)."""
    # inherited by the children (one thread each, `jobs` cores in all), and put back afterwards so that
    # what this process starts later (the setfit baselines) gets the user's settings
    one_thread = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    saved = {k: os.environ.get(k) for k in one_thread}
    os.environ.update(one_thread)
    try:
        return _run_pool(todo, total, jobs, sources, task)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _report(fut: Any, i: int, total: int, folder: Path, task: str) -> bool:
    """Prints how one pool run ended (done, stopped, error); whether it failed."""
    from concurrent.futures import CancelledError

    try:
        err = fut.result()
    except CancelledError:
        return False  # queued when the stop came: it never started
    except Exception as e:  # noqa: BLE001: the child died (killed, out of memory)
        err = f"the run's process died: {type(e).__name__}: {e}"
    if err and err.startswith(STOPPED):
        print(f"[{i}/{total}] stopped {folder.name}: {err[len(STOPPED):]}", flush=True)
    elif err:
        print(f"[{i}/{total}] error in {folder.name}: {err} (see {log_path(folder)})", file=sys.stderr, flush=True)
        return True
    else:
        print(f"[{i}/{total}] done {folder.name}{finished_line(folder, task)}", flush=True)
    return False


def _run_pool(todo: list[tuple[int, Path, Any]], total: int, jobs: int, sources: dict, task: str) -> int:
    """run_parallel's pool: submits every run, reports each as it ends; the number of failed runs.
    Ctrl-C or SIGTERM: the queued runs are dropped, the running ones asked to stop (SIGTERM: each saves a
    checkpoint of the step it is in) and waited for, then RunStopped is raised."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from uda.train import RunStopped

    failed, stopping = 0, False
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                             max_tasks_per_child=1, initializer=_child_signals) as pool:
        futures = {}
        for i, folder, _ in todo:
            futures[pool.submit(_run_in_child, str(folder), sources[folder], f"[{i}/{total}]")] = (i, folder)
            print(f"[{i}/{total}] queued {folder.name}", flush=True)
        pending = set(futures)
        while pending:
            try:
                for fut in as_completed(pending):
                    pending.discard(fut)
                    i, folder = futures[fut]
                    failed += _report(fut, i, total, folder, task)
            except KeyboardInterrupt:
                if stopping:
                    raise  # a second Ctrl-C: leave at once
                stopping = True
                print("stopping: queued runs dropped, running runs asked to save and stop ...", flush=True)
                for fut in pending:
                    fut.cancel()  # only those not started yet
                for child in multiprocessing.active_children():
                    os.kill(child.pid, signal.SIGTERM)
    if stopping:
        raise RunStopped(f"the sweep was stopped; {failed} run(s) failed before", signal.SIGINT)
    return failed
