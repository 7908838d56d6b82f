"""Same runs, same numbers: tiny text, squad_v2 and passages runs (UDA on), a QA-shaped start and its
resume, written as comparable digests, so that a change of the code's layout can be shown to keep what
training computes.

    python benchmarks/behaviour_check.py run --out A          # on the code before the change
    python benchmarks/behaviour_check.py run --out B          # on the code after it
    python benchmarks/behaviour_check.py compare A B          # rc 0 when every digest is the same

Each digest holds the run's metrics.jsonl lines and results.json without wall-clock values (seconds,
throughput, paths, environment). The tiny models and data are built in code (the tests' fixtures), on
one torch thread, so two runs on the same machine compute alike bit for bit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TIMING = ("seconds", "per_sec", "environment", "processes", "device", "files", "path", "pid", "run_dir")


def _tiny_text(root: Path) -> tuple[Path, Path]:
    """The tests' tiny BERT with a vocabulary (trainkit.model_dir) and tiny sentiment data (conftest)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from tests.conftest import FILLER, NEG_WORDS, POS_WORDS, make_review, write_jsonl

    model = root / "text_model"
    model.mkdir(parents=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "'", "<", ">", "/", "br"]
    vocab += sorted(set(POS_WORDS + NEG_WORDS + FILLER))
    vocab += [chr(c) for c in range(ord("a"), ord("z") + 1)] + [f"##{chr(c)}" for c in range(ord("a"), ord("z") + 1)]
    (model / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab=str(model / "vocab.txt"), do_lower_case=True).save_pretrained(model)
    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                             num_attention_heads=4, intermediate_size=37,
                                             max_position_embeddings=128, num_labels=2,
                                             initializer_range=0.2)).save_pretrained(model)
    data = root / "text_data"
    data.mkdir()
    rng = random.Random(0)
    write_jsonl(data / "train.jsonl", [{"id": f"train_{i}", "text": make_review(rng, i % 2), "label": i % 2}
                                       for i in range(200)])
    write_jsonl(data / "test.jsonl", [{"id": f"test_{i}", "text": make_review(rng, i % 2), "label": i % 2}
                                      for i in range(60)])
    write_jsonl(data / "unsup.jsonl", [{"id": f"unsup_{i}", "text": make_review(rng, rng.randrange(2), 14),
                                        "label": -1} for i in range(300)])
    return model, data


def _tiny_qa(root: Path) -> tuple[Path, Path]:
    import torch
    from transformers import BertConfig, BertForQuestionAnswering, BertTokenizerFast

    from tests.qa_fixtures import VOCAB, make_squad

    model = root / "qa_model"
    model.mkdir(parents=True)
    (model / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tok = BertTokenizerFast.from_pretrained(str(model), do_lower_case=True)
    torch.manual_seed(0)
    BertForQuestionAnswering(BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=4, intermediate_size=37,
                                        max_position_embeddings=128)).save_pretrained(model)
    tok.save_pretrained(model)
    squad = root / "tiny-v2.0.json"
    squad.write_text(json.dumps(make_squad()), encoding="utf-8")
    return model, squad


def _train(args: list[str]) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", UDA_DATA_PATH="", OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "train_uda.py"), *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=1200)
    if proc.returncode != 0:
        raise SystemExit(f"train_uda.py {' '.join(args[:2])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


def _clean(value, root: str):
    """``value`` without wall-clock keys, with the folder the runs were made in written as <out>."""
    if isinstance(value, dict):
        return {k: _clean(v, root) for k, v in value.items() if not any(t in k for t in TIMING)}
    if isinstance(value, list):
        return [_clean(v, root) for v in value]
    return value.replace(root, "<out>") if isinstance(value, str) else value


def digest(run_dir: Path, root: Path) -> dict:
    lines = [json.loads(s) for s in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    return {"metrics": _clean(lines, str(root)), "results": _clean(results, str(root))}


def run_all(out: Path) -> None:
    work = out / "work"
    text_model, text_data = _tiny_text(work)
    qa_model, squad = _tiny_qa(work)
    common = ["--report_to", "none", "--train.lr", "1e-3", "--train.warmup_steps", "1", "--train.eval_every", "3",
              "--train.log_every", "3"]
    runs = {
        "text_uda": ["--task", "text_classification", "--model.name_or_path", str(text_model), "--data.path",
                     str(text_data), "--data.num_labeled", "20", "--data.dev_size", "40", "--model.max_length",
                     "32", "--train.max_steps", "12", "--train.batch_size", "4", "--uda.unsup_ratio", "2", *common],
        "squad_v2_uda": ["--task", "squad_v2", "--model.name_or_path", str(qa_model), "--data.path", str(squad),
                         "--data.num_labeled", "16", "--data.dev_size", "12", "--model.max_length", "48",
                         "--qa.doc_stride", "8", "--qa.max_question_length", "12", "--qa.test_articles", "2",
                         "--qa.dev_articles", "1", "--qa.labeled_articles", "2", "--train.batch_size", "4",
                         "--train.eval_batch_size", "16", "--uda.unsup_ratio", "1", "--augment.p", "0.3",
                         "--train.max_steps", "6", *common],
        "passages_uda": ["--task", "passages", "--model.name_or_path", str(qa_model), "--data.path", str(squad),
                         "--data.num_labeled", "16", "--data.dev_size", "12", "--model.max_length", "64",
                         "--passages.test_articles", "2", "--passages.dev_articles", "1",
                         "--passages.labeled_articles", "2", "--passages.retrieve_k", "6",
                         "--passages.train_passages", "3", "--passages.train_top_k", "6",
                         "--passages.predict_passages", "4", "--passages.unsup_passages", "2",
                         "--passages.max_question_length", "12", "--passages.span_passages", "3",
                         "--train.batch_size", "4", "--train.eval_batch_size", "16", "--uda.unsup_ratio", "1",
                         "--augment.p", "0.3", "--train.max_steps", "6", *common],
    }
    for name, args in runs.items():
        run_dir = work / name
        _train([*args, "--output_dir", str(run_dir)])
        (out / f"{name}.json").write_text(json.dumps(digest(run_dir, out.resolve()), indent=1, sort_keys=True) + "\n",
                                          encoding="utf-8")
        print(f"{name}: {out / f'{name}.json'}")


def differences(a, b, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}.{k}: only in {'A' if k in a else 'B'}" for k in sorted(a.keys() ^ b.keys())]
        for k in sorted(a.keys() & b.keys()):
            out += differences(a[k], b[k], f"{where}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items in A, {len(b)} in B"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and (math.isnan(a) and math.isnan(b)):
        return []
    return [] if a == b else [f"{where}: {a!r} (A) != {b!r} (B)"]


def compare(a: Path, b: Path) -> int:
    bad = 0
    for fa in sorted(a.glob("*.json")):
        fb = b / fa.name
        if not fb.is_file():
            print(f"{fa.name}: missing in {b}")
            bad += 1
            continue
        # digests written by another copy of this script may hold their folder's path: compare without it
        da, db = (json.loads(f.read_text().replace(str(d.resolve()), "<out>")) for f, d in ((fa, a), (fb, b)))
        diffs = differences(da, db)
        print(f"{fa.name}: {'identical' if not diffs else f'{len(diffs)} differences'}")
        for d in diffs[:20]:
            print("   ", d)
        bad += bool(diffs)
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "run":
        import torch

        torch.set_num_threads(1)
        run_all(args.out)
        return 0
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
