"""A transformers model with heads of our own, saved and loaded under the model's own key names: the
base class of the text classifier, the QA reader and the passages reader."""

from __future__ import annotations

from typing import Any

from torch import nn


class HeadedModel(nn.Module):
    """A transformers model plus heads of our own, saved and loaded under the model's own key names.

    The model's modules, parameters and buffers become this module's (the same objects), so that
    parameter names are the model's, its checkpoints load here, and the model's forward still runs
    on them; ``self.inner`` is the model itself, not registered (its modules already are)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        for name, child in model.named_children():
            self.add_module(name, child)
        for name, param in model.named_parameters(recurse=False):
            self.register_parameter(name, param)
        for name, buf in model.named_buffers(recurse=False):
            self.register_buffer(name, buf, persistent=name not in model._non_persistent_buffers_set)
        self.__dict__["inner"] = model

    @property
    def config(self) -> Any:
        return self.inner.config

    def train(self, mode: bool = True) -> "HeadedModel":
        super().train(mode)
        self.inner.training = mode  # its children are already switched
        return self
