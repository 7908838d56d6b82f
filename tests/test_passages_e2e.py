"""End-to-end: scripts/train_uda.py --task passages on a tiny SQuAD-format file (BM25 builds the DPR
records, each block from its own articles' paragraphs) trains a tiny reader with UDA and leaves the
run folder, the built retrieval file, the per-metric checkpoint pointers and predictions_test.jsonl;
the built file, given back as a DPR reader-format --data.path, gives the same split."""

import gzip
import json
import os
import subprocess
import sys

from tests.conftest import REPO
from tests.qa_fixtures import tiny_qa_model_dir, tiny_squad_file  # noqa: F401 (fixtures)


def tiny_args(model_dir, data_file, out):
    return ["--task", "passages", "--model.name_or_path", str(model_dir), "--data.path", str(data_file),
            "--data.num_labeled", "16", "--data.dev_size", "12", "--model.max_length", "64",
            "--passages.test_articles", "2", "--passages.dev_articles", "1", "--passages.labeled_articles", "2",
            "--passages.retrieve_k", "6", "--passages.train_passages", "3", "--passages.train_top_k", "6",
            "--passages.predict_passages", "4", "--passages.unsup_passages", "2", "--passages.max_question_length",
            "12", "--passages.span_passages", "3", "--train.batch_size", "4", "--train.lr", "1e-3",
            "--train.warmup_steps", "1", "--train.eval_every", "3", "--train.log_every", "3",
            "--train.eval_batch_size", "16", "--uda.unsup_ratio", "1", "--augment.p", "0.3", "--train.max_steps", "6",
            "--report_to", "none", "--output_dir", str(out)]


def run(args):
    env = dict(os.environ, HF_HUB_OFFLINE="1", UDA_DATA_PATH="", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "train_uda.py"), *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f"train_uda.py failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}")
    return proc


def test_train_uda_passages_end_to_end(tiny_qa_model_dir, tiny_squad_file, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    proc = run(tiny_args(tiny_qa_model_dir, tiny_squad_file, out))
    assert "retrieval recall on the test articles" in proc.stderr + proc.stdout
    for name in ["config.yaml", "metrics.jsonl", "results.json", "data_info.json", "predictions_test.jsonl",
                 "predictions_dev.jsonl", "data/retrieval.jsonl.gz", "model/config.json", "model/passage_reader.json",
                 "checkpoints/latest", "checkpoints/best_em", "checkpoints/best_f1"]:
        assert (out / name).exists(), name
    assert not (out / "checkpoints" / "best").exists()
    results = json.loads((out / "results.json").read_text())
    test = results["test"]
    for key in ["em", "f1", "exact", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_f1",
                "passage@1", "passage@5", "em@1", "em@5", "top_f1", "null_threshold"]:
        assert key in test, key
    assert test["num_examples"] == 36 and test["em"] == test["exact"]
    from tasks.passages.task import PassagesTask

    assert set(PassagesTask.selectable_metrics) <= set(test)
    assert results["selected_model"]["by"] == "dev/f1"
    assert [h["step"] for h in results["dev_history"]] == [3, 6]
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("unsup/loss" in line for line in lines)
    assert any("sup/trained_ratio_span" in line for line in lines)
    info = json.loads((out / "data_info.json").read_text())
    assert set(info["retrieval"]["recall_by_split"]["test"]) == {"answerable", "recall@1", "recall@5"}  # k = 6
    # each block retrieved from its own articles' paragraphs: the test passages are test paragraphs only
    assert info["retrieval"]["corpus"] == "split" and info["retrieval"]["paragraphs"] == {"test": 6, "dev": 3, "train": 9}
    test_titles = {t.replace("_", " ") for t in info["articles"]["test"]}
    preds = [json.loads(line) for line in (out / "predictions_test.jsonl").read_text().splitlines()]
    assert len(preds) == 36
    for p in preds:
        assert {"id", "question", "gold_answers", "final_answer", "no_answer_score", "no_answer_prob",
                "threshold", "passages"} <= set(p)
        assert 1 <= len(p["passages"]) <= 3
        assert {q["title"] for q in p["passages"]} <= test_titles
        top = p["passages"][0]
        assert {"rank", "id", "title", "relevance", "selection_prob", "has_answer", "spans"} <= set(top)
        # ranked by the fused score (retriever and relevance, the weight fitted on dev), both shown
        assert {"retriever_score", "fused_score"} <= set(top) and top["retriever_score"] is not None
        key = [q["fused_score"] for q in p["passages"]]
        assert key == sorted(key, reverse=True)
        nas, thr = p["no_answer_score"], p["threshold"]
        if nas is None or abs(nas - thr) > 1e-3:  # the file rounds both to 4 digits: a near-tie can read either way
            assert p["final_answer"] == ("" if nas is not None and nas > thr else p["span_text"])
    from tasks.passages.model import load_passage_reader

    load_passage_reader(out / "model")

    # the built file is a DPR reader-format input: the same questions fall in the same splits
    with gzip.open(out / "data" / "retrieval.jsonl.gz", "rt", encoding="utf-8") as f:
        assert len(f.readlines()) == 108
    again = tmp_path / "again"
    run(tiny_args(tiny_qa_model_dir, out / "data" / "retrieval.jsonl.gz", again)[:-6]
        + ["--train.max_steps", "3", "--report_to", "none", "--output_dir", str(again)])
    for name in ("labeled_ids.txt", "dev_ids.txt"):
        assert (again / name).read_text() == (out / name).read_text()
    preds_again = [json.loads(line) for line in (again / "predictions_test.jsonl").read_text().splitlines()]
    assert [p["id"] for p in preds_again] == [p["id"] for p in preds]
    assert not (again / "data").exists()  # a reader file is read as it is


def test_passages_baselines_read_the_runs_questions(tiny_qa_model_dir, tiny_squad_file, tmp_path):  # noqa: F811
    """benchmarks/passages_baselines.py: BM25's first passage read by a squad_v2 reader, and answer-nothing,
    on the passages run's test questions; a reader that trained on the run's test articles is refused."""
    from tests.test_qa_e2e import tiny_qa_args

    passages = tmp_path / "passages"
    run(tiny_args(tiny_qa_model_dir, tiny_squad_file, passages) + ["--uda.lambda_u", "0"])
    reader = tmp_path / "reader"
    run(["--task", "squad_v2", *tiny_qa_args(tiny_qa_model_dir, tiny_squad_file), "--train.max_steps", "3",
         "--uda.lambda_u", "0", "--report_to", "none", "--output_dir", str(reader)])
    env = dict(os.environ, HF_HUB_OFFLINE="1", UDA_DATA_PATH="", OMP_NUM_THREADS="1")
    script = [sys.executable, str(REPO / "benchmarks" / "passages_baselines.py")]
    out = tmp_path / "baselines"
    subprocess.run([*script, "--run", str(passages), "--reader", str(reader), "--out", str(out)], check=True,
                   capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    res = json.loads((out / "results.json").read_text())
    assert res["questions"]["test"] == 36
    own = json.loads((passages / "results.json").read_text())["test"]
    assert res["passages_reader"]["f1"] == own["f1"]
    share = 100.0 * (36 - res["test_answerable"]) / 36  # answer-nothing scores the unanswerable share
    assert abs(res["answer_nothing"]["f1"] - share) < 1e-9 and res["answer_nothing"]["HasAns_f1"] == 0
    top1 = res["bm25_top1_single_passage_reader"]
    assert {"exact", "f1", "HasAns_f1", "NoAns_f1", "HasAns_span_f1", "null_threshold"} <= set(top1)
    # the run's predictions are there: the single-passage reader behind the reader's ranking
    assert {"exact", "f1", "null_threshold"} <= set(res["reranked_top1_single_passage_reader"])
    assert "passages_reader_alone" not in res  # the run has no single reader

    # the squad_v2 reader as the passages reader's single reader: it re-reads each top passage and its
    # no-answer score is mixed in with a weight fitted on dev; the baselines script scores the reader alone
    mixed = tmp_path / "mixed"
    run([*tiny_args(tiny_qa_model_dir, tiny_squad_file, mixed), "--uda.lambda_u", "0", "--train.max_steps", "3",
         "--passages.single_reader", str(reader)])
    test = json.loads((mixed / "results.json").read_text())["test"]
    assert test["single_reader_weight"] in [k / 10 for k in range(11)]
    recs = [json.loads(line) for line in (mixed / "predictions_test.jsonl").read_text().splitlines()]
    assert all(r["single_reader_score"] is not None for r in recs if r["span_text"])
    assert any(r["reader_no_answer_score"] != r["no_answer_score"] for r in recs)  # standardised and mixed
    subprocess.run([*script, "--run", str(mixed), "--reader", str(reader), "--out", str(out)], check=True,
                   capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    alone = json.loads((out / "results.json").read_text())["passages_reader_alone"]
    assert {"exact", "f1", "no_answer_auc", "null_threshold"} <= set(alone)

    leaky = tmp_path / "leaky"  # trained on what the passages run holds out (another article split)
    run(["--task", "squad_v2", *tiny_qa_args(tiny_qa_model_dir, tiny_squad_file), "--qa.test_articles", "1",
         "--qa.labeled_articles", "3", "--train.max_steps", "1", "--train.eval_every", "1", "--uda.lambda_u", "0",
         "--report_to", "none", "--output_dir", str(leaky)])
    proc = subprocess.run([*script, "--run", str(passages), "--reader", str(leaky)], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=600)
    assert proc.returncode != 0 and "trained on" in proc.stderr and "test_articles" in proc.stderr

    # a passages reader can start from the squad_v2 reader (its span head) when that one held out the
    # same articles, and is refused one that trained on its dev or test articles
    started = tmp_path / "started"
    run([*tiny_args(tiny_qa_model_dir, tiny_squad_file, started), "--uda.lambda_u", "0", "--train.max_steps", "1",
         "--train.eval_every", "1", "--model.name_or_path", str(reader / "model")])
    assert (started / "results.json").is_file()
    args = [*tiny_args(tiny_qa_model_dir, tiny_squad_file, tmp_path / "refused"), "--uda.lambda_u", "0",
            "--model.name_or_path", str(leaky / "model")]
    env = dict(os.environ, HF_HUB_OFFLINE="1", UDA_DATA_PATH="", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "train_uda.py"), *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=600)
    assert proc.returncode != 0 and "comes from the run" in proc.stderr and str(leaky) in proc.stderr
    for single, says in ((leaky, "comes from the run"), (tmp_path / "nowhere", "has no config.yaml")):
        args = [*tiny_args(tiny_qa_model_dir, tiny_squad_file, tmp_path / "refused2"), "--uda.lambda_u", "0",
                "--passages.single_reader", str(single)]
        proc = subprocess.run([sys.executable, str(REPO / "scripts" / "train_uda.py"), *args], capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=600)
        assert proc.returncode != 0 and says in proc.stderr and str(single) in proc.stderr



def test_ranked_top1_examples_read_the_readers_first_passage():
    """The reranked baseline reads the passage the reader ranked first, under an id of its own (the
    single-passage reader caches features by example ids, and BM25's first passage had the question's)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("passages_baselines", REPO / "benchmarks" / "passages_baselines.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rec = {"id": "q1", "question": "who?", "answers": ["Ann"],
           "ctxs": [{"id": "p1", "title": "A", "text": "Bob."}, {"id": "p2", "title": "B", "text": "Ann."}]}
    [bm25] = mod.top1_examples([rec])
    [ranked] = mod.ranked_top1_examples([rec], {"q1": {"passages": [{"id": "p2"}, {"id": "p1"}]}})
    assert (bm25["id"], bm25["context"]) == ("q1", "Bob.")
    assert (ranked["id"], ranked["context"], ranked["answers"]) == ("q1|p2", "Ann.", [{"text": "Ann"}])
