"""The commands ``uda-train`` and ``uda-augment``: the composition root of the project.

``uda/`` (the core) and ``augment/`` know no task; this module, at the top of the dependency graph,
parses options, builds the config of the task named by ``--task``, makes the task and hands it to
the training loop (or to the augmentation pipeline, for a task's unlabelled pool). Bad input ends
the command with an ``error:`` line and exit status 2.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import tasks  # noqa: F401 (registers the built-in tasks)
from uda.io import quiet_on_closed_pipe

TRAIN_USAGE = """Train a model with UDA consistency training.

    uda-train --task imdb [--config FILE] [--train.lr 3e-5 --uda.tsa exp ...]

Every option is listed below. Precedence: defaults < configs/<task>.yaml (shipped) < --config FILE (a
path, or a shipped recipe such as recipes/imdb_cpu.yaml) < command-line options.
"""


@quiet_on_closed_pipe
def train_main(argv: Optional[list[str]] = None) -> int:
    from uda.checkpoint import CheckpointError
    from uda.config import Config, ConfigError, build_config, config_class, help_text, parse_cli
    from uda.data import DataError
    from uda.hub import OfflineError
    from uda.task import get_task, registered_tasks, task_spec

    argv = sys.argv[1:] if argv is None else argv
    try:
        task, config_file, overrides, want_help = parse_cli(argv)
        if want_help:
            name = task or Config.task
            print(TRAIN_USAGE)
            print(f"Tasks: {', '.join(registered_tasks())}. Options of task '{name}' "
                  f"(--task NAME --help lists another task's):\n")
            print(help_text(config_class(task_spec(name).config_sections)))
            return 0
        cfg = build_config(task, config_file, overrides)
        _check_offline_resources(cfg)
    except (ConfigError, OfflineError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    from uda.train import NonFiniteLossError, RunStopped, train

    try:
        train(cfg, get_task(cfg.task))
    except (ConfigError, DataError, OfflineError, CheckpointError, NonFiniteLossError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RunStopped as e:
        print(f"stopped: {e}", file=sys.stderr)
        return 128 + e.signum  # what a shell reports for a process the signal ended
    except KeyboardInterrupt:  # a second Ctrl-C: stopped at once
        print("stopped at once by a second Ctrl-C: the steps since the last checkpoint are lost; run the same "
              "command again to continue from that checkpoint", file=sys.stderr)
        return 130
    except OSError as e:
        print(f"error: {_os_error(e)}", file=sys.stderr)
        return 2
    finally:
        _close_process_group()
    return 0


def _check_offline_resources(cfg: Any) -> None:
    """With the hub out of reach, name every resource the run would need it for in one message (the data
    and the model), before any work: one at a time, each failure would be found after the last was fixed."""
    from uda.data import resolve_data_path
    from uda.hub import OfflineError, hub_reachable, resolve_model_path

    missing = []
    model = getattr(getattr(cfg, "model", None), "name_or_path", None)
    if model:
        try:
            resolve_model_path(model)
        except OfflineError as e:
            missing.append(f"the model: {e}")
    data = getattr(cfg, "data", None)
    if data is not None and hasattr(data, "path") and resolve_data_path(data) is None \
            and getattr(data, "hub_id", None) and not hub_reachable():
        missing.append(f"the data: no local data was given (--data.path or UDA_DATA_PATH) and the hub dataset "
                       f"'{data.hub_id}' cannot be loaded offline; pass --data.path /path/to/data")
    if len(missing) > 1:
        raise OfflineError("the Hugging Face hub cannot be reached, and the run needs it for " + "; and for ".join(
            missing))


def _os_error(e: OSError) -> str:
    """A file-system failure of a run (a full disk, a read-only folder, a path through a file), said with
    what to do; the last checkpoint written whole is what the same command continues from."""
    import errno

    where = f"'{e.filename}'" if e.filename else "the run folder"
    advice = {errno.ENOSPC: "the disk is full: free some space and run the same command again (it continues from "
                            "the last checkpoint saved whole)",
              errno.EROFS: "the file system is read-only: choose a writable --output_dir",
              errno.EACCES: "no permission to write there: choose a writable --output_dir",
              errno.ENOTDIR: "a part of that path is a file, not a folder: choose another --output_dir",
              errno.EDQUOT: "the disk quota is used up: free some space and run the same command again"}
    return f"cannot write {where} ({e.strerror or e}): " + advice.get(e.errno, "check the path and the disk, and run "
                                                                              "the same command again")


def _close_process_group() -> None:
    """Several processes (accelerate launch, torchrun): leave the process group before the interpreter
    exits, as accelerate's ``end_training`` does. Left to the interpreter's teardown, a gloo group can
    abort one process ("terminate called without an active exception", SIGABRT) after a finished run."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():  # finish() ended with every process waiting for all
        dist.destroy_process_group()


def unlabeled_pool(task: str, config_file: Optional[str] = None,
                   overrides: Optional[dict] = None) -> tuple[Any, dict]:
    """The unlabelled pool exactly as ``uda-train`` builds it for ``task``/``config_file``/``overrides``
    (dotted keys such as ``{"data.path": ...}``): the texts a precomputed file must cover (the task's
    ``augment_pool``)."""
    from uda.config import build_config
    from uda.task import get_task

    cfg = build_config(task, config_file, overrides or {})
    return get_task(cfg.task).augment_pool(cfg)


@quiet_on_closed_pipe
def augment_main(argv: Optional[list[str]] = None) -> int:
    from pathlib import Path

    from augment.cli import build_parser, run
    from augment.pipeline import check_output_options
    from uda.config import Config, ConfigError
    from uda.data import DataError

    ap = build_parser()
    pool = ap.add_argument_group("a task's unlabelled pool (when no --input)")
    pool.add_argument("--task", default=Config.task, help=f"task whose unlabelled pool is augmented when no --input "
                                                          f"(default: {Config.task})")
    pool.add_argument("--config", default=None, help="config file for the pool (as uda-train --config)")
    pool.add_argument("--data_path", default=None, help="data folder or file for the pool (sets data.path; "
                                                        "default: the config's or $UDA_DATA_PATH)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    overrides = {}
    if args.input and len(args.input) == 1 and Path(args.input[0]).is_dir():
        overrides["data.path"], args.input = args.input[0], None
    elif args.data_path:
        overrides["data.path"] = args.data_path
    if args.input or args.join is not None:  # --join reads only the parts
        return run(args)
    try:
        check_output_options(args.output, args.output_dir)  # before the pool is read
        if args.data_path and not Path(args.data_path).expanduser().exists():
            raise DataError(f"--data_path '{args.data_path}' does not exist; give the task's data folder or file")
        rows, info = unlabeled_pool(args.task, args.config, overrides)
    except (ConfigError, DataError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return run(args, rows, input_name=f"{info['task']}-unlabeled",
               source=f"unlabelled pool of task {info['task']} (config {args.config}, overrides {overrides})")
