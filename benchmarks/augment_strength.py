#!/usr/bin/env python
"""How much each augmentation changes a review, and whether it keeps the words that carry its label.

    python benchmarks/augment_strength.py --data ../shared/data/imdb \\
        --file apertium=runs/augment/imdb_pool.apertium-eng-spa.s0.x1.jsonl.gz \\
        --method tf_idf:0.3 --method unif:0.3 --out benchmarks/results/augment_strength

For a seeded sample of --limit unlabelled IMDB reviews (the unsup file), every augmenter makes one copy
(precomputed files: their first copy of that review; methods: computed here, TF-IDF statistics fitted
on the whole unsup file) and the script measures, over lower-cased word tokens:
- ``words_changed``: 1 - (multiset overlap of copy and original) / (original length), averaged over reviews;
- ``sentiment_kept``: of the occurrences of the sentiment words below in the originals, the share that
  the copy still holds (a word occurring k times in the original counts as kept up to its count in the copy),
  overall and per word (``per_word_kept``, words seen at least 20 times);
- ``identical``: the share of copies equal to their original; ``length_ratio``: mean copy/original length.
Writes results.json and results.md to --out.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

# Common, unambiguous sentiment words of movie reviews (positive, then negative).
SENTIMENT_WORDS = frozenset("""
good great excellent wonderful amazing brilliant best love loved beautiful perfect enjoyed fun favorite superb
bad awful terrible boring worst poor waste horrible stupid dull hated annoying disappointing mediocre lame
""".split())

_WORD = re.compile(r"[a-z']+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.replace("<br />", " ").lower())


def measure(originals: list[str], copies: list[str]) -> dict:
    changed, kept, seen, same, ratios = [], 0, 0, 0, []
    word_seen: Counter = Counter()
    word_kept: Counter = Counter()
    for o, c in zip(originals, copies):
        wo, wc = words(o), words(c)
        co, cc = Counter(wo), Counter(wc)
        overlap = sum(min(n, cc[w]) for w, n in co.items())
        changed.append(1 - overlap / max(len(wo), 1))
        for w, n in co.items():
            if w in SENTIMENT_WORDS:
                seen += n
                kept += min(n, cc[w])
                word_seen[w] += n
                word_kept[w] += min(n, cc[w])
        same += o == c
        ratios.append(len(wc) / max(len(wo), 1))
    return {"texts": len(originals), "words_changed": float(np.mean(changed)),
            "sentiment_occurrences": seen, "sentiment_kept": kept / seen if seen else None,
            "identical": same / len(originals), "length_ratio": float(np.mean(ratios)),
            "per_word_kept": {w: word_kept[w] / n for w, n in word_seen.most_common() if n >= 20}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="IMDB folder holding unsup.jsonl.gz")
    ap.add_argument("--file", action="append", default=[], metavar="NAME=PATH",
                    help="a precomputed augmentation file (scripts/uda_augment.py output) under a display name")
    ap.add_argument("--method", action="append", default=[], metavar="METHOD:P",
                    help="a word-level method computed here with replacement probability P, e.g. tf_idf:0.3")
    ap.add_argument("--limit", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/augment_strength")
    args = ap.parse_args()

    from augment.precomputed import PrecomputedAugmenter
    from augment.registry import make_augmenter
    from augment.word_replace import fit_tfidf_stats
    from uda.data import read_table

    unsup = [r["text"] for r in read_table(Path(args.data) / "unsup.jsonl.gz", label_column=None, require_label=False)]
    rng = np.random.default_rng(args.seed)
    sample = [unsup[i] for i in sorted(rng.choice(len(unsup), size=min(args.limit, len(unsup)), replace=False))]
    results: dict = {"settings": vars(args), "sentiment_words": sorted(SENTIMENT_WORDS), "augmenters": {}}

    for spec in args.file:
        name, _, path = spec.partition("=")
        if not path:
            ap.error(f"--file {spec!r}: write NAME=PATH")
        precomputed = PrecomputedAugmenter(path)
        missing = [t for t in sample if t not in precomputed]
        if missing:
            sys.exit(f"error: {path} has no copy of {len(missing)} of the {len(sample)} sampled reviews; "
                     f"give a file made from {args.data}/unsup.jsonl.gz")
        results["augmenters"][name] = measure(sample, [precomputed.copies(t)[0] for t in sample])
    stats = None
    for spec in args.method:
        method, _, p = spec.partition(":")
        if stats is None:
            stats = fit_tfidf_stats(unsup)
        aug = make_augmenter(method, {"p": float(p or 0.1)}, stats)
        results["augmenters"][f"{method} p={float(p or 0.1)}"] = measure(sample, aug(sample, np.random.default_rng(args.seed)))

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    md = [f"{len(sample)} unsup IMDB reviews (seed {args.seed}); one copy each.", "",
          "| augmentation | words changed | sentiment words kept | copies identical | length ratio |",
          "|---|---:|---:|---:|---:|"]
    for name, r in results["augmenters"].items():
        kept = "-" if r["sentiment_kept"] is None else f"{100 * r['sentiment_kept']:.1f}%"
        md.append(f"| {name} | {100 * r['words_changed']:.1f}% | {kept} | {100 * r['identical']:.1f}% | "
                  f"{r['length_ratio']:.3f} |")
    md += ["", "Least kept sentiment words (>= 20 occurrences):", ""]
    for name, r in results["augmenters"].items():
        worst = sorted(r["per_word_kept"].items(), key=lambda kv: kv[1])[:6]
        md.append(f"- {name}: " + ", ".join(f"{w} {100 * v:.0f}%" for w, v in worst))
    (out / "results.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
