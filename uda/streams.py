"""What the loop draws its batches with: endless seeded streams of example positions, and the
examples at those positions."""

from __future__ import annotations

from typing import Any

import numpy as np


class BatchStream:
    """Endless full batches of indices drawn from successive seeded permutations of ``n`` examples
    (the reference's repeat -> shuffle -> batch). In a multi-process run every process takes its own
    slice of each global batch. The position is two integers, so a resumed run continues exactly."""

    def __init__(self, n: int, batch_size: int, seed: int, rank: int = 0, world: int = 1) -> None:
        if n <= 0:
            raise ValueError("cannot draw batches from an empty set")
        self.n, self.batch_size, self.seed, self.rank, self.world = n, batch_size, seed, rank, world
        self.epoch, self.pos = 0, 0
        self._perm = self._permutation(0)

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.n)

    def __next__(self) -> list[int]:
        needed = self.batch_size * self.world
        out: list[int] = []
        while len(out) < needed:
            take = self._perm[self.pos:self.pos + needed - len(out)]
            out.extend(int(i) for i in take)
            self.pos += len(take)
            if self.pos >= self.n:
                self.epoch, self.pos = self.epoch + 1, 0
                self._perm = self._permutation(self.epoch)
        return out[self.rank * self.batch_size:(self.rank + 1) * self.batch_size]

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])
        self._perm = self._permutation(self.epoch)



def take(examples: Any, positions: Any) -> list:
    """The examples at ``positions``: through the sequence's ``examples_at`` when it has one (a pool read
    from disk reads a batch together), else one item at a time."""
    at = getattr(examples, "examples_at", None)
    return at(positions) if at is not None else [examples[i] for i in positions]

