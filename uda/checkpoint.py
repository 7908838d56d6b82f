"""Checkpoints: atomic saves, ``latest``/``best`` pointers, top-k by the dev metric(s), exact-resume state.

Layout of ``<run folder>/checkpoints``::

    step-00000040/          one checkpoint: a complete folder, never a half-written one
        model/              the task's save(): save_pretrained (safetensors) + tokenizer, loadable by transformers
        training_state.pt   optimizer, scheduler, grad scaler, step, data-stream positions, RNG states
        meta.json           {"step": 40, "metric": 0.85}: the dev metric ranks checkpoints for top-k
    latest                  text file: the name of the newest checkpoint
    best                    text file: the name of the best checkpoint by the dev metric
    best_em, best_f1        instead of ``best``, for a task ranking by several metrics (``rankings``)
    .tmp-step-00000060/     a save in progress, or the remains of a killed one (removed by the next save)
    .broken-step-00000080/  a checkpoint that could not be loaded, set aside by the run that resumed instead
                            from the newest good one

A save writes everything into the temporary folder and then renames it into place (one ``os.replace``),
so a process killed during a save leaves every earlier checkpoint untouched and loadable. Pointers are
written the same way (temporary file, then rename). State is read back with
``torch.load(weights_only=True)``: tensors and plain Python containers only, never code.

Rankings: by default one, by the selection metric (``metric``), with the pointer ``best``. A task may
rank by several dev metrics (``rankings={"best_em": "em", "best_f1": "f1"}``, see :func:`rankings_for`):
meta.json then also holds ``"metrics": {"em": ..., "f1": ...}``, each ranking has its pointer, and
pruning keeps the union of the top-k of every ranking plus the latest. The model selected for the
test set is still the best by ``metric``.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import torch

from uda.io import atomic_write_text

MODEL_DIR = "model"
STATE_FILE = "training_state.pt"
META_FILE = "meta.json"
POINTERS = ("latest", "best")
_NAME = re.compile(r"^step-(\d+)$")
_BEST_POINTER = re.compile(r"^best(_.+)?$")


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read; the message names the folder or file."""


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    step: int
    metric: Optional[float]  # dev metric at this step; None when no evaluation happened here
    metrics: Mapping[str, Optional[float]] = field(default_factory=dict)  # the ranking metrics' values

    def value(self, name: Optional[str]) -> Optional[float]:
        """The value ranking ``name`` reads (None: the selection metric)."""
        return self.metric if name is None else self.metrics.get(name)


def rankings_for(select_metric: str, rank_metrics: Optional[Sequence[str]]) -> Optional[dict[str, str]]:
    """Pointer name -> dev metric of each ranking; None for the single default one (pointer ``best``,
    by the selection metric). A task's ``rank_metrics`` (e.g. ("em", "f1")) give pointers
    ``best_<metric>``; the selection metric is ranked too when it is not among them."""
    names = list(dict.fromkeys(rank_metrics or ()))
    if not names or names == [select_metric]:
        return None
    if select_metric not in names:
        names.append(select_metric)
    return {f"best_{n}": n for n in names}


def name_for(step: int) -> str:
    return f"step-{step:08d}"


# ----------------------------------------------------------------------------- listing

def list_checkpoints(root: Path) -> list[Checkpoint]:
    """Complete checkpoints under ``root``, oldest first (temporary folders are not checkpoints)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        m = _NAME.match(d.name)
        if not (m and d.is_dir() and (d / META_FILE).is_file()):
            continue
        try:
            meta = json.loads((d / META_FILE).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise CheckpointError(f"checkpoint '{d}' has an unreadable {META_FILE}: {e}") from None
        metric = meta.get("metric")
        metrics = {k: None if v is None else float(v) for k, v in (meta.get("metrics") or {}).items()}
        found.append(Checkpoint(d, int(m.group(1)), None if metric is None else float(metric), metrics))
    return sorted(found, key=lambda c: c.step)


def latest(root: Path) -> Optional[Checkpoint]:
    """The newest complete checkpoint. Found by listing, not from the pointer, so that a run killed
    between renaming a new checkpoint into place and updating the pointer still resumes from it."""
    ckpts = list_checkpoints(root)
    return ckpts[-1] if ckpts else None


def problem(ckpt: Path) -> Optional[str]:
    """Why checkpoint ``ckpt`` cannot be loaded (a missing or truncated weights or state file), or None.
    Cheap: the safetensors headers must cover their files and the state's zip directory must be whole;
    the tensors themselves are not read."""
    import zipfile

    from safetensors import SafetensorError, safe_open

    folder = Path(ckpt) / MODEL_DIR
    index = folder / "model.safetensors.index.json"
    try:
        files = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())) \
            if index.is_file() else ["model.safetensors"]
    except (OSError, ValueError, KeyError) as e:
        return f"unreadable {index.name} ({e})"
    for name in files:
        try:
            with safe_open(str(folder / name), "pt"):
                pass
        except (OSError, SafetensorError) as e:
            return f"{MODEL_DIR}/{name}: {e}"
    try:
        zipfile.ZipFile(Path(ckpt) / STATE_FILE).close()
    except (OSError, zipfile.BadZipFile) as e:
        return f"{STATE_FILE}: {e}"
    return None


def latest_loadable(root: Path) -> Optional[Checkpoint]:
    """The newest checkpoint that :func:`problem` finds nothing wrong with (a newer one may have been
    cut short: a full disk, a copy that stopped)."""
    return next((c for c in reversed(list_checkpoints(root)) if problem(c.path) is None), None)


def set_aside(ckpt: Checkpoint) -> Path:
    """Rename a checkpoint that cannot be loaded to ``.broken-<name>`` beside it (kept for a look, never
    listed, pruned or pointed at again); returns the new path."""
    target = ckpt.path.with_name(f".broken-{ckpt.path.name}")
    _remove(target)
    os.replace(ckpt.path, target)
    return target


def _ranked(ckpts: list[Checkpoint], name: Optional[str] = None) -> list[Checkpoint]:
    """Checkpoints with a value of ``name`` (None: the selection metric), best first; ties keep the
    earlier step."""
    return sorted((c for c in ckpts if c.value(name) is not None), key=lambda c: (-c.value(name), c.step))


def best(root: Path, name: Optional[str] = None) -> Optional[Checkpoint]:
    """The best checkpoint by ``name`` (None: by the selection metric)."""
    ranked = _ranked(list_checkpoints(root), name)
    return ranked[0] if ranked else None


# ----------------------------------------------------------------------------- saving

def save(root: Path, step: int, metric: Optional[float], keep_top_k: int,
         write_model: Callable[[Path], None], state: dict, metric_name: Optional[str] = None,
         rankings: Optional[Mapping[str, str]] = None,
         metrics: Optional[Mapping[str, Optional[float]]] = None) -> Checkpoint:
    """Write checkpoint ``step`` atomically, update the pointers and delete checkpoints that are
    neither the latest nor among the ``keep_top_k`` best by ``metric`` (with ``rankings``: by each
    ranking's metric, whose values at this step ``metrics`` gives). Call from one process only.

    ``write_model(folder)`` saves the model there (e.g. ``task.save``); ``state`` is saved with
    ``torch.save`` and must hold only tensors and plain Python values.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    name = name_for(step)
    tmp, final = root / f".tmp-{name}", root / name
    _remove(tmp)
    tmp.mkdir()
    meta: dict = {"step": step, "metric": metric, "metric_name": metric_name}
    if rankings:
        meta["metrics"] = {n: (None if (metrics or {}).get(n) is None else float(metrics[n]))
                           for n in rankings.values()}
    try:
        with _no_progress_bars():
            write_model(tmp / MODEL_DIR)
        torch.save(state, tmp / STATE_FILE)
        (tmp / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
        _fsync_tree(tmp)
    except (OSError, RuntimeError) as e:
        _remove(tmp)  # nothing half-written is left for the rerun to trip on; the checkpoints before stay
        err = _write_error(e, root, final)
        if err is e:
            raise
        raise err from e
    if final.exists():  # the same step saved again: move the old one aside, then swap
        old = root / f".old-{name}"
        _remove(old)
        os.replace(final, old)
        os.replace(tmp, final)
        _remove(old)
    else:
        os.replace(tmp, final)
    _fsync_dir(root)
    write_pointers(root, rankings)
    prune(root, keep_top_k, rankings)
    return Checkpoint(final, step, metric, dict(meta.get("metrics", {})))


def _write_error(e: Exception, root: Path, final: Path) -> Exception:
    """An OSError for a checkpoint that could not be written; torch.save reports a full disk as a
    RuntimeError of its C++ stream ("basic_ios::clear"). Any other RuntimeError is returned as it is."""
    if isinstance(e, OSError):
        return e
    if not any(w in str(e) for w in ("basic_ios", "PytorchStreamWriter", "write", "file")):
        return e
    full = shutil.disk_usage(root).free < 64 * 2**20
    return OSError(errno.ENOSPC if full else errno.EIO, "No space left on device" if full else f"write failed ({e})",
                   str(final))


def rescore(root: Path, metric_name: str, values: dict[int, Optional[float]],
            rankings: Optional[Mapping[str, str]] = None,
            history: Optional[Mapping[int, Mapping[str, float]]] = None) -> list[Checkpoint]:
    """Re-rank the checkpoints under ``root`` by another dev metric: each checkpoint whose recorded metric
    name is not ``metric_name`` gets ``values[step]`` (None where that step was not evaluated), and the
    pointers follow. With ``rankings``, a ranking metric a checkpoint has no value of gets it from
    ``history`` (step -> dev metrics). Returns the checkpoints changed. For a resumed run whose
    ``--eval.select_metric`` changed; ``values`` and ``history`` come from its dev history. Call from
    one process only."""
    changed = []
    for c in list_checkpoints(root):
        meta_path = c.path / META_FILE
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        missing = [n for n in (rankings or {}).values() if n not in (meta.get("metrics") or {})]
        if meta.get("metric_name") == metric_name and not missing:
            continue
        if meta.get("metric_name") != metric_name:
            value = values.get(c.step)
            meta.update({"metric": None if value is None else float(value), "metric_name": metric_name})
        for n in missing:
            v = (history or {}).get(c.step, {}).get(n)
            meta.setdefault("metrics", {})[n] = None if v is None else float(v)
        atomic_write_text(meta_path, json.dumps(meta))
        changed.append(Checkpoint(c.path, c.step, meta["metric"], dict(meta.get("metrics", {}))))
    if changed:
        write_pointers(root, rankings)
    return changed


def write_pointers(root: Path, rankings: Optional[Mapping[str, str]] = None) -> None:
    """Point ``latest`` and the best pointer of each ranking (``best`` by default) at the current
    checkpoints (each file replaced atomically); best pointers of other rankings are removed."""
    root = Path(root)
    ckpts = list_checkpoints(root)
    targets: dict[str, Optional[Checkpoint]] = {"latest": ckpts[-1] if ckpts else None}
    for pointer, name in (rankings or {"best": None}).items():
        ranked = _ranked(ckpts, name)
        targets[pointer] = ranked[0] if ranked else None
    if root.is_dir():
        for f in root.iterdir():
            if f.is_file() and _BEST_POINTER.match(f.name) and f.name not in targets:
                f.unlink()
    for pointer, target in targets.items():
        path = Path(root) / pointer
        if target is None:
            path.unlink(missing_ok=True)
            continue
        atomic_write_text(path, target.path.name + "\n")


def read_pointer(root: Path, pointer: str) -> Optional[Path]:
    """The checkpoint folder a pointer file names (None when it is missing or names nothing)."""
    path = Path(root) / pointer
    if not path.is_file():
        return None
    target = Path(root) / path.read_text(encoding="utf-8").strip()
    return target if target.is_dir() else None


def prune(root: Path, keep_top_k: int, rankings: Optional[Mapping[str, str]] = None) -> None:
    """Keep the latest checkpoint and the ``keep_top_k`` best (of each ranking: their union); delete
    the rest and any leftovers of interrupted saves."""
    root = Path(root)
    ckpts = list_checkpoints(root)
    keep = {c.path.name for name in (rankings or {"best": None}).values() for c in _ranked(ckpts, name)[:keep_top_k]}
    if ckpts:
        keep.add(ckpts[-1].path.name)
    for c in ckpts:
        if c.path.name not in keep:
            _remove(c.path)
    for d in root.iterdir():
        if d.is_dir() and d.name.startswith((".tmp-", ".old-")):
            _remove(d)


@contextmanager
def _no_progress_bars():
    """transformers draws a progress bar for every save_pretrained; inside the training bar it is noise."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def _fsync_tree(folder: Path) -> None:
    """Flush every file of ``folder`` to disk before the rename makes the checkpoint visible."""
    for dirpath, _, files in os.walk(folder):
        for f in files:
            fd = os.open(os.path.join(dirpath, f), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(dirpath))


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms cannot open folders; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- loading

def load_state(ckpt: Path) -> dict:
    """The training state of a checkpoint, read with ``torch.load(weights_only=True)``."""
    path = Path(ckpt) / STATE_FILE
    if not path.is_file():
        raise CheckpointError(f"checkpoint '{ckpt}' has no {STATE_FILE}; it cannot be resumed")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated file, foreign pickle, ...
        raise CheckpointError(f"cannot load '{path}' ({type(e).__name__}: {e}); resume from another "
                              f"checkpoint or start a new run") from None


def load_model_weights(model: torch.nn.Module, folder: Path) -> None:
    """Load the safetensors weights written by ``save_pretrained`` into ``model`` in place (so an
    optimizer built on its parameters stays valid). Every parameter must be found."""
    from safetensors.torch import load_file

    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        if not (folder / f).is_file():
            raise CheckpointError(f"model weights '{folder / f}' are missing")
        weights.update(load_file(str(folder / f)))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # save_pretrained stores tied (shared) weights once; the copies are restored through the storage
    own = model.state_dict()
    loaded = {own[k].data_ptr() for k in weights if k in own}
    missing = [k for k in missing if own[k].data_ptr() not in loaded]
    if missing or unexpected:
        raise CheckpointError(f"weights in '{folder}' do not fit the model: missing {missing[:5]}, "
                              f"unexpected {list(unexpected)[:5]}; was the checkpoint written for another model?")


# ----------------------------------------------------------------------------- RNG state

def rng_state() -> dict:
    """Python, NumPy and torch (CPU and CUDA) generator states as tensors and plain Python values, so
    that ``torch.load(weights_only=True)`` reads them back."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
