#!/usr/bin/env python
"""``python scripts/build_qa_start.py ARGS`` = ``uda-qa-start ARGS`` from a checkout (see tasks/qa/start.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks.qa.start import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
