#!/usr/bin/env python
"""``python scripts/uda_augment.py ARGS`` = ``uda-augment ARGS`` from a checkout (see tasks/cli.py).

(Not named augment.py: with scripts/ on sys.path, that name would hide the augment package.)"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks.cli import augment_main as main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
