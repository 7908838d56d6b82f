"""The sweep's figures: one ``<metric>_vs_num_labeled.png`` per headline metric (mean ± std over seeds
against log N, the ceiling as a dashed line) and ``training_curves.png`` (the losses against step, one
line per run). They need matplotlib; :func:`have_matplotlib` says whether it is there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from uda_compare.methods import METHODS, TASKS


def have_matplotlib() -> bool:
    """Whether matplotlib can be imported (found without importing it)."""
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


def _x_of(t: dict) -> Any:
    """Where a table row sits on the N axis: 'all' at its number of training examples."""
    return t["num_train"] if t["num_labeled"] == "all" else t["num_labeled"]


def _on_curve(t: dict, method_pts: list[dict]) -> bool:
    """Whether a row is a point of its method's curve; else (a lone 'all', the ceiling) a line across."""
    return t["num_labeled"] != "all" or (t["num_train"] is not None and len(method_pts) > 1)


def plot_metric(path: Path, table: list[dict], task: str, metric: str) -> None:
    """One metric's mean ± std against N (log scale), a curve per method; a compared sweep's dashed."""
    spec = TASKS[task]
    label = dict(spec.metrics)[metric]
    plt = _pyplot()
    colors = _colors(sorted({t["method"] for t in table}))
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    by_method = {m: [t for t in table if t["method"] == m and f"{metric}_mean" in t] for m in {t["method"] for t in table}}
    for method in sorted(by_method, key=lambda m: (METHODS + [m]).index(m)):
        pts = by_method[method]
        curve = sorted([t for t in pts if _on_curve(t, pts)], key=lambda t: _x_of(t))
        if curve:
            ax.errorbar([_x_of(t) for t in curve], [t[f"{metric}_mean"] for t in curve],
                        yerr=[t[f"{metric}_std"] for t in curve], marker="o", capsize=3, color=colors[method],
                        ls="--" if ": " in method else "-", label=f"{method} ({'/'.join(str(t['seeds']) for t in curve)} seeds)")
        for t in pts:
            if not _on_curve(t, pts):  # the ceiling: one value, drawn across every N
                m, s = t[f"{metric}_mean"], t[f"{metric}_std"]
                ax.axhline(m, ls="--", color=colors[method],
                           label=f"{method}: all {t['num_train']} labelled ({t['seeds']} seeds)")
                if s > 0:
                    ax.axhspan(m - s, m + s, color=colors[method], alpha=0.12, lw=0)
    nothing = [t["answer_nothing"] for t in table if "answer_nothing" in t]
    if metric in ("f1", "exact") and nothing:
        ax.axhline(sum(nothing) / len(nothing), ls=":", color="black",
                   label=f"answer nothing ({sum(nothing) / len(nothing):.1f})")
    _n_axis(ax, table, by_method)
    ax.set_xlabel(f"{spec.unit} (N, log scale)")
    ax.set_ylabel(f"test {label} (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{spec.title}: test {label} against N (mean ± std over seeds)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _n_axis(ax: Any, table: list[dict], by_method: dict[str, list[dict]]) -> None:
    """The N axis: log scale, a tick at every N of a curve ('all (n)' for the all-labels points)."""
    import matplotlib.ticker

    ns = sorted({_x_of(t) for pts in by_method.values() for t in pts if _on_curve(t, pts)})
    if not ns:
        return
    alls = {_x_of(t) for pts in by_method.values() for t in pts if t["num_labeled"] == "all" and _on_curve(t, pts)}
    ax.set_xscale("log")
    ax.set_xticks(ns)
    ax.set_xticklabels([f"all ({n})" if n in alls and n not in
                        {t["num_labeled"] for t in table} else str(n) for n in ns])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlim(ns[0] / 1.5, ns[-1] * 1.5)


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
