"""The sweep's figures: one ``<metric>_vs_num_labeled.png`` per headline metric and
``training_curves.png`` (the losses against step, one line per run). With several N the metric's
figure has a line per method, mean ± std over seeds against log N (the ceiling as a dashed line);
with one N a bar per method (mean, the seeds' std as an error bar, each seed's value as a dot). They
need matplotlib; :func:`have_matplotlib` says whether it is there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

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
    """A colour per method: tab10 in the order of METHODS among the methods drawn (METHODS has more than
    ten, so indexing it whole would give two methods of one figure the same colour)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    base = {m: m.split(": ", 1)[-1] for m in methods}  # a compared sweep's method keeps its method's colour
    present = set(base.values())
    known = [m for m in METHODS if m in present] + sorted(present - set(METHODS))
    return {m: cmap(known.index(base[m]) % 10) for m in methods}


def seeds_text(counts: list[int]) -> str:
    """'1 seed', '3 seeds', or '2/3 seeds' when the points of a curve have different numbers of seeds."""
    if len(set(counts)) == 1:
        return f"{counts[0]} seed{'' if counts[0] == 1 else 's'}"
    return f"{'/'.join(str(k) for k in counts)} seeds"


def _spread(table: list[dict]) -> str:
    """What a figure's error bars are: 'mean ± std over 3 seeds', or '1 seed' (no spread to show)."""
    ks = sorted({int(t["seeds"]) for t in table})
    if not ks:
        return "no runs"
    if ks == [1]:
        return "1 seed"
    span = str(ks[0]) if len(ks) == 1 else f"{ks[0]}-{ks[-1]}"
    return f"mean ± std over {span} seeds"


def _x_of(t: dict) -> Any:
    """Where a table row sits on the N axis: 'all' at its number of training examples."""
    return t["num_train"] if t["num_labeled"] == "all" else t["num_labeled"]


def _on_curve(t: dict, method_pts: list[dict]) -> bool:
    """Whether a row is a point of its method's curve; else (a lone 'all', the ceiling) a line across."""
    return t["num_labeled"] != "all" or (t["num_train"] is not None and len(method_pts) > 1)


def _method_order(m: str) -> tuple[int, str]:
    """The order of methods in a figure: METHODS', then a compared sweep's 'LABEL: method' by name."""
    return (METHODS + [m]).index(m), m


def plot_metric(path: Path, table: list[dict], task: str, metric: str, runs: Optional[list[dict]] = None) -> None:
    """One metric's figure: with several N, mean ± std against N (log scale), a curve per method, a
    compared sweep's dashed; with one N, a bar per method, each seed's value (from ``runs``, the
    collected rows of the runs, when given) a dot on it."""
    spec = TASKS[task]
    label = dict(spec.metrics)[metric]
    plt = _pyplot()
    colors = _colors(sorted({t["method"] for t in table}))
    by_method = {m: [t for t in table if t["method"] == m and f"{metric}_mean" in t] for m in {t["method"] for t in table}}
    shown = [t for pts in by_method.values() for t in pts]
    ns = {_x_of(t) for pts in by_method.values() for t in pts if _on_curve(t, pts)}
    if len(ns) > 1:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        _lines(ax, by_method, colors, metric)
        _n_axis(ax, table, by_method)
        ax.set_xlabel(f"{spec.unit} (N, log scale)")
        ax.set_title(f"{spec.title}: test {label} against N ({_spread(shown)})", fontsize=10)
    else:  # one N: points in a column would overlap, bars side by side do not
        bars = sorted(shown, key=lambda t: (_method_order(t["method"]), t["num_labeled"] == "all"))
        fig, ax = plt.subplots(figsize=(max(6.5, 1.5 + 0.8 * len(bars)), 4.2))
        _bars(ax, bars, colors, metric, _seed_values(runs or [], metric, spec.scale))
        sizes = sorted({t["num_labeled"] for t in bars if t["num_labeled"] != "all"})
        at = f"{sizes[0]} {spec.unit}" if sizes else f"all {spec.unit}"
        dots = "; dots: single seeds" if runs else ""
        ax.set_title(f"{spec.title}: test {label} with {at}\n({_spread(shown)}{dots})", fontsize=10)
    nothing = [t["answer_nothing"] for t in table if "answer_nothing" in t]
    if metric in ("f1", "exact") and nothing:
        ax.axhline(sum(nothing) / len(nothing), ls=":", color="black",
                   label=f"answer nothing ({sum(nothing) / len(nothing):.1f})")
    ax.set_ylabel(f"test {label} (%)")
    ax.grid(alpha=0.3, axis="both" if len(ns) > 1 else "y")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _lines(ax: Any, by_method: dict[str, list[dict]], colors: dict[str, Any], metric: str) -> None:
    """A curve per method against N (a compared sweep's dashed); a lone 'all' row (the ceiling) a dashed
    line across every N, its std a band."""
    for method in sorted(by_method, key=_method_order):
        pts = by_method[method]
        curve = sorted([t for t in pts if _on_curve(t, pts)], key=lambda t: _x_of(t))
        if curve:
            ax.errorbar([_x_of(t) for t in curve], [t[f"{metric}_mean"] for t in curve],
                        yerr=[t[f"{metric}_std"] for t in curve], marker="o", capsize=3, color=colors[method],
                        ls="--" if ": " in method else "-",
                        label=f"{method} ({seeds_text([int(t['seeds']) for t in curve])})")
        for t in pts:
            if not _on_curve(t, pts):  # the ceiling: one value, drawn across every N
                m, s = t[f"{metric}_mean"], t[f"{metric}_std"]
                ax.axhline(m, ls="--", color=colors[method],
                           label=f"{method}: all {t['num_train']} labelled ({seeds_text([int(t['seeds'])])})")
                if s > 0:
                    ax.axhspan(m - s, m + s, color=colors[method], alpha=0.12, lw=0)


def _seed_values(runs: list[dict], metric: str, scale: float) -> dict[tuple, list[float]]:
    """(method, N) -> each run's value of ``metric`` in percent, in seed order."""
    values: dict[tuple, list[float]] = {}
    for r in sorted(runs, key=lambda r: r["seed"]):
        if r.get(metric) is not None:
            values.setdefault((r["method"], r["num_labeled"]), []).append(float(r[metric]) * scale)
    return values


def _bar_label(t: dict) -> str:
    """A bar's tick label: the method ('LABEL:' of a compared sweep on a line of its own), and 'all (n)'
    under a row of every labelled example."""
    text = t["method"].replace(": ", ":\n", 1)
    return f"{text}\nall ({t['num_train']})" if t["num_labeled"] == "all" else text


def _bars(ax: Any, bars: list[dict], colors: dict[str, Any], metric: str,
          seed_values: dict[tuple, list[float]]) -> None:
    """A bar per table row, labelled by its method: the mean (written above it), the seeds' std as an error
    bar, each seed's value a dot; a compared sweep's bars hatched."""
    top = 1.0
    for x, t in enumerate(bars):
        m, s = t[f"{metric}_mean"], t[f"{metric}_std"]
        ax.bar(x, m, width=0.6, yerr=s if t["seeds"] > 1 else None, capsize=4, color=colors[t["method"]],
               alpha=0.75, hatch="//" if ": " in t["method"] else None, edgecolor="black", lw=0.5, zorder=2)
        vals = seed_values.get((t["method"], t["num_labeled"]), [])
        if vals:
            offsets = [0.0] if len(vals) == 1 else [-0.18 + 0.36 * i / (len(vals) - 1) for i in range(len(vals))]
            ax.scatter([x + o for o in offsets], vals, s=14, color="black", zorder=3)
        high = max([m + s] + vals)
        ax.annotate(f"{m:.1f}", (x, high), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
                    fontsize=8)
        top = max(top, high)
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels([_bar_label(t) for t in bars], fontsize=8, rotation=30 if len(bars) > 6 else 0,
                       ha="right" if len(bars) > 6 else "center")
    ax.set_xlim(-0.6, len(bars) - 0.4)
    ax.set_ylim(0, top * 1.12)
    ax.set_xlabel("method")


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
               for m in sorted(colors, key=_method_order)]
    axes[0].legend(handles=handles, fontsize=8)
    fig.suptitle("Training curves, one line per run (every N and seed), from metrics.jsonl", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
