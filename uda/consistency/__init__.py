"""The consistency family: UDA and the FixMatch line of methods that descend from it, chosen with
``--uda.method``. Each method has its own module (its formulas, as pure functions, and its state);
``uda`` itself is ``uda.losses.consistency_loss`` with ``uda.alignment.ClassAligner``, untouched.

:class:`Family` holds the chosen method once per consistency distribution of the task (a text task
has one, over its classes; the QA tasks add span start/end and answerability distributions), saves
and restores their state, and updates it once per optimizer step.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import torch

from uda.consistency import adamatch, fixmatch, flexmatch, freematch, softmatch
from uda.consistency.base import Decision, Method, MethodOutput, Settings
from uda.errors import ConfigError

__all__ = ["METHODS", "Family", "Decision", "MethodOutput", "Settings", "settings_from"]

_MODULES = {"fixmatch": (fixmatch, fixmatch.FixMatch), "flexmatch": (flexmatch, flexmatch.FlexMatch),
            "freematch": (freematch, freematch.FreeMatch), "softmatch": (softmatch, softmatch.SoftMatch),
            "adamatch": (adamatch, adamatch.AdaMatch)}
METHODS = ("uda", *_MODULES)

# uda.<option> -> the Settings field it sets (None in the config: the method's default, USB's NLP value)
_OPTIONS = {"confidence": "threshold", "target": "hard", "temperature": "temperature", "ema_momentum": "momentum",
            "fairness_weight": "fairness_weight", "n_sigma": "n_sigma", "threshold_warmup": "threshold_warmup"}
# the options uda itself does not read, and the methods that align the class distribution by themselves
_NOT_UDA = ("ema_momentum", "fairness_weight", "n_sigma", "threshold_warmup")
_OWN_ALIGNMENT = ("softmatch", "adamatch")


def _readers(option: str) -> list[str]:
    setting = _OPTIONS[option]
    names = [n for n, (mod, _) in _MODULES.items() if setting in mod.READS or option in mod.READS]
    if option in ("confidence", "target", "temperature"):
        names.insert(0, "uda")
    return names


def settings_from(u: Any) -> Optional[Settings]:
    """The chosen method's resolved settings from the uda config section (None for uda itself). An option
    set (not None) that the method does not read is an error that names the methods that do."""
    method = u.method
    if method == "uda":
        for option in _NOT_UDA:
            if getattr(u, option) is not None:
                raise ConfigError(f"--uda.{option} is an option of {', '.join(_readers(option))}, not of uda.method "
                                  f"uda: set --uda.method, or drop --uda.{option}")
        return None
    module, _ = _MODULES[method]
    values = {}
    for option, setting in _OPTIONS.items():
        value = getattr(u, option)
        if value is None:
            continue
        if setting not in module.READS and option not in module.READS:
            raise ConfigError(f"--uda.{option} is not an option of uda.method {method} (it is one of "
                              f"{', '.join(_readers(option))}): drop it, or choose one of those methods")
        values[setting] = value == "hard" if option == "target" else value
    if method in _OWN_ALIGNMENT and u.distribution_alignment:
        raise ConfigError(f"uda.method {method} aligns the class distribution by itself; drop "
                          f"--uda.distribution_alignment (it is for uda, fixmatch, flexmatch and freematch)")
    return dataclasses.replace(Settings(), **values)


class Family:
    """The chosen method on each consistency distribution of a task, created at its first batch.

    ``class_index``: which distribution is over the task's classes (its per-class parts apply there);
    the others are over positions. ``num_unlabeled``: the size of the unlabelled pool (FlexMatch keeps
    one entry per example). ``labeled_prior``: the labelled class shares (SoftMatch aligns towards them).
    """

    def __init__(self, method: str, settings: Settings, class_index: Optional[int], num_unlabeled: int,
                 labeled_prior: Optional[torch.Tensor]):
        self.name, self.settings, self.class_index = method, settings, class_index
        self.num_unlabeled, self.labeled_prior = num_unlabeled, labeled_prior
        self.methods: dict[int, Method] = {}
        self._pending: dict[int, dict] = {}  # saved states of distributions not yet seen since a resume

    def method(self, j: int, logits: torch.Tensor) -> Method:
        if j not in self.methods:
            classes = logits.shape[-1] if j == self.class_index else None
            m = _MODULES[self.name][1](self.settings, classes, self.num_unlabeled,
                                       self.labeled_prior if classes else None)
            if j in self._pending:
                m.load_state_dict(self._pending.pop(j))
            self.methods[j] = m
        return self.methods[j]

    def loss(self, j: int, weak_logits: torch.Tensor, strong_logits: torch.Tensor, **kw) -> MethodOutput:
        return self.method(j, weak_logits).loss(weak_logits, strong_logits, **kw)

    def update(self, observed: dict[int, dict]) -> None:
        """One optimizer step's observations of each distribution (reduced over micro-batches and processes)."""
        for j, obs in observed.items():
            if j in self.methods:
                self.methods[j].update(obs)

    def state_dict(self) -> dict:
        states = {str(j): m.state_dict() for j, m in self.methods.items()}
        states.update({str(j): s for j, s in self._pending.items()})
        return {"method": self.name, "distributions": states}

    def load_state_dict(self, state: dict) -> None:
        if state["method"] != self.name:
            raise ConfigError(f"the checkpoint was trained with uda.method {state['method']}, this run asks for "
                              f"{self.name}: use the same method to continue, or start a new run")
        self.methods, self._pending = {}, {int(j): s for j, s in state["distributions"].items()}
