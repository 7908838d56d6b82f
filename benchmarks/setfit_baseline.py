#!/usr/bin/env python
"""``python benchmarks/setfit_baseline.py ARGS`` = ``python -m uda_compare.setfit_baseline ARGS`` from a
checkout: the SetFit baseline on the labelled examples of one run. The code is
uda_compare/setfit_baseline.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from uda_compare.setfit_baseline import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
