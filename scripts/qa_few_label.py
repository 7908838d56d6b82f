#!/usr/bin/env python
"""Few-label SQuAD 2.0: supervised-only vs UDA for several labelled-set sizes and seeds.

    python scripts/qa_few_label.py --out /work/runs/qa_few_label --num_labeled 64 256 1024 --seeds 0 1 2 \\
        -- --config configs/recipes/squad_v2_cpu.yaml --data.path ../shared/data/squad_v2/dev-v2.0.json

Everything after ``--`` is passed to every run as train_uda.py options (task squad_v2). Each run
gets its own folder ``<out>/<method>-n<N>-seed<S>`` (supervised: ``--uda.lambda_u 0``); a folder that
already holds results.json is not run again, so an interrupted sweep continues where it stopped.
At the end (or with ``--summarize_only``) the test metrics of all finished runs are collected into
``summary.md`` / ``summary.csv`` / ``summary.json`` (mean and sample standard deviation over seeds)
and ``f1_vs_num_labeled.png``. ``--quick`` shrinks every run to a smoke test (4 steps, small dev and
test subsets): for checking the pipeline, not for numbers.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from uda.config import ConfigError, build_config, parse_cli  # noqa: E402

METHODS = {"supervised": {"uda.lambda_u": "0"}, "uda": {}}
METRICS = ["exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "best_f1"]
QUICK = {"train.max_steps": "4", "train.warmup_steps": "0", "train.eval_every": "2", "train.log_every": "2",
         "data.dev_size": "16", "data.max_test": "32", "data.max_unlabeled": "64"}


def run_name(method: str, n: int, seed: int) -> str:
    return f"{method}-n{n}-seed{seed}"


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, 0.0
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def collect(out: Path) -> list[dict]:
    """One row per finished run under ``out``: method, N, seed, test metrics, seconds."""
    rows = []
    for res in sorted(out.glob("*-n*-seed*/results.json")):
        method, n, seed = res.parent.name.rsplit("-", 2)
        r = json.loads(res.read_text(encoding="utf-8"))
        rows.append({"method": method, "num_labeled": int(n[1:]), "seed": int(seed[4:]),
                     **{m: r["test"].get(m) for m in METRICS}, "selected_step": r["selected_model"]["step"],
                     "total_seconds": r.get("total_seconds")})
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["method"], r["num_labeled"]), []).append(r)
    table = []
    for (method, n), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        entry = {"method": method, "num_labeled": n, "seeds": len(rs)}
        for m in METRICS + ["total_seconds"]:
            vals = [float(r[m]) for r in rs if r[m] is not None]
            if vals:
                entry[f"{m}_mean"], entry[f"{m}_std"] = mean_std(vals)
        table.append(entry)
    return table


def write_summary(out: Path, rows: list[dict], table: list[dict]) -> None:
    (out / "summary.json").write_text(json.dumps({"runs": rows, "table": table}, indent=2), encoding="utf-8")
    cols = ["method", "num_labeled", "seeds"] + [f"{m}_{s}" for m in METRICS + ["total_seconds"]
                                                 for s in ("mean", "std")]
    with (out / "summary.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for t in table:
            w.writerow({c: t.get(c) for c in cols})
    lines = ["| N | method | seeds | EM | F1 | HasAns EM | HasAns F1 | NoAns acc | best-threshold F1 (test) "
             "| time (s) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        cells = [f"{t[f'{m}_mean']:.1f} ± {t[f'{m}_std']:.1f}" if f"{m}_mean" in t else "-"
                 for m in METRICS + ["total_seconds"]]
        lines.append(f"| {t['num_labeled']} | {t['method']} | {t['seeds']} | " + " | ".join(cells) + " |")
    (out / "summary.md").write_text("Test metrics on the held-out articles (mean ± sample std over seeds).\n\n"
                                    + "\n".join(lines) + "\n", encoding="utf-8")
    plot(out / "f1_vs_num_labeled.png", table)


def plot(path: Path, table: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric, label in ((axes[0], "f1", "F1"), (axes[1], "HasAns_f1", "HasAns F1")):
        for method in sorted({t["method"] for t in table}):
            pts = [t for t in table if t["method"] == method and f"{metric}_mean" in t]
            ax.errorbar([t["num_labeled"] for t in pts], [t[f"{metric}_mean"] for t in pts],
                        yerr=[t[f"{metric}_std"] for t in pts], marker="o", capsize=3, label=method)
        ax.set_xscale("log")
        ax.set_xlabel("labelled questions (N)")
        ax.set_ylabel(f"test {label} (%)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("SQuAD 2.0 few-label: supervised vs UDA (mean ± std over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str]) -> int:
    cut = argv.index("--") if "--" in argv else len(argv)
    own, passthrough = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the runs and the summary")
    ap.add_argument("--num_labeled", type=int, nargs="+", default=[64, 256, 1024], help="labelled-set sizes N")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", choices=sorted(METHODS), default=["supervised", "uda"])
    ap.add_argument("--quick", action="store_true", help="smoke-test sizes (4 steps, small dev/test subsets)")
    ap.add_argument("--summarize_only", action="store_true", help="only rebuild the summary from finished runs")
    args = ap.parse_args(own)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.summarize_only:
        from tasks.text_data import DataError
        from uda.hub import OfflineError
        from uda.train import train

        try:
            task, config_file, overrides, _ = parse_cli(passthrough)
            plan = []
            for n in args.num_labeled:
                for seed in args.seeds:
                    for method in args.methods:
                        folder = out / run_name(method, n, seed)
                        run_over = {**overrides, **(QUICK if args.quick else {}), **METHODS[method],
                                    "data.num_labeled": str(n), "seed": str(seed), "output_dir": str(folder),
                                    "report_to": "none"}
                        plan.append((folder, build_config(task or "squad_v2", config_file, run_over)))
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        for folder, cfg in plan:
            if (folder / "results.json").exists():
                print(f"skip {folder.name}: already finished", flush=True)
                continue
            print(f"run {folder.name}", flush=True)
            try:
                train(cfg)
            except (ConfigError, DataError, OfflineError) as e:
                print(f"error in {folder.name}: {e}", file=sys.stderr)
                return 2
    rows = collect(out)
    if not rows:
        print(f"no finished runs under {out}", file=sys.stderr)
        return 1
    table = summarize(rows)
    write_summary(out, rows, table)
    print((out / "summary.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
