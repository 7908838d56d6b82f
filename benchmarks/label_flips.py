#!/usr/bin/env python
"""How often an augmentation changes the class of a text, judged by a classifier trained on all labels.

    python benchmarks/label_flips.py --judge RUN_ALL_LABELS/model --data ../shared/data/trec \\
        --ids RUN/dev_ids.txt --method tf_idf:0.3 --method tf_idf:0.3:protect \\
        --file apertium=runs/augment/trec_train.apertium.jsonl.gz --out benchmarks/results/trec_label_flips

UDA asks the model to predict the same class on a text and on its augmented copy, so an augmentation
that changes the class ("Who invented ..." -> "What invented ...") teaches the wrong thing. Without a
person to read the copies, a classifier trained on every label of the training pool (the ``ceiling``
run of uda-compare, ``--judge``: its model/ folder) judges them. For the dev texts (``--ids``: a
run's dev_ids.txt; rows of the data folder's train file) every augmenter makes one copy (``--method
NAME:P[:protect]``: computed here with the seed, TF-IDF statistics fitted on the training pool's texts;
``--file NAME=PATH``: the first copy in a precomputed uda-augment file), and the script reports per
augmenter:
- ``flip_rate``: the share of dev texts whose copy the judge puts in another class than the text;
- ``gold_flip_rate``: among dev texts the judge classifies correctly, the share whose copy it does not;
- ``first_word_changed``: the share of copies whose first word (the question word of a question) differs;
- ``identical``: the share of copies equal to their text.
Writes results.json and results.md to --out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from uda.io import iter_jsonl  # noqa: E402


def read_rows(path: Path) -> list[dict]:
    return [rec for _, rec in iter_jsonl(path)]


def first_word(text: str) -> str:
    words = text.split()
    return words[0].lower().strip("?,.'\"") if words else ""


@torch.no_grad()
def predict(model: torch.nn.Module, tokenizer, texts: list[str], max_length: int, batch_size: int = 64) -> np.ndarray:
    preds = []
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(texts[i:i + batch_size], truncation=True, max_length=max_length, padding=True,
                        return_tensors="pt")
        preds.append(model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits.argmax(-1))
    return torch.cat(preds).numpy()


def augment_copies(spec: str, texts: list[str], pool: list[str], seed: int) -> tuple[str, list[str]]:
    from augment.build import build_augmenter
    from augment.config import AugmentConfig

    parts = spec.split(":")
    cfg = AugmentConfig(method=parts[0], p=float(parts[1]) if len(parts) > 1 else None,
                        protect=len(parts) > 2 and parts[2] == "protect")
    augmenter = build_augmenter(cfg, pool)
    return spec, list(augmenter(texts, np.random.default_rng(seed)))


def file_copies(spec: str, texts: list[str]) -> tuple[str, list[str]]:
    name, path = spec.split("=", 1)
    lookup = {r["text"]: r["augmented"][0] for r in read_rows(Path(path)) if r.get("augmented")}
    missing = [t for t in texts if t not in lookup]
    if missing:
        raise SystemExit(f"error: --file {path}: {len(missing)} dev texts have no copy (first: {missing[0]!r}); "
                         f"make the file from the data's training file")
    return name, [lookup[t] for t in texts]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge", required=True, help="model folder of a run trained on all labels")
    ap.add_argument("--data", required=True, help="data folder holding train.jsonl")
    ap.add_argument("--ids", required=True, help="dev_ids.txt of a run: the texts to augment")
    ap.add_argument("--method", action="append", default=[], metavar="NAME:P[:protect]")
    ap.add_argument("--file", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--max_length", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    import tasks  # noqa: F401 (registers the built-in tasks, whose model classes the judge needs)
    from tasks.text.model import load_text_classifier
    from transformers import AutoTokenizer

    rows = read_rows(Path(args.data) / "train.jsonl")
    ids = [line.strip() for line in Path(args.ids).read_text(encoding="utf-8").splitlines() if line.strip()]
    by_id = {str(r["id"]): r for r in rows}
    dev = [by_id[i] for i in ids if i in by_id]
    if len(dev) != len(ids):
        raise SystemExit(f"error: {len(ids) - len(dev)} ids of {args.ids} are not in {args.data}/train.jsonl")
    texts, gold = [r["text"] for r in dev], np.array([r["label"] for r in dev])
    model = load_text_classifier(args.judge).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.judge)
    base = predict(model, tokenizer, texts, args.max_length)
    right = base == gold
    results = {"judge": args.judge, "dev_texts": len(texts), "judge_dev_accuracy": float(right.mean()),
               "seed": args.seed, "augmenters": {}}
    pool = [r["text"] for r in rows]
    made = [augment_copies(m, texts, pool, args.seed) for m in args.method] + [file_copies(f, texts) for f in args.file]
    for name, copies in made:
        pred = predict(model, tokenizer, copies, args.max_length)
        results["augmenters"][name] = {
            "flip_rate": float((pred != base).mean()),
            "gold_flip_rate": float((pred[right] != gold[right]).mean()),
            "first_word_changed": float(np.mean([first_word(c) != first_word(t) for c, t in zip(copies, texts)])),
            "identical": float(np.mean([c == t for c, t in zip(copies, texts)])),
            "examples": [{"text": t, "copy": c} for t, c in list(zip(texts, copies))[:5]],
        }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    lines = [f"Judge: dev accuracy {100 * results['judge_dev_accuracy']:.1f}% on {len(texts)} dev texts.", "",
             "| augmenter | flip rate | flips among correctly judged | first word changed | identical |",
             "|---|---|---|---|---|"]
    for name, r in results["augmenters"].items():
        lines.append(f"| {name} | {100 * r['flip_rate']:.1f}% | {100 * r['gold_flip_rate']:.1f}% | "
                     f"{100 * r['first_word_changed']:.1f}% | {100 * r['identical']:.1f}% |")
    (out / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
