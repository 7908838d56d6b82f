"""``python -m uda_compare ARGS`` = ``uda-compare ARGS``."""

import sys

from uda_compare.cli import main

if __name__ == "__main__":
    sys.exit(main())
