"""The augmenter interface: a small protocol, no base class to inherit from.

An augmenter turns a list of texts into a list of augmented texts of the same length and order.
It never mutates its input and draws randomness only from the ``rng`` it is given (no global RNG),
so a run is deterministic for a seed.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Augmenter(Protocol):
    name: str

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        """Return one augmented version of each text, aligned with ``texts``."""
        ...


def check_p(p: float, what: str = "p") -> float:
    """``p`` as a float, or a ValueError naming it ``what`` when it is not a probability in [0, 1]."""
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{what} must be in [0, 1], got {p}")
    return p
