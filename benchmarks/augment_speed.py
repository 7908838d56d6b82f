#!/usr/bin/env python
"""Texts per second of each augmenter on real IMDB reviews, in one process on this machine, and the
speed-up of length-sorted batching over one text at a time (MarianMT and Apertium), same process.

    python benchmarks/augment_speed.py [--data ../shared/data/imdb] [--out benchmarks/results/augment_speed]

The IMDB folder comes from --data, else $UDA_SHARED_DATA/imdb. MarianMT runs on the GPU when there is
one, else the CPU. Without --marian-model (a local MarianMT folder) it uses a randomly initialised
Marian model of the opus-mt shape scaled down (built here, with a SentencePiece model trained on the
reviews) because no real weights can be downloaded on this machine: its numbers show the code path
and the batching effect, not the speed of opus-mt-en-de (which is ~6x wider and deeper). A random
model never emits end-of-sentence, so every sentence decodes to the length cap.

Writes results.json, results.csv and results.md to --out.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def load_reviews(folder: Path, n: int) -> list[str]:
    path = folder / "unsup.jsonl.gz"
    if not path.is_file():
        raise SystemExit(f"error: {path} not found; pass --data /path/to/imdb (with unsup.jsonl.gz)")
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line)["text"])
            if len(out) >= n:
                break
    return out


def build_random_marian(folder: Path, texts: list[str], d_model: int, layers: int) -> Path:
    """A randomly initialised MarianMT model (+ SentencePiece trained on ``texts``) saved to ``folder``."""
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=buf, vocab_size=2000,
                                   hard_vocab_limit=False, model_type="unigram", pad_id=-1, bos_id=-1, eos_id=-1,
                                   unk_id=0, minloglevel=2)
    for name in ("source.spm", "target.spm"):
        (folder / name).write_bytes(buf.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(folder / "source.spm"))
    vocab = {"</s>": 0, "<unk>": 1, "<pad>": 2}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tok = MarianTokenizer(source_spm=str(folder / "source.spm"), target_spm=str(folder / "target.spm"),
                          vocab=str(folder / "vocab.json"))
    cfg = MarianConfig(vocab_size=len(vocab), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                       encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=4 * d_model,
                       decoder_ffn_dim=4 * d_model, max_position_embeddings=512, pad_token_id=2, eos_token_id=0,
                       decoder_start_token_id=2, forced_eos_token_id=0)
    torch.manual_seed(0)
    MarianMTModel(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def time_call(fn, n_texts: int) -> dict:
    t0 = time.perf_counter()
    fn()
    secs = time.perf_counter() - t0
    return {"texts": n_texts, "seconds": round(secs, 3), "texts_per_s": round(n_texts / secs, 2)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="IMDB folder with unsup.jsonl.gz (default: $UDA_SHARED_DATA/imdb)")
    ap.add_argument("--out", default="benchmarks/results/augment_speed", help="results folder")
    ap.add_argument("--n-word", type=int, default=2000, help="reviews for word-level augmenters")
    ap.add_argument("--n-bt", type=int, default=200, help="reviews for Apertium back-translation")
    ap.add_argument("--n-marian", type=int, default=24, help="reviews for MarianMT back-translation")
    ap.add_argument("--n-single", type=int, default=20, help="reviews for the Apertium one-at-a-time baseline")
    ap.add_argument("--n-single-marian", type=int, default=2, help="reviews for the Marian one-at-a-time baseline")
    ap.add_argument("--marian-model", default=None, help="local MarianMT folder (en->X); --marian-back for X->en")
    ap.add_argument("--marian-back", default=None, help="local MarianMT folder for the way back")
    ap.add_argument("--marian-d-model", type=int, default=128, help="width of the random Marian (default 128)")
    ap.add_argument("--marian-layers", type=int, default=2, help="layers of the random Marian (default 2)")
    ap.add_argument("--max-tokens", type=int, default=64, help="Marian: tokens per sentence cap")
    ap.add_argument("--skip", default="", help="comma-separated augmenters to skip (e.g. apertium,marian)")
    args = ap.parse_args(argv)

    data = Path(args.data) if args.data else Path(os.environ.get("UDA_SHARED_DATA", "../shared/data")) / "imdb"
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    reviews = load_reviews(data, max(args.n_word, args.n_bt, args.n_marian))
    rows: list[dict] = []

    def record(name: str, mode: str, result: dict, note: str = "") -> None:
        row = {"augmenter": name, "mode": mode, **result, "note": note}
        rows.append(row)
        print(json.dumps(row), flush=True)

    # word level
    from augment.registry import make_augmenter
    from augment.word_replace import fit_tfidf_stats

    texts = reviews[: args.n_word]
    stats = fit_tfidf_stats(texts)
    for method, opts in (("tf_idf", {"p": 0.1}), ("unif", {"p": 0.1}), ("wordnet", {"p": 0.1}),
                         ("swap", {"p": 0.1}), ("delete", {"p": 0.1}), ("embedding", {"p": 0.1})):
        if method in skip:
            continue
        try:
            t0 = time.perf_counter()
            aug = make_augmenter(method, opts, stats)
            load_s = time.perf_counter() - t0
        except (FileNotFoundError, ImportError) as e:
            print(f"skip {method}: {e}", file=sys.stderr)
            continue
        note = f"setup {load_s:.2f}s"
        if method == "embedding":  # neighbours are memoised: report the cold and the warm pass
            record(aug.name, "batch (cold neighbours)", time_call(lambda: aug(texts, np.random.default_rng(0)),
                                                                 len(texts)), note)
            note = "neighbours memoised"
        record(aug.name, "batch", time_call(lambda: aug(texts, np.random.default_rng(1)), len(texts)), note)

    # Apertium
    if "apertium" not in skip:
        from augment.backtranslate import ApertiumMissingError, apertium_back_translation

        try:
            bt = apertium_back_translation()
            bt_texts = reviews[: args.n_bt]
            record(bt.name, "batched (2000 sentences per call)",
                   time_call(lambda: bt(bt_texts, np.random.default_rng(0)), len(bt_texts)),
                   f"kept original: {bt.stats['sentences_kept_original']}/{bt.stats['sentences']} sentences")
            single = apertium_back_translation()
            few = reviews[args.n_bt: args.n_bt + args.n_single]
            record(single.name, "one text per call",
                   time_call(lambda: [single([t], np.random.default_rng(0)) for t in few], len(few)))
            batched = apertium_back_translation()
            record(batched.name, "batched, same texts",
                   time_call(lambda: batched(few, np.random.default_rng(0)), len(few)))
        except ApertiumMissingError as e:
            print(f"skip apertium: {e}", file=sys.stderr)

    # MarianMT
    if "marian" not in skip:
        import tempfile

        import torch

        from augment.backtranslate import marian_back_translation

        device = "cuda" if torch.cuda.is_available() else "cpu"
        if args.marian_model:
            fwd, back = args.marian_model, args.marian_back or args.marian_model
            note = "real model"
        else:
            tmp = Path(tempfile.mkdtemp(prefix="augment-speed-")) / "random-marian"
            fwd = back = str(build_random_marian(tmp, reviews, args.marian_d_model, args.marian_layers))
            note = (f"random Marian d_model={args.marian_d_model} layers={args.marian_layers} (no real weights "
                    f"offline); {device}; cap {args.max_tokens} tokens")
        m_texts = reviews[: args.n_marian]
        sorted_bt = marian_back_translation(fwd, back, batch_size=32, max_tokens=args.max_tokens, device=device)
        sorted_bt(m_texts[:2], np.random.default_rng(0))  # warm-up
        record(sorted_bt.name, f"sorted batches of 32 ({device})",
               time_call(lambda: sorted_bt(m_texts, np.random.default_rng(0)), len(m_texts)), note)
        few = m_texts[: args.n_single_marian]
        one = marian_back_translation(fwd, back, batch_size=1, sort=False, max_tokens=args.max_tokens, device=device)
        record(one.name, f"one sentence at a time ({device})",
               time_call(lambda: one(few, np.random.default_rng(0)), len(few)), note)
        record(sorted_bt.name, f"sorted batches of 32, same texts ({device})",
               time_call(lambda: sorted_bt(few, np.random.default_rng(0)), len(few)), note)

    # speed-ups
    def rate(name_prefix: str, mode_prefix: str):
        for r in rows:
            if r["augmenter"].startswith(name_prefix) and r["mode"].startswith(mode_prefix):
                return r["texts_per_s"]
        return None

    speedups = {}
    for name, single_mode, batch_mode in (("apertium", "one text per call", "batched, same texts"),
                                          ("marian", "one sentence at a time", "sorted batches of 32, same")):
        a, b = rate(name, single_mode), rate(name, batch_mode)
        if a and b:
            speedups[name] = round(b / a, 2)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "data": str(data), "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    (out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows, "batching_speedup": speedups},
                                                 indent=2) + "\n", encoding="utf-8")
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["augmenter", "mode", "texts", "seconds", "texts_per_s", "note"])
        w.writeheader()
        w.writerows(rows)
    md = [f"# Augmenter speed on IMDB reviews ({meta['cpus']} CPUs, {meta['time']})", "",
          "| augmenter | mode | texts | seconds | texts/s | note |", "|---|---|---:|---:|---:|---|"]
    md += [f"| {r['augmenter']} | {r['mode']} | {r['texts']} | {r['seconds']} | {r['texts_per_s']} | {r['note']} |"
           for r in rows]
    md += ["", "Speed-up of batching over one text at a time (same process, same texts): "
           + (", ".join(f"{k} x{v}" for k, v in speedups.items()) or "n/a")]
    (out / "results.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
