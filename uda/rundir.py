"""The run folder: what a run writes into it, the lock that keeps a second run out, whether a run
starts fresh or continues from its latest checkpoint, and the fingerprint that tells a resumed run
whether its data changed.

The folder holds config.yaml, data_info.json, data_fingerprint.json, labeled_ids.txt, dev_ids.txt,
metrics.jsonl, tensorboard/, checkpoints/ (see ``uda/checkpoint.py``), run.lock while a run uses it
and, for a task that builds files from its data in setup, data/; once the run has finished, model/
and results.json.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import shutil
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import yaml

from uda import checkpoint
from uda.config import Config, ConfigError, save_config
from uda.data import DataError
from uda.io import atomic_write_json, atomic_write_text, file_fingerprint, pid_alive, pid_lock

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



def run_dir_for(cfg: Config) -> Path:
    """--output_dir, checked not to be a file. Without it: the newest runs/<task>-<time> folder whose run
    stopped before it finished with the same options (:func:`unfinished_run_like`), so that the same
    command continues it; else a new runs/<task>-<time> folder."""
    default = None if cfg.output_dir else unfinished_run_like(cfg)
    run_dir = Path(cfg.output_dir or default or f"runs/{cfg.task}-{time.strftime('%Y%m%d-%H%M%S')}")
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"--output_dir '{run_dir}' is a file, not a folder; choose a new --output_dir "
                          f"(the file is left as it is)")
    return run_dir


def unfinished_run_like(cfg: Config, root: Path = Path("runs")) -> Optional[Path]:
    """The newest ``root/<task>-<time>`` folder holding a run of these options that stopped before it finished
    (a loadable checkpoint, no results.json, the same config.yaml but for RESUME_MAY_DIFFER, no live process
    holding its lock); None when there is none, or with --overwrite or checkpoint.auto_resume off."""
    if cfg.overwrite or not cfg.checkpoint.auto_resume or not root.is_dir():
        return None
    for folder in sorted(root.glob(f"{cfg.task}-*"), reverse=True):  # the names sort by their time
        if (folder / "results.json").exists() or not (folder / "config.yaml").is_file():
            continue
        lock = folder / LOCK_FILE
        pid = lock.read_text(encoding="utf-8").split()[0] if lock.is_file() else ""
        if (pid.isdigit() and pid_alive(int(pid))) or checkpoint.latest_loadable(folder / "checkpoints") is None:
            continue
        if not config_changes(folder / "config.yaml", cfg):
            return folder
    return None


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run folder for this process: ``run.lock`` in it holds the PID and host, from before the
    folder is looked at until the run ends, so a second run into the same folder is refused (it would
    continue from the same checkpoint and write over the first). A lock left by a process that is no
    longer running (killed with SIGKILL, a crashed machine) is taken over with a warning."""
    made = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        with pid_lock(run_dir / LOCK_FILE, f"output folder '{run_dir}'", "choose another --output_dir"):
            yield
    finally:
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



def set_aside_broken(root: Path, resume_from: Path, rankings: Optional[dict]) -> None:
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


def open_run_dir(cfg: Config, rankings: Optional[dict], main: bool, held: Optional[ExitStack],
                 barrier: Callable[[], None]) -> tuple[Path, Optional[Path]]:
    """Make the run folder ready: (the folder, the checkpoint to resume from or None). The main process
    locks it until ``held`` closes (no lock without it), clears what an attempt that never trained left
    (or everything, with --overwrite), sets aside checkpoints that cannot be loaded, and writes
    config.yaml. ``barrier`` waits for every process: all of them look at the folder before the main
    one changes it."""
    from tqdm.auto import tqdm

    run_dir = run_dir_for(cfg)
    if main and held is not None:
        held.enter_context(run_lock(run_dir))  # before the folder is looked at
    run_dir, resume_from = prepare_run_dir(cfg, run_dir)
    barrier()
    if not main:
        return run_dir, resume_from
    if resume_from is None:  # --overwrite, or what an attempt that never trained left behind
        clear_run_files(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if resume_from is not None:
        set_aside_broken(run_dir / "checkpoints", resume_from, rankings)
        changes = config_changes(run_dir / "config.yaml", cfg)
        tqdm.write(f"resuming from {resume_from}" + (f" with changed options: {'; '.join(changes)}" if changes else "")
                   + ("" if cfg.output_dir else " (the unfinished run of the same options; --output_dir starts a "
                      "new one elsewhere)"))
    tqdm.write(f"run folder: {run_dir} (watch it with: tensorboard --logdir {run_dir / 'tensorboard'})")
    if resume_from is None or cfg.checkpoint.resume:  # an explicit resume may change options: record them
        save_config(cfg, run_dir / "config.yaml")
    return run_dir, resume_from


def record_data(cfg: Config, run_dir: Path, data: Any, resumed: bool, main: bool) -> None:
    """data_info.json, the id lists and the data fingerprint; a resumed run first checks that its data
    did not change (:func:`check_data_unchanged`, on every process). Only the main process writes."""
    fingerprint = check_data_unchanged(cfg, run_dir, data) if resumed else data_fingerprint(cfg, data)
    if main:
        atomic_write_json(run_dir / "data_info.json", data.info)
        write_ids(run_dir, data)
        if fingerprint is not None:
            atomic_write_json(run_dir / FINGERPRINT_FILE, fingerprint)
