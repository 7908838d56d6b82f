"""The sweep's summary: the test metrics of every finished run (:func:`collect`), their mean and sample
std over seeds per method and N (:func:`summarize`), and the files :func:`write_summary` makes of them
(summary.json / .csv / .md, and the plots)."""

from __future__ import annotations

import csv
import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Optional

from uda_compare import plots
from uda_compare.methods import METHODS, TASKS


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
    """Where a run ran ("cpu", "cuda"): the device of results.json's environment; None when it names none."""
    dev = (r.get("environment") or {}).get("device")
    return None if dev is None else str(dev).split(":")[0]


def _n_key(n: Any) -> float:
    return math.inf if n == "all" else float(n)


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
        head = spec.plots[0]
        rows.append({"run": res.parent.name, "method": method, "num_labeled": n_val, "seed": seed_val,
                     **{m: r["test"].get(m) for m, _ in spec.metrics}, "num_train": _num_train(r),
                     f"dev_{head}": (r.get("dev_best") or {}).get(head),  # what chose the step
                     f"last_{head}": (r.get("test_last_step") or {}).get(head),  # what needs no dev set
                     "dev_labels": (r.get("labels") or {}).get("dev_for_selection"),
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
        devs = [r["dev_labels"] for r in rs if r.get("dev_labels") is not None]
        entry["dev_labels"] = round(sum(devs) / len(devs)) if devs else None  # 0: no dev set chose the step
        nothing = [r["answer_nothing"] for r in rs if r.get("answer_nothing") is not None]
        if nothing:
            entry["answer_nothing"] = sum(nothing) / len(nothing)
        for m in _table_keys(task)[:-2]:
            vals = [float(r[m]) * spec.scale for r in rs if r.get(m) is not None]
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


# ----------------------------------------------------------------------------- files

def write_summary(out: Path, rows: list[dict], table: list[dict], task: str,
                  others: Optional[list[dict]] = None) -> list[Path]:
    """summary.json / .csv / .md and the plots (with the rows of ``others``, other sweeps, drawn dashed);
    returns the files written."""
    spec = TASKS[task]
    (out / "summary.json").write_text(json.dumps(
        {"task": task, "units": f"table metrics in percent (results.json test value x {spec.scale:g}); runs: the raw "
                                f"results.json values", "runs": rows, "table": table}, indent=2), encoding="utf-8")
    _write_csv(out / "summary.csv", table, task)
    nothing = sorted({round(t["answer_nothing"], 2) for t in table if "answer_nothing" in t})
    note = (f" Answer-nothing F1 on the test questions (a reader that answers none): "
            f"{', '.join(f'{v:.2f}' for v in nothing)}." if nothing else "")
    (out / "summary.md").write_text(
        f"{spec.title}: test metrics in % (mean ± sample std over seeds, the value alone for a single seed; "
        "model selected on dev; \"labels\": the labelled examples a run used, to train + on dev to choose its step "
        "(0 where no dev set chose it); \"dev\": the selected step's dev score; \"last step\": the test score of the "
        "last step's weights, which needs no dev set). Time: wall seconds of runs that were not resumed, shown "
        "only where all of a row's runs ran on one kind of device (\"ran on\"). "
        f"Runs and raw values: summary.json, summary.csv and each run's results.json.{note}\n\n"
        + mean_table(table, task) + dev_winners(rows, table, task) + per_seed_tables(rows, table, task)
        + run_table(rows, task),
        encoding="utf-8")
    written = [out / "summary.json", out / "summary.csv", out / "summary.md"]
    if not plots.have_matplotlib():
        print("note: no plots: they need matplotlib (pip install matplotlib); the tables are written",
              file=sys.stderr)
        return written
    for metric in spec.plots:
        path = out / f"{metric}_vs_num_labeled.png"
        plots.plot_metric(path, table + (others or []), task, metric, rows)
        written.append(path)
    path = out / "training_curves.png"
    plots.plot_training_curves(path, out, rows)
    written.append(path)
    return written


def _table_keys(task: str) -> list[str]:
    """The values of a table row that get a mean and a std: the task's test metrics, the headline metric on
    dev (at the selected step) and on test at the last step, then the seconds."""
    head = TASKS[task].plots[0]
    return [m for m, _ in TASKS[task].metrics] + [f"dev_{head}", f"last_{head}", "total_seconds", "cpu_seconds"]


def _write_csv(path: Path, table: list[dict], task: str) -> None:
    """summary.csv: a line per (method, N) with every mean and std and where its runs ran."""
    keys = _table_keys(task)
    cols = ["method", "num_labeled", "seeds", "num_train", "dev_labels"]
    cols += [f"{m}_{s}" for m in keys for s in ("mean", "std")]
    cols.append("ran_on")
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for t in table:
            w.writerow({**{c: t.get(c) for c in cols}, "ran_on": _ran_on(t)})


def mean_table(table: list[dict], task: str) -> str:
    """summary.md's main table: a row per (method, N), its labelled examples (train + dev), each metric and
    time as mean ± std over seeds (the value alone for one seed), and where its runs ran."""
    keys = _table_keys(task)
    label = dict(TASKS[task].metrics)[TASKS[task].plots[0]]
    heads = [h for _, h in TASKS[task].metrics] + [f"dev {label}", f"{label}, last step", "time (s)", "CPU (s)",
                                                   "ran on"]
    lines = ["| N | method | seeds | labels (train + dev) | " + " | ".join(heads) + " |",
             "|---" * (4 + len(heads)) + "|"]
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
        lines.append(f"| {_n_cell(t)} | {t['method']} | {t['seeds']} | {_labels_cell(t)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _labels_cell(t: dict) -> str:
    """A row's labelled budget: "20 + 500" (training examples + dev examples that chose the step); "-" where
    a count is not known (results.json of an older version)."""
    train, dev = t.get("num_train"), t.get("dev_labels")
    return "-" if train is None else f"{train} + {'-' if dev is None else dev}"


def dev_winners(rows: list[dict], table: list[dict], task: str) -> str:
    """summary.md's lines under the mean table, one per N: the method with the highest mean dev score of the
    headline metric (the one a dev set alone would pick) and, where supervised ran at that N too, how far it
    is ahead of supervised on test: the mean difference in points over the seeds both ran, and on how many
    of them it was ahead."""
    spec = TASKS[task]
    head = spec.plots[0]
    label = dict(spec.metrics)[head]
    value = {(r["method"], r["num_labeled"], r["seed"]): r.get(head) for r in rows}
    lines = []
    for n in sorted({t["num_labeled"] for t in table}, key=_n_key):
        scored = [t for t in table if t["num_labeled"] == n and f"dev_{head}_mean" in t]
        if not scored:
            continue
        best = max(scored, key=lambda t: t[f"dev_{head}_mean"])  # a tie: the first in the table's order
        text = f"- N = {_n_cell(best)}: {best['method']} has the best dev {label} ({best[f'dev_{head}_mean']:.1f})"
        pairs = [(value.get((best["method"], n, s)), value.get(("supervised", n, s))) for s in best["seed_list"]]
        diffs = [(float(a) - float(b)) * spec.scale for a, b in pairs if a is not None and b is not None]
        if best["method"] != "supervised" and diffs:
            d, k = sum(diffs) / len(diffs), len(diffs)
            side = "level with" if round(d, 1) == 0 else f"{abs(d):.1f} points {'ahead of' if d > 0 else 'behind'}"
            text += (f"; on test it is {side} supervised (mean over the {k} seed{'s' if k > 1 else ''} both ran), "
                     f"ahead on {sum(x > 0 for x in diffs)} of {k}")
        lines.append(text + ".")
    if not lines:
        return ""
    return (f"\nThe best method on dev at each N (highest mean dev {label}), and its test {label} against "
            "supervised, seed by seed:\n\n" + "\n".join(lines) + "\n")


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
