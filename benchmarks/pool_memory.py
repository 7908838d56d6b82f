#!/usr/bin/env python
"""Peak resident memory and setup time against the size of the unlabelled pool: training setup plus
20 steps, with and without a precomputed augmentation file, the first setup (files converted to the
Arrow cache) and a second one on the same files (the cache read).

    python benchmarks/pool_memory.py [--data ../shared/data/imdb] [--sizes 70000 500000 2000000]
        [--model tiny|minilm] [--measure train augment] [--augment_from file|task] [--work DIR]
        [--out benchmarks/results/pool_memory]

Pools are synthetic: IMDB reviews (unsup.jsonl.gz of --data, default $UDA_DATA_PATH or
../shared/data/imdb) copied until the size is reached, each copy made unique by a suffix, in
``unsup.jsonl.gz`` beside links to the IMDB train and test files; the precomputed file gives each
text one "augmented" copy (its words reversed). Generated files are kept in --work and reused.

Each measurement is a child process (a fresh interpreter with its own cache folder, $UDA_CACHE) that
runs ``uda.train.train`` on task text_classification for 20 steps, batch 8, unsup ratio 3, dev 100,
200 test reviews, on a TINY BERT (1 layer, hidden 32, the MiniLM tokenizer) or with --model minilm the
offline all-MiniLM-L6-v2. It reports its peak RSS (``resource.getrusage``, which counts the pages of
memory-mapped files it has mapped; the readers give those of the Arrow tables back after each read,
``uda.arrow_cache.MappedPages``) after setup and at the end, and the time of ``task.setup`` (data,
tokenizer, augmenter and its join to the pool). Without a precomputed file the augmenter is
--plain_method (default swap): TF-IDF and unif fit statistics on every text of the pool, which would
measure those statistics rather than the pool.

``uda-augment`` on the same pools (``--measure augment``, on by default): the pool's unsup.jsonl.gz
(``--augment_from file``) or the task's unlabelled pool built from the folder (``--augment_from task``),
augmented with --plain_method (2 copies), each run a child process like the above (``tasks.cli.augment_main``,
the command itself) with its own $UDA_CACHE and augmentation cache: a first run (the input converted to
Arrow, every text computed) and a second one on the same caches (nothing computed, the output written
again from the cache). Besides the peak RSS it reports the peak of anonymous memory (RssAnon of
/proc/self/status, sampled every 0.1 s): the peak RSS also counts the pages of the memory-mapped input
table that a batch mapped (given back after each batch) and the libraries' code.

Writes results.json and results.md to --out.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.augment_speed import load_reviews  # noqa: E402


def build_pool(work: Path, imdb: Path, size: int) -> Path:
    """``work/pool-<size>``: unsup.jsonl.gz of ``size`` unique texts, pre.jsonl.gz with one copy each,
    and links to the IMDB train and test files. Made once (a ``done`` file marks a finished folder)."""
    folder = work / f"pool-{size}"
    if (folder / "done").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    reviews = load_reviews(imdb, min(size, 50_000))
    # compresslevel 1: writing millions of lines at the default level takes minutes longer
    with gzip.open(folder / "unsup.jsonl.gz", "wt", encoding="utf-8", compresslevel=1) as unsup, \
            gzip.open(folder / "pre.jsonl.gz", "wt", encoding="utf-8", compresslevel=1) as pre:
        for i in range(size):
            text = f"{reviews[i % len(reviews)]} [{i}]"
            unsup.write(json.dumps({"id": f"u{i}", "text": text}) + "\n")
            pre.write(json.dumps({"text": text, "augmented": [" ".join(reversed(text.split()))]}) + "\n")
    for name in ("train.jsonl.gz", "test.jsonl.gz"):
        if not (folder / name).exists():
            (folder / name).symlink_to((imdb / name).resolve())
    (folder / "done").write_text("", encoding="utf-8")
    return folder


def tiny_model(work: Path) -> Path:
    """A 1-layer BERT of hidden size 32 with the (offline) MiniLM tokenizer, saved once under ``work``."""
    folder = work / "tiny_bert"
    if (folder / "config.json").is_file():
        return folder
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from uda.hub import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                                             num_attention_heads=2, intermediate_size=64, num_labels=2,
                                             max_position_embeddings=512)).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(spec: dict) -> dict:
    """One measurement, in this (fresh) process, its memory sampled as in :func:`augment_child`. The
    libraries that setup imports on first use (datasets, transformers) are imported first and timed
    apart (``import_s``): the same in a first and a second setup, they are not what the cache saves."""
    t = time.perf_counter()
    import datasets  # noqa: F401
    import transformers  # noqa: F401
    from transformers import AutoModel, AutoTokenizer  # noqa: F401
    import_s = round(time.perf_counter() - t, 2)
    import tasks  # noqa: F401 (registers the tasks)
    from uda.config import build_config
    from uda.task import get_task
    from uda.train import train

    cfg = build_config("text_classification", None, spec["overrides"])
    task = get_task("text_classification")
    out: dict = {"import_s": import_s}
    setup = task.setup
    peak, stop = sampled_peaks()

    def timed_setup(c, run):
        t = time.perf_counter()
        data = setup(c, run)
        out.update(setup_s=round(time.perf_counter() - t, 2), rss_after_setup_mib=round(peak_rss_mib(), 1),
                   anon_after_setup_mib=round(peak["RssAnon"], 1), pool=len(data.unlabeled))
        return data

    task.setup = timed_setup
    t = time.perf_counter()
    train(cfg, task)
    stop()
    out.update(total_s=round(time.perf_counter() - t, 2), peak_rss_mib=round(peak_rss_mib(), 1),
               peak_anon_mib=round(peak["RssAnon"], 1), peak_file_mib=round(peak["RssFile"], 1))
    return out


def sampled_peaks() -> tuple[dict, Callable[[], None]]:
    """Peaks of RssAnon and RssFile (MiB), sampled every 0.1 s by a thread until the returned stop()."""
    import threading

    peak = {"RssAnon": 0.0, "RssFile": 0.0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            now = memory_status()
            for k in peak:
                peak[k] = max(peak[k], now.get(k, 0.0))
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    def stop() -> None:
        done.set()
        sampler.join()

    return peak, stop


def memory_status() -> dict:
    """VmRSS, RssAnon and RssFile of /proc/self/status in MiB (empty where there is no /proc)."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024  # kB
    return out


def augment_child(spec: dict) -> dict:
    """One run of uda-augment (``tasks.cli.augment_main``) in this (fresh) process, its memory sampled."""
    import contextlib
    import io

    from tasks.cli import augment_main

    peak, stop = sampled_peaks()
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as summary:
        code = augment_main(spec["argv"])
    total = time.perf_counter() - t
    stop()
    if code != 0:
        raise SystemExit(f"uda-augment exited with {code}")
    report = json.loads(summary.getvalue())
    return {"total_s": round(total, 2), "peak_rss_mib": round(peak_rss_mib(), 1),
            "peak_anon_mib": round(peak["RssAnon"], 1), "peak_file_mib": round(peak["RssFile"], 1),
            "rows_written": report["rows_written"], "texts_computed": report["texts_computed"],
            "texts_fully_cached": report["texts_fully_cached"]}


def measure_augment(folder: Path, source: str, method: str, workers: int, cache: Path, out_dir: Path) -> dict:
    """uda-augment on the pool of ``folder`` in a child process (``$UDA_CACHE`` and the augmentation cache
    under ``cache``)."""
    if source == "file":
        argv = ["--input", str(folder / "unsup.jsonl.gz")]
    else:
        argv = ["--task", "text_classification", "--data_path", str(folder)]
    argv += ["--method", method, "--copies", "2", "--workers", str(workers), "--cache_dir", str(cache / "augment"),
             "--output", str(out_dir / f"{folder.name}.{method}.jsonl.gz"), "--no_progress"]
    env = {**os.environ, "UDA_CACHE": str(cache), "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, __file__, "--augment_child", json.dumps({"argv": argv})], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: the uda-augment measurement failed ({folder.name}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(folder: Path, model: str, precomputed: bool, plain_method: str, cache: Path, run_dir: Path) -> dict:
    overrides = {"model.name_or_path": model, "data.path": str(folder), "data.num_labeled": 20,
                 "data.dev_size": 100, "data.max_test": 200, "data.unlabeled_from_train": False,
                 "data.min_unlabeled_chars": 0, "model.max_length": 128, "train.max_steps": 20,
                 "train.warmup_steps": 0, "train.batch_size": 8, "train.eval_every": 1000, "uda.unsup_ratio": 3,
                 "output_dir": str(run_dir), "overwrite": True, "report_to": "none",
                 **({"augment.method": "precomputed", "augment.file": str(folder / "pre.jsonl.gz")} if precomputed
                    else {"augment.method": plain_method})}
    env = {**os.environ, "UDA_CACHE": str(cache), "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps({"overrides": overrides})], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: the measurement failed ({folder.name}, precomputed={precomputed}):\n"
                         f"{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write_results(out: Path, rows: list[dict], meta: dict, augment_rows: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows, "augment_rows": augment_rows},
                                                 indent=2), encoding="utf-8")
    md = ["# Unlabelled pool size: peak memory and time", "", f"`{meta['command']}` on {meta['machine']}."]
    if rows:
        md += ["", f"## Training setup and 20 steps ({meta['model']} model)", ""] + train_table(rows)
    if augment_rows:
        md += augment_table(augment_rows)
    (out / "results.md").write_text("\n".join(md) + "\n", encoding="utf-8")


def augment_table(rows: list[dict]) -> list[str]:
    md = ["", f"## uda-augment ({rows[0]['method']}, 2 copies, input: {rows[0]['input']})", "",
          "The first run converts the input to Arrow and computes every text; the second finds every copy in "
          "the cache and writes the output again. Peak anonymous memory: RssAnon sampled every 0.1 s (the peak "
          "RSS also counts the libraries' code and the pages of the memory-mapped input a batch mapped, given "
          "back after it).", "",
          "| pool | run | total s | texts computed | peak RSS MiB | peak anonymous MiB | peak file-backed MiB |",
          "|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['size']:,} | {r['run']} | {r['total_s']} | {r['texts_computed']:,} | {r['peak_rss_mib']:,} | "
                  f"{r['peak_anon_mib']:,} | {r['peak_file_mib']:,} |")
    sizes = sorted({r["size"] for r in rows})
    pick = {(r["size"], r["run"]): r for r in rows}
    growth = {run: round(pick[(sizes[-1], run)]["peak_anon_mib"] - pick[(sizes[0], run)]["peak_anon_mib"], 1)
              for run in ("first", "second")}
    md += ["", f"Growth of peak anonymous memory from {sizes[0]:,} to {sizes[-1]:,} texts: {growth['first']} MiB "
               f"(first run), {growth['second']} MiB (second)."]
    return md


def train_table(rows: list[dict]) -> list[str]:
    md = ["Peak RSS (``getrusage``) counts everything resident, the pages of memory-mapped files included; "
          "the readers give back the pages of the Arrow tables that a read mapped after each read "
          "(``uda.arrow_cache.MappedPages``), so the file-backed part is mostly the libraries' code. Peak "
          "anonymous memory (RssAnon, sampled every 0.1 s) is what the process itself holds.", "",
          "| pool | augmentation | setup | setup s | peak RSS after setup MiB | peak RSS MiB | peak anonymous MiB "
          "| peak file-backed MiB | total s |",
          "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['size']:,} | {r['augmentation']} | {r['setup']} | {r['setup_s']} | "
                  f"{r['rss_after_setup_mib']:,} | {r['peak_rss_mib']:,} | {r.get('peak_anon_mib', '-')} | "
                  f"{r.get('peak_file_mib', '-')} | {r['total_s']} |")
    sizes = sorted({r["size"] for r in rows})
    md += ["", f"Growth from {sizes[0]:,} to {sizes[-1]:,} texts of peak RSS (goal: under 512 MiB) and of peak "
               "anonymous memory, and speed-up of the second setup over the first (goal: at least 5x; setup s excludes the import of datasets "
               "and transformers, the same in both: import_s in results.json):", ""]
    for aug in dict.fromkeys(r["augmentation"] for r in rows):
        pick = {(r["size"], r["setup"]): r for r in rows if r["augmentation"] == aug}

        def growth(key: str) -> dict:
            return {s: (round(pick[(sizes[-1], s)][key] - pick[(sizes[0], s)][key], 1)
                        if key in pick[(sizes[-1], s)] and key in pick[(sizes[0], s)] else "-")
                    for s in ("first", "second")}

        anon, rss = growth("peak_anon_mib"), growth("peak_rss_mib")
        speed = {n: round(pick[(n, "first")]["setup_s"] / max(pick[(n, "second")]["setup_s"], 1e-9), 1) for n in sizes}
        md.append(f"- {aug}: peak RSS growth {rss['first']} MiB (first setup), {rss['second']} MiB (second); "
                  f"peak anonymous memory growth {anon['first']} / {anon['second']} MiB; second setup faster by "
                  + ", ".join(f"{v}x at {n:,}" for n, v in speed.items()))
    return md


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.environ.get("UDA_DATA_PATH") or str(REPO.parent / "shared" / "data" / "imdb"),
                    help="IMDB folder with unsup.jsonl.gz, train.jsonl.gz and test.jsonl.gz")
    ap.add_argument("--sizes", type=int, nargs="+", default=[70_000, 500_000, 2_000_000])
    ap.add_argument("--model", choices=("tiny", "minilm"), default="tiny")
    ap.add_argument("--plain_method", default="swap", help="augmenter of the runs without a precomputed file, "
                                                             "and of the uda-augment runs")
    ap.add_argument("--measure", nargs="+", choices=("train", "augment"), default=["train", "augment"],
                    help="training setup + 20 steps, uda-augment, or both (default)")
    ap.add_argument("--augment_from", choices=("file", "task"), default="file",
                    help="uda-augment input: the pool's unsup.jsonl.gz (--input) or the task's unlabelled pool "
                         "(--task text_classification --data_path POOL)")
    ap.add_argument("--augment_workers", type=int, default=1, help="uda-augment --workers")
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "uda_pool_memory"),
                    help="generated pools (about 1 GB per million texts), caches, run folders")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "pool_memory"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--augment_child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    if args.augment_child:
        print(json.dumps(augment_child(json.loads(args.augment_child))))
        return 0
    imdb, work = Path(args.data).expanduser(), Path(args.work).expanduser()
    model = None
    if "train" in args.measure:
        model = "minilm" if args.model == "minilm" else str(tiny_model(work))
    rows, augment_rows = [], []
    for size in args.sizes:
        folder = build_pool(work, imdb, size)
        if "augment" in args.measure:
            cache = work / "cache" / f"{size}-augment-{args.augment_from}-{args.plain_method}"
            if cache.exists():  # the first run starts from empty caches
                shutil.rmtree(cache)
            for run in ("first", "second"):
                r = measure_augment(folder, args.augment_from, args.plain_method, args.augment_workers, cache,
                                    work / "augmented")
                augment_rows.append({"size": size, "method": args.plain_method, "input": args.augment_from,
                                     "run": run, **r})
                print(json.dumps(augment_rows[-1]), flush=True)
        for precomputed in ((False, True) if "train" in args.measure else ()):
            aug = "precomputed" if precomputed else args.plain_method
            cache = work / "cache" / f"{size}-{aug}"
            if cache.exists():  # the first setup starts from an empty cache
                shutil.rmtree(cache)
            for setup in ("first", "second"):
                r = measure(folder, model, precomputed, args.plain_method, cache, work / "run")
                rows.append({"size": size, "augmentation": aug, "setup": setup, **r})
                print(json.dumps(rows[-1]), flush=True)
    meta = {"model": args.model, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "command": "python benchmarks/pool_memory.py " + " ".join(argv)}
    write_results(Path(args.out), rows, meta, augment_rows)
    print(f"wrote {args.out}/results.json and results.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
