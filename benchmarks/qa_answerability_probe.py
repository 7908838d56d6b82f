#!/usr/bin/env python
"""Is answerability linearly decodable from a SQuAD 2.0 reader's hidden states? A diagnostic for
the verifier (issue "QA that learns"): if a logistic regression on the encoder's states cannot tell
answerable from unanswerable questions on new articles, no head on those states can, and the
encoder itself must learn it.

    python benchmarks/qa_answerability_probe.py --run RUN_FOLDER [--train_features 1200]
        [--eval_questions 1000] [--out DIR]

RUN_FOLDER is a finished squad_v2 run (its ``config.yaml`` gives the data and the split, its
``model/`` the trained reader); the pretrained encoder of the same config is probed beside it.
Features: the last hidden state of the first token ("cls") and the mean over the pair's tokens
("mean"). Fitted on ``--train_features`` windows of the labelled pool (half of them hold an answer),
scored on the first window of the dev questions and then of the first test questions (the held-out
articles), as ROC AUC and accuracy at 0.5, for three regularisation strengths; the reader's own
verifier is scored on the same windows. One thread, bf16 autocast.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tasks  # noqa: E402,F401 (registers the built-in tasks)
from tasks.common.qa_reader import build_qa_model, load_qa_model, model_inputs  # noqa: E402
from tasks.common.windows import collate_features  # noqa: E402
from tasks.qa.task import QATask  # noqa: E402
from uda.config import build_config  # noqa: E402
from uda.io import atomic_write_json  # noqa: E402
from uda.task import RunContext  # noqa: E402


def states(task: QATask, model: torch.nn.Module, feats: list, idx: list, batch: int = 32) -> tuple:
    """(first-token states, mean states, the model's own has-answer log-odds) of ``feats[idx]``."""
    model.eval()
    cls, mean, own = [], [], []
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        for a in range(0, len(idx), batch):
            b = collate_features(task.tokenizer, [feats[i] for i in idx[a:a + batch]], with_labels=False)
            out = model.span_model(**model_inputs(b), output_hidden_states=True, return_dict=True)
            h = out.hidden_states[-1].float()
            m = b["attention_mask"].unsqueeze(-1).float()
            cls.append(h[:, 0])
            mean.append((h * m).sum(1) / m.sum(1))
            logits = model.answerability(h[:, 0]).float()
            own.append(logits[:, 1] - logits[:, 0])
    return torch.cat(cls).numpy(), torch.cat(mean).numpy(), torch.cat(own).numpy()


def main() -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="a finished squad_v2 run folder (config.yaml, model/)")
    ap.add_argument("--train_features", type=int, default=1200)
    ap.add_argument("--eval_questions", type=int, default=1000, help="dev questions, then test ones, up to this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder for results.json (default: print only)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    run = Path(args.run)
    cfg = build_config("squad_v2", str(run / "config.yaml"), {"output_dir": str(run)})
    task = QATask()
    data = task.setup(cfg, RunContext(run, wants_unlabeled=cfg.uda.lambda_u > 0))  # QA writes no files
    rng = np.random.default_rng(args.seed)
    train = data.train
    pos = [i for i, f in enumerate(train) if f["answerable"] == 1]
    neg = [i for i, f in enumerate(train) if f["answerable"] == 0]
    half = args.train_features // 2
    pick = [int(i) for i in rng.choice(pos, half, replace=False)] + [int(i) for i in rng.choice(neg, half, replace=False)]
    y = np.array([train[i]["answerable"] for i in pick])
    questions = (list(data.dev) + list(data.test))[:args.eval_questions]
    feats = task._build(questions, with_labels=False)
    first: dict = {}
    for i, f in enumerate(feats):
        first.setdefault(f["example_index"], i)
    idx = sorted(first.values())
    gold = np.array([int(bool(questions[feats[i]["example_index"]]["answers"])) for i in idx])
    results: dict = {"run": str(run), "train_features": len(pick), "eval_questions": len(idx),
                     "eval_answerable_share": float(gold.mean()), "models": {}}
    for name, load in (("trained", lambda: load_qa_model(run / "model")),
                       ("pretrained", lambda: build_qa_model(task.model_path))):
        t0 = time.time()
        model = load()
        xc, xm, _ = states(task, model, train, pick)
        dc, dm, own = states(task, model, feats, idx)
        r: dict = {"own_verifier": {"auc": round(float(roc_auc_score(gold, own)), 3),
                                    "acc": round(float(((own > 0) == gold).mean()), 3)}}
        for pooling, x, d in (("cls", xc, dc), ("mean", xm, dm)):
            for c in (0.01, 0.1, 1.0):
                clf = LogisticRegression(C=c, max_iter=2000).fit(x, y)
                p = clf.predict_proba(d)[:, 1]
                r[f"{pooling}_C{c}"] = {"auc": round(float(roc_auc_score(gold, p)), 3),
                                        "acc": round(float(((p > 0.5) == gold).mean()), 3),
                                        "train_acc": round(float(clf.score(x, y)), 3)}
        r["seconds"] = round(time.time() - t0, 1)
        results["models"][name] = r
        print(name, json.dumps(r), flush=True)
    if args.out:
        atomic_write_json(Path(args.out) / "results.json", results)
        print(f"wrote {Path(args.out) / 'results.json'}")


if __name__ == "__main__":
    main()
