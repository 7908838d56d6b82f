#!/usr/bin/env python
"""Train a model with UDA consistency training.

    python scripts/train_uda.py --task imdb [--config FILE] [--train.lr 3e-5 --uda.tsa exp ...]

Every option is listed by --help. Precedence: defaults < configs/<task>.yaml < --config FILE <
command-line options.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from uda.config import ConfigError, build_config, help_text, parse_cli  # noqa: E402


def main(argv: list[str]) -> int:
    try:
        task, config_file, overrides, want_help = parse_cli(argv)
        if want_help:
            print(__doc__)
            print(help_text())
            return 0
        cfg = build_config(task, config_file, overrides)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    from tasks.text_data import DataError
    from uda.checkpoint import CheckpointError
    from uda.hub import OfflineError
    from uda.train import NonFiniteLossError, train

    try:
        train(cfg)
    except (ConfigError, DataError, OfflineError, CheckpointError, NonFiniteLossError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
