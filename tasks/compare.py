"""``uda-compare``: supervised vs UDA (vs SetFit, vs all labels) over labelled-set sizes N and seeds,
for one task, on your data; one table (mean ± std over seeds), per-seed and per-run tables, plots.

    uda-compare --task text_classification --out runs/compare --num_labeled 96 --seeds 1 2 3 \\
        --methods supervised uda setfit ceiling -- --config configs/recipes/text_fewlabel.yaml --data.path DATA

    uda-compare --task imdb --out runs/imdb_sweep --num_labeled 20 100 1000 --seeds 0 1 2 \\
        --methods supervised uda_tfidf uda_bt ceiling --bt_file BT.jsonl.gz --reference_split_seed 0 \\
        -- --config configs/recipes/imdb_cpu.yaml --data.path ../shared/data/imdb

    uda-compare --task squad_v2 --out runs/qa_sweep --num_labeled 64 256 1024 --seeds 0 1 2 \\
        -- --config configs/recipes/squad_v2_fewlabel.yaml --data.path ../shared/data/squad_v2/dev-v2.0.json

(``python benchmarks/sweep.py`` and ``python -m tasks.compare`` from a checkout are the same command.)
Everything after ``--`` is passed to every run as uda-train options (``uda-train --task TASK --help``
lists them). Methods (each one a set of options laid over those):

- ``supervised``: supervised only (``--uda.lambda_u 0``), everything else as the config says (a recipe
  with a contrastive stage keeps it: this is the recipe without its consistency loss);
- ``finetune``: plain fine-tuning: supervised only, no Training Signal Annealing and, for text tasks,
  no contrastive or MLM stage and a random head (``--uda.lambda_u 0 --uda.tsa none
  --model.contrastive_iterations none --model.mlm_steps none --model.label_descriptions none
  --model.zero_shot_start false --model.label_descriptions_file none``);
  what a user gets from the labels alone;
- ``uda``: UDA as the config says (augmentation included);
- ``uda_tfidf``: UDA with TF-IDF word replacement (``--augment.method tf_idf``, the config's p);
- ``uda_bt``: UDA with precomputed (back-translated) copies (``--augment.method precomputed
  --augment.file <--bt_file>``; see uda-augment);
- ``ceiling``: plain fine-tuning (as ``finetune``) on every labelled example of the training pool
  that is not dev (``--data.num_labeled 0``); run once per seed, not per N;
- ``setfit``: the SetFit baseline (tasks/text/setfit_baseline.py) on the labelled and dev ids of the
  supervised / UDA run with the same N and seed (``labeled_ids.txt``, ``dev_ids.txt``; every method
  with the same N and seed trains on the same labelled set), with that run's data, encoder, seed and
  max length. It runs after the trainer runs, so give one of those methods too (or run it before).
  It needs the optional setfit package (``pip install setfit``): without it the command stops with
  that advice before any run starts.

The back-translation file must hold a copy of every unlabelled text of every run; the pool depends
on the seed (the dev examples are left out of it), so make it from the data files rather than from
one run's pool, e.g. ``uda-augment --input DATA/train.jsonl.gz --input DATA/unsup.jsonl.gz --method
marian``. With a config that names ``data.id_order_file`` (the reference split) every seed trains on
the same labelled examples; ``--reference_split_seed S`` keeps that split for seed S only and lets the
other seeds draw theirs at random.

Each run gets its own folder ``<out>/<method>-n<N>-seed<S>`` (``ceiling-nall-seed<S>``); a folder
that already holds results.json is not run again, so an interrupted sweep continues where it
stopped (an unfinished run continues from its last checkpoint); Ctrl-C or SIGTERM saves the step under
way. Each run prints a line when it starts and when it ends (``[3/16] done uda-n96-seed2 in 15.2 min,
accuracy 84.6``). At the end (or with ``--summarize_only``) the test metrics of all finished runs are
collected into ``summary.md`` (mean and sample standard deviation over seeds; the headline metrics per
seed, one column per seed; each run's metrics, wall and CPU time), ``summary.csv`` / ``summary.json``,
one plot ``<metric>_vs_num_labeled.png`` per headline metric (log N; the ceiling as a dashed line)
and ``training_curves.png`` (supervised and consistency loss against step, one line per run, from
each run's metrics.jsonl); the plots need matplotlib (``pip install matplotlib``) and are left out,
with a note, without it. ``--quick`` shrinks every run to a smoke test (4 steps, small dev, test and
unlabelled subsets): for checking the pipeline, not for numbers.

``--variant NAME BASE 'OPTIONS'`` adds a method of your own: a built-in method with more uda-train
options laid over it (``--variant uda_bt_conf uda_bt '--uda.confidence 0.8'``), named in ``--methods``
like any other. ``--compare FOLDER LABEL`` draws another sweep's curves (its summary.json) on the plots,
dashed, as ``LABEL: method``: a new start beside the old one.

``--num_labeled`` also takes ``all``: every labelled example of the pool (``--data.num_labeled 0``) for
every method, as the curve's last point (folder ``<method>-nall-seed<S>``, plotted at its number of
training examples). ``--jobs K`` runs K runs at once, each in a fresh process with one CPU thread
(``OMP_NUM_THREADS=1``) and its console output in ``<out>/<run name>.log``: for a machine with many
cores, or several runs sharing one GPU. For SQuAD 2.0 the F1 plot also draws the answer-nothing line
(official F1 of a reader that answers no question: the unanswerable share of the test questions).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import shlex
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import tasks  # noqa: F401 (registers the built-in tasks)
from uda.config import ConfigError, build_config, parse_cli
from uda.task import get_task

QUICK = {"train.max_steps": "4", "train.warmup_steps": "0", "train.eval_every": "2", "train.log_every": "2",
         "data.dev_size": "16", "data.max_test": "32", "data.max_unlabeled": "64"}


@dataclass
class TaskSpec:
    title: str
    unit: str                          # what N counts, for the plot's x label
    metrics: list[tuple[str, str]]     # (key in results.json "test", column header)
    plots: list[str]                   # metrics that get a <metric>_vs_num_labeled.png
    scale: float                       # results.json value * scale = the table's percent
    default_num_labeled: list[int]
    default_methods: list[str]
    quick: dict = field(default_factory=lambda: dict(QUICK))
    plain: dict = field(default_factory=dict)  # what finetune and ceiling add to lambda_u 0: no extra stage


_TEXT = dict(unit="labelled reviews", metrics=[("accuracy", "accuracy"), ("macro_f1", "macro-F1")],
             plots=["accuracy", "macro_f1"], scale=100.0, default_num_labeled=[20, 100, 1000],
             default_methods=["supervised", "uda_tfidf", "uda_bt", "ceiling"],
             plain={"model.contrastive_iterations": "none", "model.mlm_steps": "none",
                    "model.label_descriptions": "none", "model.zero_shot_start": "false",
                    "model.label_descriptions_file": "none"})
TASKS = {
    "imdb": TaskSpec(title="IMDB", **_TEXT),
    "text_classification": TaskSpec(title="Text classification", **_TEXT),
    "squad_v2": TaskSpec(
        title="SQuAD 2.0", unit="labelled questions",
        metrics=[("exact", "EM"), ("f1", "F1"), ("HasAns_exact", "HasAns EM"), ("HasAns_f1", "HasAns F1"),
                 ("NoAns_exact", "NoAns acc"), ("best_f1", "best-threshold F1 (test)"),
                 ("HasAns_span_f1", "HasAns span F1"), ("answerability_accuracy", "answerability acc"),
                 ("answerability_auc", "answerability AUC")],
        plots=["f1", "HasAns_span_f1"], scale=1.0, default_num_labeled=[64, 256, 1024],
        default_methods=["supervised", "uda"]),
}
METHODS = ["finetune", "supervised", "uda", "uda_tfidf", "uda_bt", "ceiling", "setfit"]  # also the table's order within one N
ID_SOURCES = ["supervised", "finetune", "uda", "uda_tfidf", "uda_bt"]  # runs whose labelled ids setfit reuses, preferred first
SETFIT_QUICK = ["--num_iterations", "2"]  # --quick: a smoke test of the baseline too
SWEEP_KEYS = ("seed", "output_dir", "data.num_labeled")  # set by the sweep for each run


def method_overrides(method: str, bt_file: Optional[str], plain: Optional[dict] = None,
                     variants: Optional[dict] = None) -> dict:
    """The options a method lays over the config and the pass-through options. plain: what the
    task's plain fine-tuning adds (TaskSpec.plain); variants: NAME -> (base method, its own overrides)."""
    if variants and method in variants:
        base, own = variants[method]
        return {**method_overrides(base, bt_file, plain), **own}
    if method == "supervised":
        return {"uda.lambda_u": "0"}
    if method == "finetune":
        return {"uda.lambda_u": "0", "uda.tsa": "none", **(plain or {})}
    if method == "uda":
        return {}
    if method == "uda_tfidf":
        return {"augment.method": "tf_idf"}
    if method == "uda_bt":
        return {"augment.method": "precomputed", "augment.file": str(bt_file)}
    if method == "ceiling":
        return {"uda.lambda_u": "0", "uda.tsa": "none", "data.num_labeled": "0", **(plain or {})}
    raise ValueError(f"unknown method '{method}'")


def run_name(method: str, n: Optional[int], seed: int) -> str:
    return f"{method}-n{'all' if n is None else n}-seed{seed}"


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, 0.0
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def _num_train(results: dict) -> Optional[int]:
    """Labelled training examples of a run, from its data info (text: an int; QA: {"questions": n})."""
    train = results.get("data", {}).get("counts", {}).get("train")
    if isinstance(train, dict):
        train = train.get("questions")
    return int(train) if isinstance(train, (int, float)) else None


def _answer_nothing(test: dict) -> Optional[float]:
    """SQuAD 2.0: official F1 (%) of a reader that answers no question on this test set (its
    unanswerable share), from the counts the metric reports; None for other tasks."""
    total, no_ans = test.get("total"), test.get("NoAns_total")
    return 100.0 * float(no_ans) / float(total) if total and no_ans is not None else None


def _device(r: dict) -> Optional[str]:
    """Where a run ran ("cpu", "cuda"): results.json's environment, or its first process's device
    (runs of before 2026-12-04); None when neither is there."""
    dev = (r.get("environment") or {}).get("device") or next(iter(r.get("processes") or []), {}).get("device")
    return None if dev is None else str(dev).split(":")[0]


def _n_key(n: Any) -> float:
    return math.inf if n == "all" else float(n)


# ----------------------------------------------------------------------------- collect and summarise

def collect(out: Path, task: str) -> list[dict]:
    """One row per finished run under ``out``: method, N ("all" for the ceiling), seed, the raw test
    metrics of results.json, training examples, selected step and seconds."""
    spec = TASKS[task]
    rows = []
    for res in sorted(out.glob("*-n*-seed*/results.json")):
        try:
            method, n, seed = res.parent.name.rsplit("-", 2)
            n_val: Any = "all" if n == "nall" else int(n[1:])
            seed_val = int(seed[4:])
        except ValueError:
            continue  # not a sweep run folder
        r = json.loads(res.read_text(encoding="utf-8"))
        run_task = TASKS.get(r.get("task"))
        if run_task is None or run_task.metrics != spec.metrics:
            print(f"note: {res.parent.name} is a {r.get('task')} run, not {task}: left out", file=sys.stderr)
            continue
        rows.append({"run": res.parent.name, "method": method, "num_labeled": n_val, "seed": seed_val,
                     **{m: r["test"].get(m) for m, _ in spec.metrics}, "num_train": _num_train(r),
                     "selected_step": r["selected_model"]["step"], "total_seconds": r.get("total_seconds"),
                     "cpu_seconds": r.get("cpu_seconds"), "answer_nothing": _answer_nothing(r["test"]),
                     "device": _device(r), "resumed": bool(r.get("resumed_at_steps"))})
    return rows


def summarize(rows: list[dict], task: str) -> list[dict]:
    """Mean and sample std over seeds per (method, N); metrics in percent."""
    spec = TASKS[task]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["method"], r["num_labeled"]), []).append(r)
    order = {m: i for i, m in enumerate(METHODS)}
    table = []
    for (method, n), rs in sorted(groups.items(), key=lambda kv: (_n_key(kv[0][1]), order.get(kv[0][0], 99),
                                                                   kv[0][0])):
        entry: dict = {"method": method, "num_labeled": n, "seeds": len(rs), "seed_list": sorted(r["seed"] for r in rs)}
        trains = [r["num_train"] for r in rs if r["num_train"] is not None]
        entry["num_train"] = round(sum(trains) / len(trains)) if trains else None
        nothing = [r["answer_nothing"] for r in rs if r.get("answer_nothing") is not None]
        if nothing:
            entry["answer_nothing"] = sum(nothing) / len(nothing)
        for m, _ in spec.metrics:
            vals = [float(r[m]) * spec.scale for r in rs if r[m] is not None]
            if vals:
                entry[f"{m}_mean"], entry[f"{m}_std"] = mean_std(vals)
        entry["devices"] = dict(sorted(Counter(r.get("device") or "-" for r in rs).items()))
        for key in ("total_seconds", "cpu_seconds"):  # cpu: a run resumed from an older checkpoint has none
            # wall time counts the last attempt only: a resumed run's would read as a fast run, and runs
            # on a GPU and on a CPU do not average into anything; their raw values stay in summary.json
            secs = [float(r[key]) for r in rs
                    if r.get(key) is not None and not (key == "total_seconds" and r.get("resumed"))]
            if secs and len(entry["devices"]) == 1:
                entry[f"{key}_mean"], entry[f"{key}_std"] = mean_std(secs)
        table.append(entry)
    return table


def _ran_on(entry: dict) -> str:
    """"cuda", or "cpu 1, cuda 2" for a row whose runs ran on different kinds of device."""
    devices = entry.get("devices", {})
    return next(iter(devices)) if len(devices) == 1 else ", ".join(f"{d} {k}" for d, k in devices.items())


def compared(pairs: list) -> list[dict]:
    """The table rows of other sweeps (``--compare FOLDER LABEL``: FOLDER/summary.json), each method
    renamed 'LABEL: method', for the plots."""
    rows = []
    for folder, label in pairs:
        path = Path(folder) / "summary.json"
        if not path.is_file():
            raise SystemExit(f"error: --compare '{folder}' holds no summary.json of a sweep")
        for t in json.loads(path.read_text(encoding="utf-8"))["table"]:
            rows.append({**t, "method": f"{label}: {t['method']}"})
    return rows


def write_summary(out: Path, rows: list[dict], table: list[dict], task: str,
                  others: Optional[list[dict]] = None) -> list[Path]:
    """summary.json / .csv / .md and the plots (with the rows of ``others``, other sweeps, drawn dashed);
    returns the files written."""
    spec = TASKS[task]
    keys = [m for m, _ in spec.metrics] + ["total_seconds", "cpu_seconds"]
    (out / "summary.json").write_text(json.dumps(
        {"task": task, "units": f"table metrics in percent (results.json test value x {spec.scale:g}); runs: the raw "
                                f"results.json values", "runs": rows, "table": table}, indent=2), encoding="utf-8")
    cols = ["method", "num_labeled", "seeds", "num_train"] + [f"{m}_{s}" for m in keys for s in ("mean", "std")]
    cols.append("ran_on")
    with (out / "summary.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for t in table:
            w.writerow({**{c: t.get(c) for c in cols}, "ran_on": _ran_on(t)})
    heads = [h for _, h in spec.metrics] + ["time (s)", "CPU (s)", "ran on"]
    lines = ["| N | method | seeds | " + " | ".join(heads) + " |", "|---" * (3 + len(heads)) + "|"]
    for t in table:
        cells = []
        for m in keys:
            digits = 0 if m.endswith("_seconds") else 1
            if f"{m}_mean" not in t:
                cells.append("-")
            elif t["seeds"] < 2:  # one seed has no spread: print the value alone, not "± 0"
                cells.append(f"{t[f'{m}_mean']:.{digits}f}")
            else:
                cells.append(f"{t[f'{m}_mean']:.{digits}f} ± {t[f'{m}_std']:.{digits}f}")
        cells.append(_ran_on(t))
        lines.append(f"| {_n_cell(t)} | {t['method']} | {t['seeds']} | " + " | ".join(cells) + " |")
    nothing = sorted({round(t["answer_nothing"], 2) for t in table if "answer_nothing" in t})
    note = (f" Answer-nothing F1 on the test questions (a reader that answers none): "
            f"{', '.join(f'{v:.2f}' for v in nothing)}." if nothing else "")
    (out / "summary.md").write_text(
        f"{spec.title}: test metrics in % (mean ± sample std over seeds, the value alone for a single seed; "
        "model selected on dev). Time: wall seconds of runs that were not resumed, shown only where all "
        "of a row's runs ran on one kind of device (\"ran on\"). "
        f"Runs and raw values: summary.json, summary.csv and each run's results.json.{note}\n\n"
        + "\n".join(lines) + "\n" + per_seed_tables(rows, table, task) + run_table(rows, task),
        encoding="utf-8")
    written = [out / "summary.json", out / "summary.csv", out / "summary.md"]
    if not _have_matplotlib():
        print("note: no plots: they need matplotlib (pip install matplotlib); the tables are written",
              file=sys.stderr)
        return written
    for metric in spec.plots:
        path = out / f"{metric}_vs_num_labeled.png"
        plot_metric(path, table + (others or []), task, metric)
        written.append(path)
    path = out / "training_curves.png"
    plot_training_curves(path, out, rows)
    written.append(path)
    return written


def _n_cell(t: dict) -> Any:
    """A table row's N as the tables print it: the size, or "all (number of training examples)"."""
    return f"all ({t['num_train']})" if t["num_labeled"] == "all" else t["num_labeled"]


def per_seed_tables(rows: list[dict], table: list[dict], task: str) -> str:
    """summary.md's per-seed tables, one per headline metric (TaskSpec.plots): a row per method and N
    (in the order of the mean table), a column per seed, '-' where that run is missing."""
    spec = TASKS[task]
    seeds = sorted({r["seed"] for r in rows})
    value = {(r["method"], r["num_labeled"], r["seed"]): r for r in rows}
    text = ""
    for metric in spec.plots:
        label = dict(spec.metrics)[metric]
        lines = ["| N | method | " + " | ".join(f"seed {s}" for s in seeds) + " |", "|---" * (2 + len(seeds)) + "|"]
        for t in table:
            cells = []
            for s in seeds:
                r = value.get((t["method"], t["num_labeled"], s))
                cells.append("-" if r is None or r.get(metric) is None else f"{float(r[metric]) * spec.scale:.1f}")
            lines.append(f"| {_n_cell(t)} | {t['method']} | " + " | ".join(cells) + " |")
        text += f"\n## Test {label} (%) per seed\n\n" + "\n".join(lines) + "\n"
    return text


def run_table(rows: list[dict], task: str) -> str:
    """summary.md's table of runs: one row per run (N, then method, then seed) with its headline metrics,
    its wall and CPU seconds, the device it ran on and its selected step."""
    spec = TASKS[task]
    order = {m: i for i, m in enumerate(METHODS)}
    labels = [dict(spec.metrics)[m] for m in spec.plots]
    lines = ["| run | " + " | ".join(labels) + " | time (s) | CPU (s) | ran on | selected step |",
             "|---" * (5 + len(labels)) + "|"]
    resumed = False
    for r in sorted(rows, key=lambda r: (_n_key(r["num_labeled"]), order.get(r["method"], 99), r["method"], r["seed"])):
        cells = ["-" if r.get(m) is None else f"{float(r[m]) * spec.scale:.1f}" for m in spec.plots]
        for key in ("total_seconds", "cpu_seconds"):
            cells.append("-" if r.get(key) is None else f"{float(r[key]):.0f}")
        if r.get("resumed"):
            cells[-2] += " *"
            resumed = True
        cells += [r.get("device") or "-", str(r.get("selected_step", "-"))]
        lines.append(f"| {r['run']} | " + " | ".join(cells) + " |")
    note = "\n\n\\* resumed: its wall time counts the last attempt only (CPU time counts every attempt)." \
        if resumed else ""
    return ("\n## Runs\n\nTest metrics in %; wall and CPU seconds of each run (CPU: all threads).\n\n"
            + "\n".join(lines) + note + "\n")


def _have_matplotlib() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        return False


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colors(methods: list[str]) -> dict[str, Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    base = {m: m.split(": ", 1)[-1] for m in methods}  # a compared sweep's method keeps its method's colour
    known = METHODS + sorted(set(base.values()) - set(METHODS))
    return {m: cmap(known.index(base[m]) % 10) for m in methods}


def plot_metric(path: Path, table: list[dict], task: str, metric: str) -> None:
    spec = TASKS[task]
    label = dict(spec.metrics)[metric]
    plt = _pyplot()
    import matplotlib.ticker
    colors = _colors(sorted({t["method"] for t in table}))
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    def x_of(t: dict) -> Any:  # 'all' on a curve sits at its number of training examples
        return t["num_train"] if t["num_labeled"] == "all" else t["num_labeled"]

    def on_curve(t: dict, method_pts: list[dict]) -> bool:
        return t["num_labeled"] != "all" or (t["num_train"] is not None and len(method_pts) > 1)

    by_method = {m: [t for t in table if t["method"] == m and f"{metric}_mean" in t] for m in {t["method"] for t in table}}
    ns = sorted({x_of(t) for pts in by_method.values() for t in pts if on_curve(t, pts)})
    for method in sorted(by_method, key=lambda m: (METHODS + [m]).index(m)):
        pts = by_method[method]
        curve = sorted([t for t in pts if on_curve(t, pts)], key=lambda t: x_of(t))
        if curve:
            ax.errorbar([x_of(t) for t in curve], [t[f"{metric}_mean"] for t in curve],
                        yerr=[t[f"{metric}_std"] for t in curve], marker="o", capsize=3, color=colors[method],
                        ls="--" if ": " in method else "-", label=f"{method} ({'/'.join(str(t['seeds']) for t in curve)} seeds)")
        for t in pts:
            if not on_curve(t, pts):  # the ceiling: one value, drawn across every N
                m, s = t[f"{metric}_mean"], t[f"{metric}_std"]
                ax.axhline(m, ls="--", color=colors[method],
                           label=f"{method}: all {t['num_train']} labelled ({t['seeds']} seeds)")
                if s > 0:
                    ax.axhspan(m - s, m + s, color=colors[method], alpha=0.12, lw=0)
    nothing = [t["answer_nothing"] for t in table if "answer_nothing" in t]
    if metric in ("f1", "exact") and nothing:
        ax.axhline(sum(nothing) / len(nothing), ls=":", color="black",
                   label=f"answer nothing ({sum(nothing) / len(nothing):.1f})")
    if ns:
        alls = {x_of(t) for pts in by_method.values() for t in pts if t["num_labeled"] == "all" and on_curve(t, pts)}
        ax.set_xscale("log")
        ax.set_xticks(ns)
        ax.set_xticklabels([f"all ({n})" if n in alls and n not in
                            {t["num_labeled"] for t in table} else str(n) for n in ns])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlim(ns[0] / 1.5, ns[-1] * 1.5)
    ax.set_xlabel(f"{spec.unit} (N, log scale)")
    ax.set_ylabel(f"test {label} (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{spec.title}: test {label} against N (mean ± std over seeds)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def read_curves(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """``sup/loss`` and ``unsup/loss`` against step from a run's metrics.jsonl."""
    curves: dict[str, list[tuple[int, float]]] = {"sup/loss": [], "unsup/loss": []}
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return curves
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        for key, pts in curves.items():
            if key in rec and "step" in rec:
                pts.append((int(rec["step"]), float(rec[key])))
    return curves


def plot_training_curves(path: Path, out: Path, rows: list[dict]) -> None:
    """Two panels (supervised loss, consistency loss) against step; one line per run, coloured by
    method; runs without a consistency loss (supervised only) dashed."""
    from matplotlib.lines import Line2D

    plt = _pyplot()
    colors = _colors(sorted({r["method"] for r in rows}))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles: dict[str, str] = {}
    for r in rows:
        curves = read_curves(out / r["run"])
        ls = "-" if curves["unsup/loss"] else "--"
        styles.setdefault(r["method"], ls)
        for ax, key in zip(axes, ("sup/loss", "unsup/loss")):
            if curves[key]:
                steps, vals = zip(*curves[key])
                ax.plot(steps, vals, ls=ls, color=colors[r["method"]], alpha=0.55, lw=1.2)
    for ax, title in zip(axes, ("supervised loss (sup/loss)", "consistency loss (unsup/loss)")):
        ax.set_xlabel("step")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    handles = [Line2D([], [], color=colors[m], ls=styles.get(m, "-"),
                      label=f"{m} ({'UDA' if styles.get(m) == '-' else 'supervised only'})")
               for m in sorted(colors, key=lambda m: (METHODS + [m]).index(m))]
    axes[0].legend(handles=handles, fontsize=8)
    fig.suptitle("Training curves, one line per run (every N and seed), from metrics.jsonl", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------------------- plan and run

def build_plan(args: argparse.Namespace, passthrough: list[str],
               sources: Optional[dict] = None) -> list[tuple[Path, Any]]:
    """(run folder, Config) for every run of the sweep, in run order (the ceiling last). Raises
    ConfigError for a bad option, before anything runs. ``sources``, if given, receives for each folder
    what its Config is built from, (task, config file, overrides): a Config cannot be pickled (its
    section classes are made at run time), so a run in another process rebuilds it from these."""
    task, config_file, overrides, want_help = parse_cli(passthrough)
    if want_help:
        raise ConfigError(f"--help after '--' is uda-train's: run uda-train --task {args.task} --help to list its options")
    if task is not None and task != args.task:
        raise ConfigError(f"--task {task} after '--' contradicts the sweep's --task {args.task}; give it once")
    clash = [k for k in SWEEP_KEYS if k in overrides]
    if clash:
        print(f"note: {', '.join('--' + k for k in clash)} after '--' is replaced in every run by the sweep's own "
              f"(--out, --seeds, --num_labeled)", file=sys.stderr)
    if "uda_bt" in args.methods or any(base == "uda_bt" for base, _ in args.variants.values()):
        if not args.bt_file:
            raise ConfigError("method uda_bt needs --bt_file PATH (precomputed back-translated copies of the "
                              "unlabelled texts, made by uda-augment); give it or drop uda_bt from --methods")
        if not Path(args.bt_file).expanduser().is_file():
            raise ConfigError(f"--bt_file '{args.bt_file}' does not exist; give the file of back-translated copies "
                              f"made by uda-augment")
    quick = TASKS[args.task].quick if args.quick else {}
    out = Path(args.out)
    runs: list[tuple[str, Optional[int], int]] = []
    for n in args.num_labeled:
        for seed in args.seeds:
            runs.extend((m, n, seed) for m in args.methods if m not in ("ceiling", "setfit"))
    if "ceiling" in args.methods:
        runs.extend(("ceiling", None, seed) for seed in args.seeds)
    plan = []
    for method, n, seed in runs:
        folder = out / run_name(method, n, seed)
        run_over = {**overrides, **quick}
        run_over["data.num_labeled"] = "0" if n is None else str(n)  # 0: every labelled example of the pool
        if args.reference_split_seed is not None and seed != args.reference_split_seed:
            run_over["data.id_order_file"] = "none"  # a random labelled set drawn from this seed
        run_over.update(method_overrides(method, args.bt_file, TASKS[args.task].plain, args.variants))
        run_over.update({"seed": str(seed), "output_dir": str(folder), "report_to": "none"})
        plan.append((folder, build_config(args.task, config_file, run_over)))
        if sources is not None:
            sources[folder] = (args.task, config_file, run_over)
    return plan


def id_source(out: Path, n: int, seed: int) -> Optional[Path]:
    """The run folder (same N and seed) whose labeled_ids.txt / dev_ids.txt / config.yaml setfit reads:
    the first of ID_SOURCES, then any other ``uda*`` run, that holds all three files."""
    names = [run_name(m, n, seed) for m in ID_SOURCES]
    names += sorted(p.name for p in out.glob(f"uda*-n{'all' if n is None else n}-seed{seed}") if p.name not in names)
    for name in names:
        folder = out / name
        if all((folder / f).is_file() for f in ("labeled_ids.txt", "dev_ids.txt", "config.yaml")):
            return folder
    return None


def setfit_plan(args: argparse.Namespace) -> list[tuple[Path, int, int]]:
    """(run folder, N, seed) of every setfit run. Raises ConfigError when a run would have no labelled
    ids to read: neither a method of this sweep nor a run already on disk gives that N and seed."""
    if "setfit" not in args.methods:
        return []
    out = Path(args.out)
    sources = [m for m in args.methods if m in ID_SOURCES]
    plan = []
    for n in args.num_labeled:
        for seed in args.seeds:
            folder = out / run_name("setfit", n, seed)
            if not sources and not (folder / "results.json").exists() and id_source(out, n, seed) is None:
                raise ConfigError(
                    f"method setfit trains on the labelled ids of the supervised/UDA run with the same N and seed, "
                    f"and there is none for N={n}, seed {seed} under {out}; add one of {', '.join(ID_SOURCES)} to "
                    f"--methods (it runs first)")
            plan.append((folder, n, seed))
    return plan


def run_setfit(folder: Path, n: int, seed: int, args: argparse.Namespace) -> Optional[str]:
    """Run the SetFit baseline (``python -m tasks.text.setfit_baseline``, the module of this installed
    package or checkout) in its own process; an error message, or None."""
    import os
    import subprocess

    source = id_source(Path(args.out), n, seed)
    if source is None:
        return (f"no run with N={n}, seed {seed} under {args.out} wrote labeled_ids.txt, dev_ids.txt and "
                f"config.yaml, so setfit has no labelled set to train on")
    cmd = [sys.executable, "-m", "tasks.text.setfit_baseline", "--run_dir", str(source),
           "--out", str(folder), "--quiet", *(SETFIT_QUICK if args.quick else [])]
    # the child imports this very package: the folder that holds it goes first on its path (a checkout
    # that is not installed, or a command started from another folder)
    root = str(Path(tasks.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    print(f"  setfit on the ids of {source.name}", flush=True)
    rc = subprocess.run(cmd, env=env).returncode
    return None if rc == 0 else f"the SetFit baseline exited with status {rc} (command: {' '.join(cmd)})"


def _minutes(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


def finished_line(folder: Path, task: str, seconds: Optional[float] = None) -> str:
    """The end of a run's progress line: ``in 15.2 min, accuracy 84.6`` (the run's wall time, from its
    results.json, else ``seconds``; its first headline test metric in %)."""
    spec = TASKS[task]
    try:
        r = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        r = {}
    secs = r.get("total_seconds", seconds)
    text = "" if secs is None else f" in {_minutes(float(secs))}"
    metric = spec.plots[0]
    value = (r.get("test") or {}).get(metric)
    if value is not None:
        text += f", {dict(spec.metrics)[metric]} {float(value) * spec.scale:.1f}"
    return text


def log_path(folder: Path) -> Path:
    """Console output of a run started by run_parallel: <out>/<run name>.log."""
    return folder.parent / f"{folder.name}.log"


def _run_in_child(folder: str, source: tuple, progress: str = "") -> Optional[str]:
    """One run in a fresh process (``run_parallel``): one CPU thread, its console output appended to
    ``<folder>.log`` beside the run folder (the trainer refuses a folder holding files it did not
    write); an error message, or None. ``progress`` ("[3/16]") starts the line it prints on the
    sweep's stdout when the run starts."""
    import os
    import traceback

    os.environ.setdefault("TQDM_MININTERVAL", "30")  # a progress line every 30 s in the log, not every 0.1 s
    log = open(log_path(Path(folder)), "a", encoding="utf-8")
    print(f"{progress} start {Path(folder).name}; output in {log_path(Path(folder))}".lstrip(), flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)  # file descriptors, so tqdm and native libraries write there too
    os.dup2(log.fileno(), 2)
    import torch

    torch.set_num_threads(1)
    from uda.train import train

    try:
        cfg = build_config(*source)
        train(cfg, get_task(cfg.task))
    except KeyboardInterrupt as e:  # the parent's SIGTERM (see _run_pool); RunStopped says what was saved
        print(f"stopped: {e}", flush=True)
        return f"{STOPPED}{str(e) or 'stopped at once; its last checkpoint stands'}"
    except Exception as e:  # noqa: BLE001: reported by the parent with the run's name; the log has the trace
        traceback.print_exc()
        return f"{type(e).__name__}: {e}"
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return None


STOPPED = "stopped: "  # how _run_in_child reports a run that a stop request ended


def _child_signals() -> None:
    """A pool process's signal handling: Ctrl-C at the terminal reaches every process of the group, but
    only the parent decides (it asks its running children to stop with SIGTERM, see _run_pool); SIGTERM
    outside the training loop (which saves and stops on it) ends the run as a KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def run_parallel(todo: list[tuple[int, Path, Any]], total: int, jobs: int, sources: dict, task: str) -> int:
    """Runs ``todo`` (index, folder, Config; the Config rebuilt in the child from ``sources[folder]``,
    see :func:`build_plan`) ``jobs`` at a time, each in a fresh spawned process
    (nothing shared: its own CUDA context, its own random state); returns the number of failed runs.
    A failed run is reported and the others go on (its folder keeps what it wrote: rerun the sweep to
    continue it from its last checkpoint)."""
    import os

    # inherited by the children (one thread each, `jobs` cores in all), and put back afterwards so that
    # what this process starts later (the setfit baselines) gets the user's settings
    one_thread = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    saved = {k: os.environ.get(k) for k in one_thread}
    os.environ.update(one_thread)
    try:
        return _run_pool(todo, total, jobs, sources, task)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run_pool(todo: list[tuple[int, Path, Any]], total: int, jobs: int, sources: dict, task: str) -> int:
    """run_parallel's pool: submits every run, reports each as it ends; the number of failed runs.
    Ctrl-C or SIGTERM: the queued runs are dropped, the running ones asked to stop (SIGTERM: each saves a
    checkpoint of the step it is in) and waited for, then RunStopped is raised."""
    import multiprocessing
    import os
    from concurrent.futures import CancelledError, ProcessPoolExecutor, as_completed

    from uda.train import RunStopped

    failed, stopping = 0, False
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                             max_tasks_per_child=1, initializer=_child_signals) as pool:
        futures = {}
        for i, folder, _ in todo:
            futures[pool.submit(_run_in_child, str(folder), sources[folder], f"[{i}/{total}]")] = (i, folder)
            print(f"[{i}/{total}] queued {folder.name}", flush=True)
        pending = set(futures)
        while pending:
            try:
                for fut in as_completed(pending):
                    pending.discard(fut)
                    i, folder = futures[fut]
                    try:
                        err = fut.result()
                    except CancelledError:
                        continue  # queued when the stop came: it never started
                    except Exception as e:  # noqa: BLE001: the child died (killed, out of memory)
                        err = f"the run's process died: {type(e).__name__}: {e}"
                    if err and err.startswith(STOPPED):
                        print(f"[{i}/{total}] stopped {folder.name}: {err[len(STOPPED):]}", flush=True)
                    elif err:
                        failed += 1
                        print(f"[{i}/{total}] error in {folder.name}: {err} (see {log_path(folder)})", file=sys.stderr,
                              flush=True)
                    else:
                        print(f"[{i}/{total}] done {folder.name}{finished_line(folder, task)}", flush=True)
            except KeyboardInterrupt:
                if stopping:
                    raise  # a second Ctrl-C: leave at once
                stopping = True
                print("stopping: queued runs dropped, running runs asked to save and stop ...", flush=True)
                for fut in pending:
                    fut.cancel()  # only those not started yet
                for child in multiprocessing.active_children():
                    os.kill(child.pid, signal.SIGTERM)
    if stopping:
        raise RunStopped(f"the sweep was stopped; {failed} run(s) failed before", signal.SIGINT)
    return failed


def parser() -> argparse.ArgumentParser:
    """uda-compare's options (every one with its help)."""
    ap = argparse.ArgumentParser(prog="uda-compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 usage="%(prog)s --task TASK --out DIR [options] [-- uda-train options]")
    ap.add_argument("--task", required=True, choices=sorted(TASKS), help="task of every run (and its metrics)")
    ap.add_argument("--out", required=True,
                    help="folder for the runs (<method>-n<N>-seed<S>) and the summary; the same command "
                         "continues an interrupted sweep in it")
    ap.add_argument("--num_labeled", type=parse_n, nargs="+", metavar="N",
                    help="labelled-set sizes N (data.num_labeled of each run), or 'all' for every labelled example "
                         "of the pool (default: imdb and text_classification 20 100 1000, squad_v2 64 256 1024)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], metavar="S",
                    help="seeds: each one draws its own labelled set and initialisation (default: 0 1 2)")
    ap.add_argument("--methods", nargs="+", metavar="METHOD",
                    help=f"of {', '.join(METHODS)} and the --variant names (default: imdb and text_classification "
                         f"supervised uda_tfidf uda_bt ceiling; squad_v2 supervised uda); see the list above")
    ap.add_argument("--variant", nargs=3, action="append", default=[], metavar=("NAME", "BASE", "OPTIONS"),
                    help="a method of your own: BASE (one of the methods above) with uda-train OPTIONS laid over "
                         "it, e.g. --variant uda_bt_conf uda_bt '--uda.confidence 0.8'; name it in --methods too")
    ap.add_argument("--compare", nargs=2, action="append", default=[], metavar=("FOLDER", "LABEL"),
                    help="draw another sweep's curves (its summary.json) on the plots too, as 'LABEL: method'")
    ap.add_argument("--bt_file", help="precomputed back-translated copies (jsonl from uda-augment) for uda_bt")
    ap.add_argument("--reference_split_seed", type=int, metavar="S",
                    help="only this seed keeps the config's data.id_order_file (the reference labelled split); the "
                         "other seeds draw their labelled set at random from the seed. Default: every seed keeps "
                         "the config as it is")
    ap.add_argument("--jobs", type=int, default=1,
                    help="runs at once, each in its own process with one CPU thread and its output in "
                         "<out>/<run name>.log (default 1: one after another, in this process)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke-test sizes (4 steps, small dev/test/unlabelled subsets; SetFit 2 iterations): "
                         "checks the pipeline, gives no numbers worth reading")
    ap.add_argument("--summarize_only", action="store_true",
                    help="run nothing: only rebuild the summary and plots from the finished runs under --out")
    return ap


def parse_args(own: list[str]) -> argparse.Namespace:
    ap = parser()
    args = ap.parse_args(own)
    spec = TASKS[args.task]
    args.num_labeled = list(dict.fromkeys(args.num_labeled or spec.default_num_labeled))  # a repeat would run twice
    args.seeds = list(dict.fromkeys(args.seeds))
    args.methods = list(dict.fromkeys(args.methods or spec.default_methods))
    args.variants = {}
    for name, base, options in args.variant:
        if not re.fullmatch(r"[a-z0-9_]+", name) or name in METHODS:
            ap.error(f"--variant name '{name}': use lower-case letters, digits and '_', and not a built-in method's name")
        if base not in METHODS or base in ("setfit", "ceiling"):
            ap.error(f"--variant {name}: base '{base}' must be one of {', '.join(m for m in METHODS if m not in ('setfit', 'ceiling'))}")
        try:
            _, _, own, _ = parse_cli(shlex.split(options))
        except ConfigError as e:
            ap.error(f"--variant {name}: {e}")
        args.variants[name] = (base, own)
    unknown = [m for m in args.methods if m not in METHODS and m not in args.variants]
    if unknown:
        ap.error(f"--methods {' '.join(unknown)}: not a method ({', '.join(METHODS)}) nor a --variant name")
    if args.jobs < 1:
        ap.error(f"--jobs must be >= 1, got {args.jobs}")
    return args


def parse_n(text: str) -> Optional[int]:
    """A --num_labeled value: a positive integer, or 'all' (None: every labelled example of the pool)."""
    if text.strip().lower() == "all":
        return None
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of labelled examples or 'all'") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n}: N must be >= 1, or 'all' for every labelled example of the pool")
    return n


_RESUME_NOTE = ("sweep stopped. Run the same command again: finished runs are skipped, stopped ones continue "
                "from their last checkpoint")


def setfit_missing_error(args: argparse.Namespace, baselines: list) -> Optional[str]:
    """When a setfit run is still to do and the setfit package (or sentence-transformers) is missing:
    the message that says how to install it; else None. Checked before any run starts."""
    if not any(not (folder / "results.json").exists() for folder, _, _ in baselines):
        return None
    from tasks.text.setfit_baseline import INSTALL_HINT, setfit_missing

    missing = setfit_missing()
    if missing is None:
        return None
    return (f"method setfit needs the {missing} package, which is not installed: {INSTALL_HINT}; "
            f"or drop setfit from --methods")


def main(argv: Optional[list[str]] = None) -> int:
    """``uda-compare`` (argv: its options; default sys.argv[1:]); the exit status. While it runs, SIGTERM
    (``kill``, ``timeout``, a scheduler) stops the sweep as Ctrl-C does: the run under way saves a
    checkpoint of its step, and the same command continues it."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    except ValueError:  # not the main thread: leave the signals alone
        previous = None
    try:
        return _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str]) -> int:
    cut = argv.index("--") if "--" in argv else len(argv)
    own, passthrough = argv[:cut], argv[cut + 1:]
    args = parse_args(own)
    out = Path(args.out)
    failed = 0
    if not args.summarize_only:
        try:
            sources: dict = {}
            plan = build_plan(args, passthrough, sources)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        from uda.checkpoint import CheckpointError
        from uda.data import DataError
        from uda.hub import OfflineError
        from uda.train import NonFiniteLossError, RunStopped, train

        try:
            baselines = setfit_plan(args)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        err = setfit_missing_error(args, baselines)
        if err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        out.mkdir(parents=True, exist_ok=True)
        total = len(plan) + len(baselines)
        todo = []
        for i, (folder, cfg) in enumerate(plan, start=1):
            if (folder / "results.json").exists():
                print(f"[{i}/{total}] skip {folder.name}: already finished", flush=True)
            else:
                todo.append((i, folder, cfg))
        if args.jobs > 1:
            try:
                failed = run_parallel(todo, total, args.jobs, sources, args.task)
            except RunStopped:
                print(_RESUME_NOTE, file=sys.stderr)
                return 128 + signal.SIGINT
        else:
            for i, folder, cfg in todo:
                print(f"[{i}/{total}] start {folder.name}", flush=True)
                t0 = time.time()
                try:
                    train(cfg, get_task(cfg.task))
                except (ConfigError, DataError, OfflineError, CheckpointError, NonFiniteLossError) as e:
                    print(f"[{i}/{total}] error in {folder.name}: {e}", file=sys.stderr)
                    return 2
                except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM; RunStopped says what was saved
                    said = str(e) or "stopped at once; its last checkpoint stands"
                    print(f"[{i}/{total}] stopped {folder.name}: {said}", file=sys.stderr)
                    print(_RESUME_NOTE, file=sys.stderr)
                    return 128 + getattr(e, "signum", signal.SIGINT)
                print(f"[{i}/{total}] done {folder.name}{finished_line(folder, args.task, time.time() - t0)}",
                      flush=True)
        if failed:  # the others finished: summarise them, but run no baseline on a missing run's ids
            print(f"{failed} run(s) failed (above); the summary holds the finished runs only. Rerun the same "
                  f"command to run what is missing", file=sys.stderr)
            baselines = []
        for i, (folder, n, seed) in enumerate(baselines, start=len(plan) + 1):
            if (folder / "results.json").exists():
                print(f"[{i}/{total}] skip {folder.name}: already finished", flush=True)
                continue
            print(f"[{i}/{total}] start {folder.name}", flush=True)
            t0 = time.time()
            err = run_setfit(folder, n, seed, args)
            if err:
                print(f"[{i}/{total}] error in {folder.name}: {err}", file=sys.stderr)
                return 2
            print(f"[{i}/{total}] done {folder.name}{finished_line(folder, args.task, time.time() - t0)}", flush=True)
    rows = collect(out, args.task) if out.is_dir() else []
    if not rows:
        print(f"no finished runs under {out}", file=sys.stderr)
        return 1
    table = summarize(rows, args.task)
    written = write_summary(out, rows, table, args.task, compared(args.compare))
    print((out / "summary.md").read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(p) for p in written))
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
