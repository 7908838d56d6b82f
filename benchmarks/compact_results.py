"""Shrink a results folder to what is committed: per run its config, ids, results.json and a compact
metrics file; plots only where a summary shows them.

    python benchmarks/compact_results.py benchmarks/results/FOLDER [...]

- ``metrics.jsonl``: every dev evaluation line is kept whole; of the training lines, about
  ``--train_lines`` evenly spaced ones (always the last); numbers rounded to 5 significant digits.
- Per-question prediction files (``predictions_*``, ``na_scores_*``) and event files are removed:
  the run's command writes them again.
- An id file larger than ``--max_ids_bytes`` (every question of the labelled pool, for instance) is
  replaced by ``<name>.sha256``: its line count and the SHA-256 of its bytes, which a rerun of the
  command can be checked against.
- ``training_curves.png``, ``dev_ids.txt`` and ``data_info.json`` are removed: the dev questions follow
  from the seed and the split, and the run's command writes all three again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path

DROP_PREFIXES = ("predictions_", "na_scores_", "events.out.tfevents")
DROP_NAMES = ("training_curves.png", "dev_ids.txt", "dev_ids.sha256", "data_info.json")


def _round(x):
    if isinstance(x, float) and math.isfinite(x) and x != 0:
        return float(f"{x:.5g}")
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_round(v) for v in x]
    return x


def compact_metrics(path: Path, train_lines: int) -> None:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    dev = {i for i, r in enumerate(rows) if any(k.startswith(("dev/", "test/")) for k in r)}
    train = [i for i in range(len(rows)) if i not in dev]
    keep = set(dev)
    if train:
        every = max(1, math.ceil(len(train) / max(1, train_lines)))
        keep |= set(train[::every]) | {train[-1]}
    path.write_text("".join(json.dumps(_round(rows[i])) + "\n" for i in sorted(keep)), encoding="utf-8")


def compact(folder: Path, train_lines: int, max_ids_bytes: int) -> None:
    for f in sorted(folder.rglob("*")):
        if not f.is_file():
            continue
        if f.name.startswith(DROP_PREFIXES) or f.name in DROP_NAMES:
            f.unlink()
        elif f.name == "metrics.jsonl":
            compact_metrics(f, train_lines)
        elif f.name.endswith("_ids.txt") and f.stat().st_size > max_ids_bytes:
            data = f.read_bytes()
            f.with_suffix(".sha256").write_text(json.dumps(
                {"lines": data.count(b"\n"), "sha256": hashlib.sha256(data).hexdigest(),
                 "note": f"{f.name} removed to keep the folder small; the run's command writes it again"}) + "\n")
            f.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--train_lines", type=int, default=12)
    ap.add_argument("--max_ids_bytes", type=int, default=20_000)
    args = ap.parse_args()
    for folder in args.folders:
        compact(folder, args.train_lines, args.max_ids_bytes)


if __name__ == "__main__":
    main()
