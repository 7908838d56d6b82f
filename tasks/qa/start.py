"""``uda-qa-start``: build a QA-shaped start from unlabelled text, a SQuAD 2.0 reader trained on synthetic
questions (``--task qa_start``, :mod:`tasks.qa.start_task`), saved in ``OUTPUT_DIR/model`` for
``--task squad_v2`` and ``--task passages`` ``--model.name_or_path``.

    uda-qa-start --squad dev-v2.0.json --output_dir runs/qa_start [--max_steps 1500 --texts more.txt ...]

The command is ``uda-train --task qa_start`` with short flags: each flag of :data:`ALIASES` is another
name of an option (``--squad`` is ``--qa_start.squad``, ``--lr`` is ``--train.lr``; ``--texts`` may be
repeated), and dotted options and ``--config FILE`` are taken as they are. Defaults are those of
``configs/qa_start.yaml``. Three flags are the command's own: ``--warmup SHARE`` (default 0.06) sets
train.warmup_steps to that share of train.max_steps (unless --train.warmup_steps is given);
``--bf16 auto|on|off`` (default auto) sets train.mixed_precision to auto (bf16 where the device runs it
natively, else float32), bf16 or no; ``--threads N`` sets torch's CPU threads. The training loop gives the rest: a
checkpoint every 10 minutes (--checkpoint_minutes), at every held-out evaluation and on Ctrl-C or
SIGTERM; the same command continues an unfinished run; metrics.jsonl, TensorBoard, results.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from uda.io import quiet_on_closed_pipe

ALIASES = {
    "model": "model.name_or_path", "max_length": "model.max_length", "batch_size": "train.batch_size",
    "lr": "train.lr", "head_lr": "train.head_lr", "weight_decay": "train.weight_decay", "max_steps": "train.max_steps",
    "eval_every": "train.eval_every", "log_every": "train.log_every", "checkpoint_minutes": "checkpoint.every_minutes",
    **{name: f"qa_start.{name}" for name in (
        "squad", "squad_paragraphs", "test_articles", "dev_articles", "texts", "text_column", "max_texts",
        "chunk_words", "per_paragraph", "recurring", "cloze", "unanswerable", "doc_stride", "max_question_length",
        "held_out")},
}
OWN_FLAGS = {"warmup": "0.06", "bf16": "auto", "threads": "0"}  # the command's own flags and their defaults

USAGE = f"""usage: uda-qa-start --output_dir DIR [--squad FILE] [--texts PATH ...] [options]

Build a QA-shaped start from unlabelled text: a SQuAD 2.0 reader (span and answerability heads)
trained on synthetic questions (recurring spans, cloze questions, unanswerable ones), saved as a Hugging
Face checkpoint in OUTPUT_DIR/model for --task squad_v2 / passages --model.name_or_path. It is
uda-train --task qa_start (defaults: configs/qa_start.yaml); the same command continues an unfinished run.

Short flags (each another name of the option beside it; --texts may be repeated):
{chr(10).join(f"  --{flag:<20} --{key}" for flag, key in ALIASES.items())}
The command's own flags:
  --warmup SHARE         train.warmup_steps = SHARE x train.max_steps, unless --train.warmup_steps is given
                         (default 0.06)
  --bf16 auto|on|off     train.mixed_precision auto, bf16 or no: auto uses bf16 where the device runs it
                         natively, else float32 (default auto)
  --threads N            torch CPU threads (0: torch's default)
"""


def split_argv(argv: Sequence[str]) -> tuple[list[str], dict, list[str]]:
    """(the arguments for ``uda.config.parse_cli`` with each short flag replaced by its option, the
    command's own flags with their defaults, the ``--texts`` values in order)."""
    from uda.config import ConfigError

    rest, own, texts = [], dict(OWN_FLAGS), []
    i = 0
    while i < len(argv):
        name, eq, value = argv[i][2:].partition("=") if argv[i].startswith("--") else ("", "", "")
        if name in ALIASES or name in OWN_FLAGS:
            if not eq:
                if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                    raise ConfigError(f"option '--{name}' needs a value")
                i, value = i + 1, argv[i + 1]
            if name == "texts":
                texts.append(value)
            elif name in OWN_FLAGS:
                own[name] = value
            else:
                rest += [f"--{ALIASES[name]}", value]
        else:
            rest.append(argv[i])
        i += 1
    return rest, own, texts


def own_flags(own: dict) -> tuple[str, float, int]:
    """(train.mixed_precision, the warm-up share, torch threads) of the command's own flags. ``--bf16``:
    on -> bf16, off -> no, auto -> auto (the run picks bf16 where the device runs it natively, else
    float32: ``uda.devices.resolve_precision``)."""
    from uda.config import ConfigError

    precision = {"auto": "auto", "on": "bf16", "off": "no"}.get(own["bf16"])
    if precision is None:
        raise ConfigError(f"--bf16 must be auto, on or off, got {own['bf16']!r}")
    try:
        share, threads = float(own["warmup"]), int(own["threads"])
    except ValueError:
        raise ConfigError(f"--warmup must be a number and --threads an integer, got {own['warmup']!r} and "
                          f"{own['threads']!r}") from None
    if not 0 <= share < 1:
        raise ConfigError(f"--warmup must be in [0, 1), got {share}")
    return precision, share, threads


def train_argv(argv: Sequence[str]) -> tuple[list[str], int]:
    """(the ``uda-train`` arguments of an ``uda-qa-start`` command line, the torch threads it asks for).
    The arguments: ``--task qa_start``, ``--config`` when given, and every option as ``--section.key
    value``, with train.mixed_precision and train.warmup_steps from ``--bf16`` and ``--warmup`` unless
    given as options."""
    from uda.config import ConfigError, build_config, parse_cli

    rest, own, texts = split_argv(argv)
    task, config_file, overrides, _ = parse_cli(rest)
    if task not in (None, "qa_start"):
        raise ConfigError(f"uda-qa-start builds the task qa_start, not '{task}': use uda-train --task {task}")
    precision, share, threads = own_flags(own)
    if texts:
        overrides["qa_start.texts"] = json.dumps(texts)
    overrides.setdefault("train.mixed_precision", precision)
    if "train.warmup_steps" not in overrides:
        steps = build_config("qa_start", config_file, {**overrides, "train.warmup_steps": 0}).train.max_steps
        overrides["train.warmup_steps"] = str(int(share * steps))
    args = ["--task", "qa_start", *(["--config", config_file] if config_file else []),
            *[a for key, value in overrides.items() for a in (f"--{key}", str(value))]]
    return args, threads


def start_config(args: Sequence[str]) -> Any:
    """The qa_start Config of ``uda-train`` arguments (:func:`train_argv`), checked as the run will check it."""
    from tasks.qa.start_task import check_start_options
    from uda.config import ConfigError, build_config, parse_cli

    _, config_file, overrides, _ = parse_cli(list(args))
    cfg = build_config("qa_start", config_file, overrides)
    if cfg.output_dir is None:
        raise ConfigError("--output_dir is required: the run folder (the start is saved in OUTPUT_DIR/model; the same "
                          "command continues an unfinished run there)")
    check_start_options(cfg)
    return cfg


@quiet_on_closed_pipe
def main(argv: Optional[Sequence[str]] = None) -> int:
    import tasks  # noqa: F401 (registers the tasks)
    from tasks.cli import train_main
    from uda.config import ConfigError, config_class, help_text
    from uda.task import task_spec

    argv = sys.argv[1:] if argv is None else list(argv)
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        print(help_text(config_class(task_spec("qa_start").config_sections)))
        return 0
    try:
        args, threads = train_argv(argv)
        cfg = start_config(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if threads > 0:  # a setting of this process, not of the run
        import torch

        torch.set_num_threads(threads)
    rc = train_main(args)
    if rc == 0:
        results = json.loads((Path(cfg.output_dir) / "results.json").read_text(encoding="utf-8"))
        best = results.get("dev_best") or {}
        print(f"QA start saved in {Path(cfg.output_dir) / 'model'} (step {results['selected_model']['step']}, "
              f"held-out span accuracy {best.get('span_accuracy', float('nan')):.1f}%); train from it with "
              f"--model.name_or_path {Path(cfg.output_dir) / 'model'}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
