#!/usr/bin/env python
"""Dev accuracy of a text classifier at its start, before any training step: what the consistency
targets are made of at the beginning of a run (the zero-shot head of --model.label_descriptions, a
contrastive stage, a warm start, or a random head).

    python benchmarks/start_accuracy.py --seeds 0 1 2 3 4 --reference_split_seed 0 \\
        --out benchmarks/results/imdb_start_accuracy \\
        -- --task imdb --config configs/recipes/imdb_cpu_fewlabel.yaml --data.path ../shared/data/imdb

Each seed builds the run's data split (the same labelled and dev examples as a training run with that
seed; ``--reference_split_seed S`` keeps the config's id order file for seed S only, as the sweep does)
and its model exactly as training would, then evaluates the dev split once. Writes
``<out>/results.json`` (one row per seed, with the options).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tasks  # noqa: E402,F401 (registers the built-in tasks)
from uda.config import build_config, parse_cli  # noqa: E402
from uda.io import atomic_write_json  # noqa: E402
from uda.task import RunContext, get_task  # noqa: E402


def start_accuracy(task_name: str, config_file: str | None, overrides: dict) -> dict:
    from accelerate import Accelerator

    cfg = build_config(task_name, config_file, {**overrides, "report_to": "none"})
    task = get_task(task_name)
    with tempfile.TemporaryDirectory() as scratch:  # files a task builds in setup are not kept
        data = task.setup(cfg, RunContext(Path(scratch), wants_unlabeled=cfg.uda.lambda_u > 0))
    model = task.build_model(cfg).eval()
    metrics = task.evaluate(model, data.dev, Accelerator(cpu=True), cfg.train.eval_batch_size, "dev")
    return {"seed": cfg.seed, "dev": metrics, "labeled_ids": [e["id"] for e in data.train]}


def main(argv: list[str]) -> int:
    split = argv.index("--") if "--" in argv else len(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--reference_split_seed", type=int, default=None)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv[:split])
    task_name, config_file, overrides, _ = parse_cli(argv[split + 1:])
    rows = []
    for seed in args.seeds:
        over = {**overrides, "seed": seed, "output_dir": str(Path(args.out) / f"seed{seed}"), "uda.lambda_u": 0}
        if args.reference_split_seed is not None and seed != args.reference_split_seed:
            over["data.id_order_file"] = "none"
        t0 = time.time()
        row = start_accuracy(task_name or "imdb", config_file, over)
        row["seconds"] = round(time.time() - t0, 1)
        print(json.dumps({k: row[k] for k in ("seed", "dev", "seconds")}), flush=True)
        rows.append(row)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    atomic_write_json(Path(args.out) / "results.json", {"argv": argv, "runs": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
