#!/usr/bin/env python
"""The two baselines of the multi-passage reader, on the very questions of one of its runs:

* **BM25 top-1 + single-passage reader**: each question's first retrieved passage, read by a reader
  trained with ``--task squad_v2`` (span head, answerability head, the no-answer decision of
  tasks/common/spans.py), its no-answer threshold fitted on the run's dev questions read the same
  way, then applied to test;
* **answer-nothing**: "" for every question;
* **bm25**: the retriever's own ``recall@k`` on the same test questions (``recall@1``: its first
  passage holds the answer), the bar for the reader's ``passage@1``.

When the run holds its per-question predictions (``predictions_dev.jsonl``, ``predictions_test.jsonl``):

* **reranked_top1_single_passage_reader**: the single-passage reader reads the passage the
  multi-passage reader ranked first (its span and its no-answer decision, threshold fitted on dev);
* **passages_reader_alone**, for a run with ``--passages.single_reader``: the multi-passage reader's
  answers with its own no-answer score (``reader_no_answer_score``), the threshold fitted on dev.

Both are scored with the project's official SQuAD 2.0 metric code (EM/F1, HasAns/NoAns), beside
the reader's own test scores from the run's ``results.json``.

    python benchmarks/passages_baselines.py --run PASSAGES_RUN --reader SQUAD_V2_RUN [--out DIR]
        [--batch 64] [--precision bf16]

PASSAGES_RUN: a finished ``--task passages`` run folder (its ``config.yaml`` gives the data, the
retrieval settings and the article split, so the questions are the same); SQUAD_V2_RUN: a finished
``--task squad_v2`` run folder (its ``model/`` and the windowing and no-answer settings of its
``config.yaml``). The reader must not have trained on the run's dev or test articles: the two
runs' ``data_info.json`` article lists are compared first.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tasks  # noqa: E402,F401 (registers the built-in tasks)
from tasks.passages.retrieval import recall_at_k  # noqa: E402
from tasks.common.squad import start_held_out  # noqa: E402
from tasks.common.squad_metric import squad_v2_metrics  # noqa: E402
from uda.config import build_config  # noqa: E402
from uda.data import DataError  # noqa: E402
from uda.io import atomic_write_json  # noqa: E402
from uda.task import RunContext  # noqa: E402

_METRICS = ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "HasAns_span_f1",
            "answerability_accuracy", "answerability_auc", "null_threshold")


def top1_examples(records: list[dict]) -> list[dict]:
    """Single-passage QA examples: each passage record's question with its first retrieved passage as
    the context, and the question's gold answers (scored as text, wherever the answer was found)."""
    for r in records:
        if not r["ctxs"]:
            raise ValueError(f"question '{r['id']}' has no retrieved passage")
    return [single_passage_example(r, r["ctxs"][0]) for r in records]


def single_passage_example(record: dict, passage: dict) -> dict:
    """A squad_v2 example: the record's question and gold answers, the passage as its context."""
    return {"id": record["id"], "title": passage.get("title", ""), "question": record["question"],
            "context": passage["text"], "answers": [{"text": a} for a in record["answers"]],
            "is_impossible": not record["answers"]}


def ranked_top1_examples(records: list[dict], predictions: dict[str, dict]) -> list[dict]:
    """Like :func:`top1_examples`, the passage being the one the multi-passage reader ranked first
    (``predictions[id]["passages"][0]["id"]``, looked up in the record's ``ctxs``)."""
    out = []
    for r in records:
        pred = predictions.get(r["id"])
        if pred is None or not pred["passages"]:
            raise ValueError(f"question '{r['id']}' has no ranked passage in the run's predictions")
        by_id = {c["id"]: c for c in r["ctxs"]}
        top = by_id[pred["passages"][0]["id"]]
        # an id of its own: the reader caches features by example ids, and BM25's top passage had these
        out.append({**single_passage_example(r, top), "id": f"{r['id']}|{top['id']}"})
    return out


def score_answers(records: list[dict], preds: list[dict], threshold: float) -> dict[str, float]:
    """Official SQuAD 2.0 EM/F1 of the final answers at ``threshold``, and the no-answer score's AUC."""
    from tasks.common.spans import decide
    from tasks.common.squad_metric import roc_auc

    gold = {r["id"]: list(r["answers"]) for r in records}
    m = squad_v2_metrics(gold, {p["id"]: decide(p, threshold) for p in preds})
    out = {k: float(m[k]) for k in ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1") if k in m}
    auc = roc_auc([-min(p["no_answer_score"], 1e30) for p in preds], [bool(gold[p["id"]]) for p in preds])
    if auc is not None:
        out["no_answer_auc"] = 100.0 * auc
    out["null_threshold"] = float(threshold)
    return out


def load_predictions(path: Path) -> dict[str, dict]:
    out = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            s = rec["no_answer_score"]
            rec["no_answer_score"] = math.inf if s is None else float(s)
            out[rec["id"]] = rec
    return out


def answer_nothing(records: list[dict]) -> dict[str, float]:
    gold = {r["id"]: list(r["answers"]) for r in records}
    m = squad_v2_metrics(gold, {q: "" for q in gold})
    return {k: float(m[k]) for k in ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1",
                                     "total") if k in m}


def main() -> None:
    from accelerate import Accelerator

    from tasks.passages.task import PassagesTask
    from tasks.qa.task import QATask
    from uda.devices import kept_accelerate_state

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="a finished --task passages run folder")
    ap.add_argument("--reader", required=True, help="a finished --task squad_v2 run folder (its model/)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--precision", default="bf16", choices=["no", "bf16"])
    ap.add_argument("--out", default=None, help="folder for results.json (default: print only)")
    args = ap.parse_args()
    run, reader = Path(args.run), Path(args.reader)
    for folder, need in ((run, "config.yaml"), (run, "data_info.json"), (reader, "config.yaml"), (reader, "model")):
        if not (folder / need).exists():
            sys.exit(f"error: '{folder}' has no {need}: pass a finished run folder")
    try:  # the reader must not have trained on the run's dev or test articles
        start_held_out(reader / "model", json.loads((run / "data_info.json").read_text(encoding="utf-8"))["articles"])
    except DataError as e:
        sys.exit(f"error: {e}")
    t0 = time.time()
    pcfg = build_config("passages", str(run / "config.yaml"), {"output_dir": str(run)})
    passages = PassagesTask()
    with tempfile.TemporaryDirectory() as scratch:  # the run's own built retrieval file is not rewritten
        data = passages.setup(pcfg, RunContext(Path(scratch), wants_unlabeled=pcfg.uda.lambda_u > 0))
    dev, test = list(data.dev), list(data.test)

    qa, model = QATask.from_run(reader)
    qa.dev_examples = top1_examples(dev)
    model.eval()
    with kept_accelerate_state():
        acc = Accelerator(mixed_precision=args.precision)
        top1 = qa.evaluate(model, top1_examples(test), acc, args.batch, "test")
    results = {
        "run": str(run), "reader": str(reader), "questions": {"dev": len(dev), "test": len(test)},
        "test_answerable": sum(bool(r["answers"]) for r in test),
        "bm25_top1_single_passage_reader": {k: top1[k] for k in _METRICS if k in top1},
        "answer_nothing": answer_nothing(test),
        "bm25": {k: (100.0 * v if k.startswith("recall@") else v) for k, v in recall_at_k(test).items()},
        "seconds": round(time.time() - t0, 1),
    }
    if (run / "predictions_dev.jsonl").is_file() and (run / "predictions_test.jsonl").is_file():
        results.update(reranked_systems(run, qa, model, dev, test, args))
        results["seconds"] = round(time.time() - t0, 1)
    own = run / "results.json"
    if own.is_file():
        r = json.loads(own.read_text(encoding="utf-8"))
        results["passages_reader"] = r.get("test", {})
    print(json.dumps(results, indent=2))
    if args.out:
        atomic_write_json(Path(args.out) / "results.json", results)
        print(f"wrote {Path(args.out) / 'results.json'}")


def reranked_systems(run: Path, qa, model, dev: list[dict], test: list[dict], args) -> dict:
    """The systems of the module doc that read the run's per-question predictions."""
    from accelerate import Accelerator

    from tasks.passages.task import PassagesTask
    from uda.devices import kept_accelerate_state

    pred = {s: load_predictions(run / f"predictions_{s}.jsonl") for s in ("dev", "test")}
    qa.dev_examples = ranked_top1_examples(dev, pred["dev"])
    with kept_accelerate_state():
        acc = Accelerator(mixed_precision=args.precision)
        reranked = qa.evaluate(model, ranked_top1_examples(test, pred["test"]), acc, args.batch, "test")
    out = {"reranked_top1_single_passage_reader": {k: reranked[k] for k in _METRICS if k in reranked}}
    if any(p.get("reader_no_answer_score") is not None for p in pred["dev"].values()):
        alone = {s: [{"id": q, "span_text": p["span_text"],
                      "no_answer_score": math.inf if p.get("reader_no_answer_score") is None
                      else float(p["reader_no_answer_score"])} for q, p in pred[s].items()] for s in pred}
        out["passages_reader_alone"] = score_answers(test, alone["test"], PassagesTask.fit_threshold(dev, alone["dev"]))
    return out


if __name__ == "__main__":
    main()
