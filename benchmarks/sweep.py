#!/usr/bin/env python
"""``python benchmarks/sweep.py ARGS`` = ``uda-compare ARGS`` from a checkout: supervised, UDA, SetFit
and the all-labels ceiling over labelled-set sizes and seeds. The code is the uda_compare package."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from uda_compare.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
