"""The Task protocol, its data types, and the task registry.

Everything the training loop needs to know about a task, and nothing more: the loop in
``uda/train.py`` knows nothing about IMDB or SQuAD, and is given its task by its caller. A task says how to load its data,
build its model, collate batches, compute the per-example supervised loss and the probability of
the gold answer (for TSA), produce the logits that the consistency loss compares, and evaluate.
It is a protocol (structural typing), not a base class to inherit from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol, Sequence

import torch

from uda.errors import ConfigError


@dataclass
class TaskData:
    """What ``Task.setup`` returns. Example types are the task's own (dicts for the built-ins)."""

    train: Sequence[Any]  # labelled training examples
    dev: Sequence[Any]  # model selection split (never the test set)
    test: Sequence[Any]  # evaluated once, at the end, on the selected model
    unlabeled: Sequence[Any]  # examples whose two views the consistency loss compares
    info: dict = field(default_factory=dict)  # counts and sources, logged to the run folder


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
    # above, with K = the task's tsa_num_classes.
    terms: Optional[list[SupervisedTerm]] = None


class Task(Protocol):
    name: str
    main_metric: str  # dev metric used for model selection; higher is better
    selectable_metrics: tuple[str, ...]  # dev metrics --eval.select_metric may name (checked before training)
    tsa_num_classes: int  # K in the TSA threshold alpha * (1 - 1/K) + 1/K (set by setup)
    # Optional: ``class_logits_index`` (the index in consistency_logits() of a distribution over the
    # task's classes, for distribution alignment and the class-spread diagnostics), ``class_prior``
    # ((K,) labelled class prior) and ``hidden_labels(examples)`` (labels unlabelled examples carry
    # but training never reads, for unsup/target_accuracy).

    def setup(self, cfg: Any) -> TaskData:
        """Load and validate data, build the tokenizer and the augmenter."""
        ...

    def build_model(self, cfg: Any) -> torch.nn.Module:
        ...

    def collate_labeled(self, examples: list) -> dict:
        """A batch of labelled examples -> model inputs plus labels."""
        ...

    def collate_unlabeled(self, examples: list) -> tuple[dict, dict]:
        """A batch of unlabelled examples -> (original view, augmented view) model inputs."""
        ...

    def supervised(self, model: torch.nn.Module, batch: dict) -> SupervisedOutput:
        ...

    def consistency_logits(self, model: torch.nn.Module, batch: dict) -> list[torch.Tensor]:
        """Logits the consistency loss compares, one (B, C) tensor per distribution (classes that do
        not exist for an example are -inf). The original and augmented views of a batch must give
        tensors of identical shapes."""
        ...

    def evaluate(self, model: torch.nn.Module, examples: Sequence[Any], accelerator: Any,
                 batch_size: int, split: str, out_dir: Any = None) -> dict[str, float]:
        """Metrics on ``examples`` (every example counted exactly once across processes)."""
        ...

    def save(self, model: torch.nn.Module, out_dir: Any) -> None:
        """Save model + tokenizer (+ label names) so that transformers can load the folder."""
        ...

    def state_dict(self) -> dict:
        """Task-side state that a resumed run must restore (e.g. the augmentation RNG)."""
        ...

    def load_state_dict(self, state: dict) -> None:
        ...


# ----------------------------------------------------------------------------- registry

@dataclass
class TaskSpec:
    factory: Callable[[], Task]  # a new, not yet set up task
    config_sections: dict = field(default_factory=dict)  # section name -> the task's config dataclass


_TASKS: dict[str, TaskSpec] = {}


def register_task(name: str, factory: Callable[[], Task], config_sections: Optional[dict] = None) -> None:
    """Make a task available by name (``--task NAME``); its defaults are the shipped configs/NAME.yaml."""
    _TASKS[name] = TaskSpec(factory, dict(config_sections or {}))


def registered_tasks() -> list[str]:
    return sorted(_TASKS)


def task_spec(name: str) -> TaskSpec:
    if name not in _TASKS:
        known = ", ".join(registered_tasks()) or "none registered: import the package that defines them (tasks)"
        raise ConfigError(f"unknown task '{name}': choose one of {known}")
    return _TASKS[name]


def get_task(name: str) -> Task:
    return task_spec(name).factory()
