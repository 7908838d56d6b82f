#!/usr/bin/env python
"""Training and evaluation throughput of the library against a bare PyTorch loop, in one process.

    python benchmarks/throughput.py --model minilm --data ../shared/data/imdb --out benchmarks/results/throughput

What is compared (same model, same batch shapes, same device, same dtype):
- library UDA step: ``uda.train.train`` for N steps (collation with tokenisation and TF-IDF
  augmentation, TSA, consistency loss, accelerate, clipping, AdamW, logging) -> the median of the
  examples/s logged in metrics.jsonl per window, the first (warm-up) window dropped;
- bare UDA step: a plain loop over pre-tokenised tensors doing exactly the same forward passes
  (labelled with graph, original without graph, augmented with graph), the same losses, backward,
  clip and AdamW step, timed step by step (the median step after two warm-up steps);
- the same two for the supervised-only step (lambda_u = 0);
- evaluation at each of --eval_lengths: the library's ``task.evaluate`` (tokenisation included) vs a
  bare no-grad loop over the same length-sorted, dynamically padded batches (tokenised beforehand).
  Once, outside the rounds: that bare loop vs one over batches in input order padded to max length
  (the effect of length-sorted dynamic padding), each the fastest of 3 timings taken in turn.

Library and bare loop are measured in turn, --rounds times (library, bare, bare, library, library, bare,
...: the order alternates, after --warmup_rounds rounds that are not counted, and evaluation is warmed
up once for each): on
this shared 2-core machine one timing of either moves by 5-15% from one minute to the next, more
than the overhead being measured. So each ratio compares the median step time (training; the
library logs every step for this, and that logging is counted in its time) or the median evaluation
time, pooled over the interleaved rounds; the lower quartiles (training) and the fastest timings
(evaluation) are given beside them. This machine is a virtual one whose host takes some of its CPU time away (steal
time in /proc/stat), so each ratio is also given in process CPU time (the median step's, the median
evaluation's), though with two threads a thread waiting at a barrier for a descheduled one spins,
so CPU time too grows with the load. Medians and every step's and
round's times are in results.json too. Every number is measured in this process.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def bare_step_times(model, tok, texts_l, labels, texts_u, texts_a, batch, ratio, steps, max_length, uda, dtype):
    """Seconds of each step of a bare loop doing the same passes on pre-tokenised, pre-padded tensors."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    enc = lambda t: tok(t, truncation=True, max_length=max_length, padding=True, return_tensors="pt")  # noqa: E731
    batches = []
    for s in range(steps + 2):
        i = (s * batch) % max(len(texts_l) - batch, 1)
        j = (s * batch * ratio) % max(len(texts_u) - batch * ratio, 1)
        lab = enc(texts_l[i:i + batch])
        y = torch.tensor(labels[i:i + batch])
        ori = enc(texts_u[j:j + batch * ratio]) if uda else None
        aug = enc(texts_a[j:j + batch * ratio]) if uda else None
        batches.append((lab, y, ori, aug))
    model.train()
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if dtype == "bf16" else torch.autocast("cpu", enabled=False)
    times, cpu = [], []
    for s, (lab, y, ori, aug) in enumerate(batches):
        t0, c0 = time.perf_counter(), time.process_time()
        with autocast:
            logits = model(**lab).logits.float()
            loss = F.cross_entropy(logits, y)
            if uda:
                with torch.no_grad():
                    target = model(**ori).logits.float().softmax(-1)
                aug_logp = model(**aug).logits.float().log_softmax(-1)
                loss = loss + (target * (target.clamp_min(1e-12).log() - aug_logp)).sum(-1).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return times[2:], cpu[2:]  # the first two are warm-up


def library_step_times(args, uda: bool, out: Path) -> tuple[list[float], list[float], float]:
    """Wall seconds of each library training step (from metrics.jsonl, logged every step), the CPU
    seconds of each (the process's CPU time between two log calls, which end each step), the first two
    (warm-up) dropped, and the run's wall time."""
    import tasks  # noqa: F401 (registers the built-in tasks)
    from uda.config import build_config
    from uda.metrics_log import MetricsLogger
    from uda.task import get_task
    from uda.train import train

    run = out / ("lib_uda" if uda else "lib_sup")
    log_every = 1  # every step timed (the logging is counted in the library's time)
    examples = args.batch * (1 + (args.ratio if uda else 0))
    cfg = build_config("imdb", None, {
        "model.name_or_path": args.model, "model.max_length": str(args.max_length), "data.path": args.data,
        "data.id_order_file": "uda_train_id_list.txt", "data.dev_size": "0", "data.max_test": "2",
        "data.max_unlabeled": "2000", "train.max_steps": str(args.steps + 2), "train.warmup_steps": "0",
        "train.log_every": str(log_every), "train.eval_every": str(10 ** 6), "train.batch_size": str(args.batch),
        "train.mixed_precision": args.precision, "uda.unsup_ratio": str(args.ratio),
        "uda.lambda_u": "1" if uda else "0", "report_to": "none", "output_dir": str(run), "overwrite": "true",
        "eval.test": "false",
    })
    marks = []  # process CPU time at each step's log call
    log = MetricsLogger.log

    def log_and_mark(self, step, scalars):
        log(self, step, scalars)
        marks.append(time.process_time())

    MetricsLogger.log = log_and_mark  # measurement only: restored below
    t0 = time.perf_counter()
    try:
        train(cfg, get_task(cfg.task))
    finally:
        MetricsLogger.log = log
    wall = time.perf_counter() - t0
    rows = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines() if "train/examples_per_sec" in l]
    cpu = [b - a for a, b in zip(marks, marks[1:])]  # step k's CPU time: from log k-1 to log k
    return [examples / r["train/examples_per_sec"] for r in rows[2:]], cpu[1:], wall  # warm-up dropped


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _best_times(fns: dict, repeats: int = 3) -> dict:
    """The fastest of ``repeats`` timings of each function, run in turn (a, b, c, a, b, c, ...) so
    that a load passing over the machine hits them alike."""
    best = {k: float("inf") for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            best[k] = min(best[k], _timed(fn))
    return best


def eval_rates(model, tok, texts, labels, batch, max_length, precision, rounds) -> dict:
    """Evaluation at one max length, every loop on the same texts and the same model:
    - library: ``task.evaluate`` of the text-classification task (tokenise, length-sorted batches,
      dynamic padding, sharded inference loop, metrics) through accelerate;
    - bare: a no-grad loop over the same length-sorted batches, tokenised and padded beforehand;
    these two timed in turn ``rounds`` times; ratio = bare / library of the median timings;
    - once: bare vs the same no-grad loop over batches in input order padded to max length (what
      length sorting and dynamic padding save), the fastest of 3 timings of each taken in turn."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    from tasks import get_task
    from uda.evaluation import length_sorted_batches

    AcceleratorState._reset_state(reset_partial_state=True)
    acc = Accelerator(cpu=True, mixed_precision=precision)
    task = get_task("text_classification")
    task.tokenizer, task.max_length, task.label_names = tok, max_length, ["neg", "pos"]
    lib_model = acc.prepare(copy.deepcopy(model))  # accelerate patches forward: the bare loops keep theirs
    lib_model.eval()
    examples = [{"id": str(i), "text": t, "label": y} for i, (t, y) in enumerate(zip(texts, labels))]

    ids = tok(texts, truncation=True, max_length=max_length)["input_ids"]
    sorted_feats = [tok.pad([{"input_ids": ids[i]} for i in b], return_tensors="pt")
                    for b in length_sorted_batches([len(x) for x in ids], batch)]
    maxpad_feats = [tok(texts[i:i + batch], truncation=True, max_length=max_length, padding="max_length",
                        return_tensors="pt") for i in range(0, len(texts), batch)]
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")

    def bare(feats):
        with torch.inference_mode(), autocast:
            for f in feats:
                model(**f)

    def library():
        task.evaluate(lib_model, examples, acc, batch, "bench")

    # warm-up of both: every batch shape met once before the timings. The library tokenises the set at its
    # first evaluation and keeps the ids for the next ones (a run evaluates dev every train.eval_every
    # steps): that first evaluation, tokenisation included, is timed on its own
    first = _timed(library)
    bare(sorted_feats)
    n = len(texts)
    lib_s, bare_s, lib_cpu, bare_cpu = [], [], [], []
    for r in range(rounds):  # in turn, the order alternating from round to round
        for which in ("library", "bare") if r % 2 == 0 else ("bare", "library"):
            c0 = time.process_time()
            if which == "library":
                lib_s.append(_timed(library))
                lib_cpu.append(time.process_time() - c0)
            else:
                bare_s.append(_timed(lambda: bare(sorted_feats)))
                bare_cpu.append(time.process_time() - c0)
    pad = _best_times({"bare": lambda: bare(sorted_feats), "maxpad": lambda: bare(maxpad_feats)})
    lib_m, bare_m = statistics.median(lib_s), statistics.median(bare_s)
    AcceleratorState._reset_state(reset_partial_state=True)
    return {"max_length": max_length, "examples": n, "mean_tokens": sum(len(x) for x in ids) / n,
            "library_examples_per_sec": n / lib_m, "bare_examples_per_sec": n / bare_m, "ratio": bare_m / lib_m,
            "library_first_evaluation_examples_per_sec": n / first,
            "fastest_ratio": min(bare_s) / min(lib_s),
            "cpu_time_ratio": statistics.median(bare_cpu) / statistics.median(lib_cpu),
            "library_seconds": lib_s, "bare_seconds": bare_s,
            "library_cpu_seconds": lib_cpu, "bare_cpu_seconds": bare_cpu,
            "bare_fastest_sorted_examples_per_sec": n / pad["bare"],
            "bare_max_length_padding_examples_per_sec": n / pad["maxpad"],
            "sorted_dynamic_padding_speedup": pad["maxpad"] / pad["bare"]}


def _lower_quartile(xs: list[float]) -> float:
    """The 25th percentile: a step's cost when the machine lets it run, robust to slow outliers (a load
    passing over the machine) and to a lucky fastest step alike."""
    return statistics.quantiles(xs, n=4)[0]


def _cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo ('' where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _paired(bare: list[float], library: list[float], rounds: int) -> float:
    """The median over rounds of bare / library time, each round's times split evenly (training: a round's
    steps, by their median; evaluation: one timing each)."""
    k = len(library) // rounds
    return statistics.median(statistics.median(bare[i * k:(i + 1) * k]) / statistics.median(library[i * k:(i + 1) * k])
                             for i in range(rounds))


def write_report(results: dict, out: Path) -> None:
    """results.md (and the console) from results.json's numbers."""
    st = results["settings"]
    m = results["machine"]
    md = [f"{m['cpu'] or m['device']}, {m['cpu_threads']} torch threads, native bf16: {m['cpu_native_bf16']}, "
          f"precision {st['precision']}.", "",
          f"Library and bare loop in turn (order alternating, after {st.get('warmup_rounds', 0)} warm-up round(s) not "
          f"counted), {st['rounds']} rounds of {st['steps']} training steps and {st['eval_rounds']} evaluation timings "
          "each. Ratio: bare time / library time of the medians pooled over the rounds; beside it the median over "
          "the rounds of each round's own ratio (a round's pair meets the machine in the same minute), and the "
          "ratios of the lower quartiles (training) or fastest timings (evaluation) and of the CPU times (every "
          "step and timing in results.json).", "",
          "| measurement | library (ex/s, median) | bare PyTorch (ex/s, median) | ratio | median of the rounds' ratios | "
          "lower-quartile (training) / fastest (evaluation) ratio | CPU-time ratio (medians) |",
          "|---|---|---|---|---|---|---|"]
    for key, name in (("uda_step", "UDA training step"), ("supervised_step", "supervised-only step")):
        r = results[key]
        md.append(f"| {name} | {r['library_examples_per_sec']:.2f} | {r['bare_examples_per_sec']:.2f} | "
                  f"{r['ratio']:.3f} | {_paired(r['bare_step_seconds'], r['library_step_seconds'], st['rounds']):.3f} | "
                  f"{r['lower_quartile_ratio']:.3f} | {r['cpu_time_ratio']:.3f} |")
    for e in results["evaluation"]:
        md.append(f"| evaluation, max length {e['max_length']} (mean {e['mean_tokens']:.0f} tokens): library "
                  f"`task.evaluate` vs bare no-grad loop on the same batches | {e['library_examples_per_sec']:.1f} | "
                  f"{e['bare_examples_per_sec']:.1f} | "
                  f"{e['ratio']:.3f} | {_paired(e['bare_seconds'], e['library_seconds'], len(e['library_seconds'])):.3f} | "
                  f"{e['fastest_ratio']:.3f} | "
                  f"{e['cpu_time_ratio']:.3f} |")
    md += ["", "| padding, bare no-grad loops | length-sorted dynamic (ex/s) | max-length, input order (ex/s) | speed-up |",
           "|---|---|---|---|"]
    for e in results["evaluation"]:
        md.append(f"| max length {e['max_length']} (mean {e['mean_tokens']:.0f} tokens) | "
                  f"{e['bare_fastest_sorted_examples_per_sec']:.1f} | {e['bare_max_length_padding_examples_per_sec']:.1f} | "
                  f"{e['sorted_dynamic_padding_speedup']:.2f}x |")
    if "peak_rss_mib" in results:
        md.append(f"\npeak resident memory: {results['peak_rss_mib']:.0f} MiB")
    (out / "results.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--data", default=os.environ.get("UDA_DATA_PATH", str(Path(__file__).resolve().parents[2] / "shared/data/imdb")))
    ap.add_argument("--steps", type=int, default=10, help="timed training steps per round (default: 10)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ratio", type=int, default=3)
    ap.add_argument("--max_length", type=int, default=128)
    ap.add_argument("--precision", default="bf16", choices=["no", "bf16"])
    ap.add_argument("--eval_examples", type=int, default=512)
    ap.add_argument("--eval_lengths", type=int, nargs="+", default=[128, 512],
                    help="max lengths at which evaluation is measured (default: 128 512)")
    ap.add_argument("--rounds", type=int, default=5, help="library/bare training measurements taken in turn (default: 5: 50 timed steps of each)")
    ap.add_argument("--report", metavar="RESULTS_JSON",
                    help="measure nothing: write results.md from a results.json this script wrote (into its folder)")
    ap.add_argument("--warmup_rounds", type=int, default=1,
                    help="training rounds of each loop run first and not counted (default 1)")
    ap.add_argument("--eval_rounds", type=int, default=5, help="library/bare evaluation timings taken in turn (default: 5)")
    ap.add_argument("--out", default="results/throughput")
    args = ap.parse_args()
    if args.report:
        write_report(json.loads(Path(args.report).read_text()), Path(args.report).parent)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from augment.word_replace import TfIdfWordReplacement, fit_tfidf_stats
    from tasks.text.task import clean_text
    from uda.data import read_table
    from uda.hub import resolve_model_path

    import numpy as np

    path = resolve_model_path(args.model)
    tok = AutoTokenizer.from_pretrained(path)
    tok.truncation_side = "left"
    rows = read_table(Path(args.data) / "train.jsonl.gz")[:4000:4]  # both classes (neg first, pos after)
    texts = [clean_text(r["text"]) for r in rows]
    labels = [int(r["label"]) for r in rows]
    aug = TfIdfWordReplacement(fit_tfidf_stats(texts), 0.3)
    texts_a = aug(texts, np.random.default_rng(0))

    from uda.devices import cpu_has_native_bf16

    results = {"machine": {"cpu_threads": torch.get_num_threads(), "torch": torch.__version__,
                           "device": "cuda" if torch.cuda.is_available() else "cpu", "cpu": _cpu_name(),
                           "cpu_native_bf16": cpu_has_native_bf16()}, "settings": vars(args)}
    for uda in (True, False):
        lib_times, bare_times, lib_cpu, bare_cpu, walls = [], [], [], [], []
        def library():
            times, cpu, wall = library_step_times(args, uda, out)
            return times, cpu, wall

        def bare():
            torch.manual_seed(0)
            model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2)
            return bare_step_times(model, tok, texts, labels, texts, texts_a, args.batch, args.ratio,
                                   args.steps, args.max_length, uda, args.precision)

        # library and bare loop in turn, so that both meet the same machine; the first --warmup_rounds
        # rounds are not counted (oneDNN builds its kernels for each new batch shape the first time it
        # meets it, which would charge whichever loop goes first), and the order alternates from round to
        # round (library first, then bare first), so that a machine growing faster or slower over the
        # minutes favours neither
        for r in range(args.warmup_rounds + args.rounds):
            first_library = r % 2 == 0
            for which in ("library", "bare") if first_library else ("bare", "library"):
                if which == "library":
                    times, cpu, wall = library()
                    if r >= args.warmup_rounds:
                        lib_times, lib_cpu = lib_times + times, lib_cpu + cpu
                        walls.append(wall)
                else:
                    times, cpu = bare()
                    if r >= args.warmup_rounds:
                        bare_times, bare_cpu = bare_times + times, bare_cpu + cpu
        examples = args.batch * (1 + (args.ratio if uda else 0))
        lib_m, bare_m = statistics.median(lib_times), statistics.median(bare_times)
        lib_q, bare_q = _lower_quartile(lib_times), _lower_quartile(bare_times)
        results["uda_step" if uda else "supervised_step"] = {
            "library_examples_per_sec": examples / lib_m, "bare_examples_per_sec": examples / bare_m,
            "ratio": bare_m / lib_m, "lower_quartile_ratio": bare_q / lib_q,
            "cpu_time_ratio": statistics.median(bare_cpu) / statistics.median(lib_cpu),
            "library_step_seconds": lib_times, "bare_step_seconds": bare_times,
            "library_step_cpu_seconds": lib_cpu, "bare_step_cpu_seconds": bare_cpu, "library_run_wall_seconds": walls}
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2)
    n_eval = args.eval_examples
    results["evaluation"] = [eval_rates(model, tok, texts[:n_eval], labels[:n_eval], 64, length, args.precision,
                                        args.eval_rounds)
                             for length in args.eval_lengths]
    if hasattr(torch, "cpu") and not torch.cuda.is_available():
        import resource

        results["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (out / "results.json").write_text(json.dumps(results, indent=2))
    write_report(results, out)


if __name__ == "__main__":
    main()
