#!/usr/bin/env python
"""``python scripts/train_uda.py ARGS`` = ``uda-train ARGS`` from a checkout (see tasks/cli.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks.cli import train_main as main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
