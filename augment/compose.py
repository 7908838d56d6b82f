"""Apply several augmenters one after the other."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from augment.base import Augmenter

__all__ = ["Compose"]


class Compose:
    """Applies ``augmenters`` in order, all drawing from the same ``rng``; name joins names with '+'."""

    def __init__(self, augmenters: Sequence[Augmenter]):
        self.augmenters: list[Augmenter] = list(augmenters)
        if not self.augmenters:
            raise ValueError("Compose needs at least one augmenter")
        self.name = "+".join(a.name for a in self.augmenters)

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        out = list(texts)
        for aug in self.augmenters:
            out = aug(out, rng)
            if len(out) != len(texts):
                raise ValueError(f"augmenter {aug.name!r} returned {len(out)} texts for {len(texts)}")
        return out
