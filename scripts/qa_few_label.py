#!/usr/bin/env python
"""Few-label SQuAD 2.0: supervised-only vs UDA for several labelled-set sizes and seeds.

    python scripts/qa_few_label.py --out /work/runs/qa_few_label --num_labeled 64 256 1024 --seeds 0 1 2 \\
        -- --config configs/recipes/squad_v2_cpu.yaml --data.path ../shared/data/squad_v2/dev-v2.0.json

Kept for existing commands: the same as ``python benchmarks/sweep.py --task squad_v2 ...`` (see
benchmarks/sweep.py for every option: methods, --quick, --summarize_only, the summary files and plots).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.sweep import main as sweep_main  # noqa: E402


def main(argv: list[str]) -> int:
    return sweep_main(["--task", "squad_v2", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
