"""``uda-compare``: supervised vs UDA (vs SetFit, vs all labels) over labelled-set sizes N and seeds,
for one task, on your data; one table (mean ± std over seeds), per-seed and per-run tables, plots.

    uda-compare --task text_classification --out runs/compare --num_labeled 96 --seeds 1 2 3 \\
        --methods supervised uda setfit ceiling -- --config configs/recipes/text_fewlabel.yaml --data.path DATA

    uda-compare --task imdb --out runs/imdb_sweep --num_labeled 20 100 1000 --seeds 0 1 2 \\
        --methods supervised uda_tfidf uda_bt ceiling --bt_file BT.jsonl.gz --reference_split_seed 0 \\
        -- --config configs/recipes/imdb_cpu.yaml --data.path ../shared/data/imdb

    uda-compare --task squad_v2 --out runs/qa_sweep --num_labeled 64 256 1024 --seeds 0 1 2 \\
        -- --config configs/recipes/squad_v2_fewlabel.yaml --data.path ../shared/data/squad_v2/dev-v2.0.json

(``python -m uda_compare`` and, from a checkout, ``python benchmarks/sweep.py`` are the same command.)
Everything after ``--`` is passed to every run as uda-train options (``uda-train --task TASK --help``
lists them). Methods (each one a set of options laid over those):

- ``zeroshot``: the config's start evaluated with no training (``--train.max_steps 0``): with
  ``--model.head_init descriptions``, what the label descriptions alone give;
- ``supervised``: supervised only (``--uda.lambda_u 0``), everything else as the config says (a recipe
  with a contrastive stage keeps it: this is the recipe without its consistency loss);
- ``finetune``: plain fine-tuning: supervised only, no Training Signal Annealing and, for text tasks,
  no contrastive or MLM stage and a random head (``--uda.lambda_u 0 --uda.tsa none
  --model.contrastive_iterations none --model.mlm_steps none --model.head_init random
  --model.label_descriptions none``);
  what a user gets from the labels alone;
- ``uda``: UDA as the config says (augmentation included);
- ``uda_tfidf``: UDA with TF-IDF word replacement (``--augment.method tf_idf``, the config's p);
- ``uda_bt``: UDA with precomputed (back-translated) copies (``--augment.method precomputed
  --augment.file <--bt_file>``; see uda-augment);
- ``fixmatch``, ``flexmatch``, ``freematch``, ``softmatch``, ``adamatch``: that consistency method
  (``--uda.method``, docs/algorithm.md) with its own defaults, on the config's augmentation, start and
  schedule; UDA's own options that the config may set (``uda.temperature``, ``uda.confidence``,
  ``uda.target``, ``uda.distribution_alignment``, ``uda.alignment_bank``) are reset for it (each run's
  config.yaml shows what it ran with; a ``--variant`` sets the method's options);
- ``ceiling``: plain fine-tuning (as ``finetune``) on every labelled example of the training pool
  that is not dev (``--data.num_labeled 0``); run once per seed, not per N;
- ``setfit``: the SetFit baseline (uda_compare/setfit_baseline.py) on the labelled and dev ids of the
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
one plot ``<metric>_vs_num_labeled.png`` per headline metric (log N, the ceiling as a dashed line;
with one N, a bar per method with its seeds as dots)
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
import re
import shlex
import signal
import sys
from pathlib import Path
from typing import Optional

from uda.config import ConfigError, parse_cli
from uda.io import quiet_on_closed_pipe
from uda_compare.methods import METHODS, TASKS
from uda_compare.runs import SweepEnded, run_sweep
from uda_compare.summary import collect, compared, summarize, write_summary


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
    """uda-compare's own options (those before '--'), checked, with the task's defaults filled in and
    ``variants``: NAME -> (base method, its uda-train overrides)."""
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
    word = text.strip()
    if word.lower() == "all":
        return None
    if not word.lstrip("+-").isdigit():
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of labelled examples or 'all'")
    if int(word) < 1:
        raise argparse.ArgumentTypeError(f"{int(word)}: N must be >= 1, or 'all' for every labelled example of the pool")
    return int(word)


@quiet_on_closed_pipe
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
    """The sweep (unless --summarize_only), then its summary; the exit status."""
    cut = argv.index("--") if "--" in argv else len(argv)
    own, passthrough = argv[:cut], argv[cut + 1:]
    args = parse_args(own)
    failed = 0
    if not args.summarize_only:
        try:
            failed = run_sweep(args, passthrough)
        except SweepEnded as e:
            return e.status
    return report(Path(args.out), args, failed)


def report(out: Path, args: argparse.Namespace, failed: int) -> int:
    """Writes and prints the summary of the finished runs under ``out``; the exit status: 1 when there is
    none, 2 when ``failed`` runs failed, else 0."""
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
