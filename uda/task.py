"""The Task protocol, its data types, and the task registry.

Everything the training loop needs to know about a task, and nothing more: the loop in
``uda/train.py`` knows nothing about IMDB or SQuAD, and is given its task by its caller. A task says how to load its data,
build its model, collate batches, compute the per-example supervised loss and the probability of
the gold answer (for TSA), produce the logits that the consistency loss compares, and evaluate.
A task subclasses :class:`Task` (docs/adding_a_task.md has a worked example).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

from uda.errors import ConfigError


@dataclass
class RunContext:
    """What the training loop tells a task's ``setup`` about the run."""

    run_dir: Path  # the run folder; a task writes files of its own only under run_dir / "data"
    wants_unlabeled: bool  # the consistency loss is on (uda.lambda_u > 0): build the unlabelled pool
    # and its augmenter only when True


@dataclass
class TaskData:
    """What ``Task.setup`` returns. Example types are the task's own (dicts for the built-ins)."""

    train: Sequence[Any]  # labelled training examples
    dev: Sequence[Any]  # model selection split (never the test set)
    test: Sequence[Any]  # evaluated once, at the end, on the selected model
    unlabeled: Sequence[Any]  # examples whose two views the consistency loss compares
    info: dict = field(default_factory=dict)  # counts and sources, logged to the run folder
    tsa_num_classes: int = 2  # K of the TSA threshold alpha * (1 - 1/K) + 1/K of a single-term supervised loss
    class_logits_index: Optional[int] = None  # index in consistency_logits() of a distribution over the
    # task's classes (distribution alignment, the class-spread diagnostics); None: no such distribution
    class_prior: Optional[torch.Tensor] = None  # (K,) labelled class prior, distribution alignment's start


@dataclass
class SupervisedTerm:
    """One head's part of the supervised loss, masked by TSA on that head's own gold probability."""

    name: str
    per_example_loss: torch.Tensor  # (B,)
    gold_prob: torch.Tensor  # (B,) probability this head gives the gold label
    num_classes: int  # K of this head's TSA threshold alpha * (1 - 1/K) + 1/K
    weight: float = 1.0  # the term's weight in the supervised loss


@dataclass
class SupervisedOutput:
    per_example_loss: torch.Tensor  # (B,) loss of each labelled example
    gold_prob: torch.Tensor  # (B,) probability the model gives the gold answer (what TSA thresholds)
    correct: torch.Tensor  # (B,) 1.0 where the prediction is right (for sup/accuracy)
    # A task with several heads gives one term each: TSA then masks each head on its own gold
    # probability and the supervised loss is sum(weight * masked mean). None: one term, the fields
    # above, with K = the TaskData's tsa_num_classes.
    terms: Optional[list[SupervisedTerm]] = None
    # (B, K) the labelled batch's probabilities over the task's classes (the distribution at the TaskData's
    # class_logits_index), without gradient; what adamatch's relative threshold reads. None: not given.
    class_probs: Optional[torch.Tensor] = None


class Task:
    """Base class of a task: the required methods raise NotImplementedError, the optional capabilities
    have defaults that switch them off, so the loop calls every one of them without probing."""

    name: str = ""
    main_metric: str = ""  # dev metric used for model selection; higher is better
    selectable_metrics: tuple[str, ...] = ()  # dev metrics --eval.select_metric may name (checked before
    # training; empty: checked at the first evaluation)
    # Optional, with a default that switches it off:
    rank_metrics: Optional[tuple[str, ...]] = None  # dev metrics with checkpoint rankings of their own

    def setup(self, cfg: Any, run: RunContext) -> TaskData:
        """Load and validate data, build the tokenizer and (when ``run.wants_unlabeled``) the augmenter."""
        raise NotImplementedError

    def build_model(self, cfg: Any) -> torch.nn.Module:
        raise NotImplementedError

    def collate_labeled(self, examples: list) -> dict:
        """A batch of labelled examples -> model inputs plus labels."""
        raise NotImplementedError

    def collate_unlabeled(self, examples: list) -> tuple[dict, dict]:
        """A batch of unlabelled examples -> (original view, augmented view) model inputs."""
        raise NotImplementedError

    def supervised(self, model: torch.nn.Module, batch: dict) -> SupervisedOutput:
        raise NotImplementedError

    def consistency_logits(self, model: torch.nn.Module, batch: dict) -> list[torch.Tensor]:
        """Logits the consistency loss compares, one (B, C) tensor per distribution (classes that do
        not exist for an example are -inf). The original and augmented views of a batch must give
        tensors of identical shapes."""
        raise NotImplementedError

    def evaluate(self, model: torch.nn.Module, examples: Sequence[Any], accelerator: Any,
                 batch_size: int, split: str, out_dir: Any = None) -> dict[str, float]:
        """Metrics on ``examples`` (every example counted exactly once across processes)."""
        raise NotImplementedError

    def save(self, model: torch.nn.Module, out_dir: Any) -> None:
        """Save model + tokenizer (+ label names) so that transformers can load the folder."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        """Task-side state that a resumed run must restore (e.g. the augmentation RNG)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def hidden_labels(self, examples: list) -> Optional[torch.Tensor]:
        """Labels unlabelled examples carry but training never reads (for unsup/target_accuracy); None."""
        return None

    def augment_pool(self, cfg: Any) -> tuple[Any, dict]:
        """(rows, info): the unlabelled texts ``uda-augment --task`` precomputes augmented copies of, as
        the training run builds them for ``cfg``. A task without such a pool says so."""
        raise ConfigError(f"uda-augment --task {cfg.task}: this task has no unlabelled pool to build here; give "
                          f"the texts with --input")


# ----------------------------------------------------------------------------- registry

@dataclass
class TaskSpec:
    factory: Callable[[], Task]  # a new, not yet set up task
    config_sections: dict = field(default_factory=dict)  # section name -> the task's config dataclass
    defaults: Optional[Path] = None  # the task's defaults file (None: the shipped configs/<name>.yaml)


_TASKS: dict[str, TaskSpec] = {}


def register_task(name: str, factory: Callable[[], Task], config_sections: Optional[dict] = None,
                  defaults: Optional[str | Path] = None) -> None:
    """Make a task available by name (``--task NAME``). Its defaults are the YAML file ``defaults`` (a task
    defined outside this package), or else the shipped configs/NAME.yaml."""
    _TASKS[name] = TaskSpec(factory, dict(config_sections or {}), Path(defaults) if defaults is not None else None)


def registered_tasks() -> list[str]:
    return sorted(_TASKS)


def task_spec(name: str) -> TaskSpec:
    if name not in _TASKS:
        known = ", ".join(registered_tasks()) or "none registered: import the package that defines them (tasks)"
        raise ConfigError(f"unknown task '{name}': choose one of {known}")
    return _TASKS[name]


def get_task(name: str) -> Task:
    return task_spec(name).factory()
