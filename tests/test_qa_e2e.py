"""End-to-end: a tiny QA model trains with UDA through scripts/train_uda.py --task squad_v2 and leaves
the expected run folder; the few-label sweep script runs in --quick mode."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.qa_fixtures import tiny_qa_model_dir, tiny_squad_file  # noqa: F401 (fixtures)


def tiny_qa_args(model_dir, data_file):
    return ["--model.name_or_path", str(model_dir), "--data.path", str(data_file),
            "--data.num_labeled", "16", "--data.dev_size", "12", "--model.max_length", "48",
            "--qa.doc_stride", "8", "--qa.max_question_length", "12", "--qa.test_articles", "2",
            "--qa.dev_articles", "1", "--qa.labeled_articles", "2", "--train.batch_size", "4",
            "--train.lr", "1e-3", "--train.warmup_steps", "1", "--train.eval_every", "3", "--train.log_every", "3",
            "--train.eval_batch_size", "16", "--uda.unsup_ratio", "1", "--augment.p", "0.3"]


def run(script, args):
    env = dict(os.environ, HF_HUB_OFFLINE="1", UDA_DATA_PATH="")
    path = REPO / ("benchmarks" if script == "sweep.py" else "scripts") / script
    proc = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f"{script} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}")
    return proc


def test_train_uda_squad_v2_end_to_end(tiny_qa_model_dir, tiny_squad_file, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    run("train_uda.py", ["--task", "squad_v2", *tiny_qa_args(tiny_qa_model_dir, tiny_squad_file),
                         "--train.max_steps", "6", "--report_to", "none", "--output_dir", str(out)])
    for name in ["config.yaml", "metrics.jsonl", "results.json", "data_info.json", "predictions_test.jsonl",
                 "predictions_dev.jsonl", "predictions_test_official.json", "na_scores_test.json",
                 "model/config.json", "model/answerability_head.json"]:
        assert (out / name).exists(), name
    results = json.loads((out / "results.json").read_text())
    test = results["test"]
    for key in ["exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "best_f1", "null_threshold",
                "HasAns_span_f1", "answerability_accuracy"]:
        assert key in test, key
    assert test["num_examples"] == 36 and test["threshold_fitted_on_dev"] == 1.0
    from tasks.qa.task import QATask

    assert set(QATask.selectable_metrics) <= set(test)  # what --eval.select_metric accepts is computed
    assert results["selected_model"]["by"] == "dev/best_f1"
    assert [h["step"] for h in results["dev_history"]] == [3, 6]
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("unsup/loss" in line for line in lines)
    info = json.loads((out / "data_info.json").read_text())
    assert info["counts"]["train"]["questions"] == 16 and info["counts"]["test"]["questions"] == 36
    # the id files name questions (one line each, however many windows a question was cut into)
    from tasks.common.squad import load_squad_file

    all_ids = {e["id"] for e in load_squad_file(tiny_squad_file)}
    for name, count in (("labeled_ids.txt", 16), ("dev_ids.txt", info["counts"]["dev"]["questions"])):
        ids = (out / name).read_text().split()
        assert len(ids) == len(set(ids)) == count and set(ids) <= all_ids, name
    preds = [json.loads(line) for line in (out / "predictions_test.jsonl").read_text().splitlines()]
    assert len(preds) == 36
    p = preds[0]
    for key in ["id", "gold_answers", "prediction", "score", "no_answer_score", "answerability_prob", "n_best"]:
        assert key in p, key
    assert p["n_best"] and {"text", "score"} <= set(p["n_best"][0])
    # the prediction follows the dev-fitted threshold
    for q in preds:
        assert q["prediction"] == ("" if q["no_answer_score"] > q["threshold"] else q["span_text"])
    # the saved reader loads back
    from tasks.common.qa_reader import load_qa_model

    load_qa_model(out / "model")


def test_few_label_script_quick(tiny_qa_model_dir, tiny_squad_file, tmp_path):  # noqa: F811
    out = tmp_path / "sweep"
    proc = run("sweep.py", ["--task", "squad_v2", "--out", str(out), "--num_labeled", "8", "--seeds", "0", "1", "--quick", "--",
                                   *tiny_qa_args(tiny_qa_model_dir, tiny_squad_file)])
    for name in ["supervised-n8-seed0", "uda-n8-seed0", "supervised-n8-seed1", "uda-n8-seed1"]:
        assert (out / name / "results.json").exists(), name
    summary = json.loads((out / "summary.json").read_text())
    assert {(t["method"], t["num_labeled"], t["seeds"]) for t in summary["table"]} == {("supervised", 8, 2),
                                                                                        ("uda", 8, 2)}
    assert "f1_mean" in summary["table"][0] and "f1_std" in summary["table"][0]
    assert (out / "f1_vs_num_labeled.png").stat().st_size > 1000
    assert "| 8 | uda | 2 |" in (out / "summary.md").read_text() and "| 8 | uda | 2 |" in proc.stdout
    # a second call skips finished runs and only rebuilds the summary
    proc = run("sweep.py", ["--task", "squad_v2", "--out", str(out), "--num_labeled", "8", "--seeds", "0", "1", "--quick", "--",
                                   *tiny_qa_args(tiny_qa_model_dir, tiny_squad_file)])
    assert proc.stdout.count("already finished") == 4


def test_sweep_runs_in_parallel_with_all_labels_and_the_answer_nothing_line(tiny_qa_model_dir, tiny_squad_file,  # noqa: F811
                                                                             tmp_path):
    """--jobs 2: each run in its own process, its output in <out>/<run>.log; --num_labeled all sits on the
    curve at its number of questions; the summary names the answer-nothing F1 of the test questions."""
    out = tmp_path / "sweep"
    args = ["--task", "squad_v2", "--out", str(out), "--num_labeled", "8", "all", "--seeds", "0",
            "--methods", "supervised", "--jobs", "2", "--quick", "--", *tiny_qa_args(tiny_qa_model_dir, tiny_squad_file)]
    proc = run("sweep.py", args)
    for name in ["supervised-n8-seed0", "supervised-nall-seed0"]:
        assert (out / name / "results.json").exists(), name
        assert f"done {name}" in proc.stdout
        assert "run folder" in (out / f"{name}.log").read_text()  # the run's console output
    summary = json.loads((out / "summary.json").read_text())
    by_n = {t["num_labeled"]: t for t in summary["table"]}
    pool = json.loads((out / "supervised-nall-seed0" / "results.json").read_text())["data"]["counts"]["labeled_pool"]
    assert by_n["all"]["num_train"] == pool["questions"] and by_n[8]["num_train"] == 8
    test = json.loads((out / "supervised-n8-seed0" / "results.json").read_text())["test"]
    nothing = 100.0 * test["NoAns_total"] / test["total"]
    assert by_n[8]["answer_nothing"] == pytest.approx(nothing)
    assert f"answers none): {nothing:.2f}" in (out / "summary.md").read_text()
    assert (out / "f1_vs_num_labeled.png").stat().st_size > 1000
    assert "already finished" in run("sweep.py", args).stdout  # finished runs are not run again


def test_parallel_sweep_reports_a_failed_run_and_summarises_the_others(tiny_qa_model_dir, tiny_squad_file,  # noqa: F811
                                                                          tmp_path):
    """--jobs 2 with one run that cannot start (more labelled questions than the pool holds): the error
    names the run and its log, the finished run is summarised, and the exit status is 2."""
    out = tmp_path / "sweep"
    env = dict(os.environ, HF_HUB_OFFLINE="1", UDA_DATA_PATH="")
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sweep.py"), "--task", "squad_v2", "--out", str(out),
                           "--num_labeled", "8", "5000", "--seeds", "0", "--methods", "supervised", "--jobs", "2",
                           "--quick", "--", *tiny_qa_args(tiny_qa_model_dir, tiny_squad_file)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "error in supervised-n5000-seed0: DataError" in proc.stderr and "supervised-n5000-seed0.log" in proc.stderr
    assert "num_labeled" in (out / "supervised-n5000-seed0.log").read_text()  # the trace is in the run's log
    assert "done supervised-n8-seed0" in proc.stdout and "| 8 | supervised | 1 |" in (out / "summary.md").read_text()


@pytest.mark.parametrize("bad,msg", [({"qa.doc_stride": "40"}, "qa.doc_stride"),
                                     ({"data.num_labeled": "500"}, "num_labeled")])
def test_bad_settings_are_clear_errors(tiny_qa_model_dir, tiny_squad_file, bad, msg, tmp_path):  # noqa: F811
    from tasks.qa.task import QATask
    from uda.config import build_config, parse_cli
    from uda.task import RunContext

    _, _, over, _ = parse_cli(tiny_qa_args(tiny_qa_model_dir, tiny_squad_file))
    cfg = build_config("squad_v2", None, {**over, **bad})
    with pytest.raises(ValueError, match=msg):  # ConfigError and DataError are ValueErrors
        QATask().setup(cfg, RunContext(tmp_path, wants_unlabeled=True))


def test_select_metric_picks_the_model_by_that_dev_metric(tiny_qa_model_dir, tiny_squad_file, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    run("train_uda.py", ["--task", "squad_v2", *tiny_qa_args(tiny_qa_model_dir, tiny_squad_file),
                         "--train.max_steps", "6", "--uda.lambda_u", "0", "--eval.select_metric", "HasAns_span_f1",
                         "--report_to", "none", "--output_dir", str(out)])
    results = json.loads((out / "results.json").read_text())
    assert results["selected_model"]["by"] == "dev/HasAns_span_f1"
    history = results["dev_history"]
    best = max(h["HasAns_span_f1"] for h in history)
    assert results["selected_model"]["step"] == next(h["step"] for h in history if h["HasAns_span_f1"] == best)


def test_unknown_select_metric_is_an_error_naming_the_option(tiny_qa_model_dir, tiny_squad_file, tmp_path):  # noqa: F811
    env = dict(os.environ, HF_HUB_OFFLINE="1", UDA_DATA_PATH="")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "train_uda.py"), "--task", "squad_v2",
                           *tiny_qa_args(tiny_qa_model_dir, tiny_squad_file), "--train.max_steps", "3",
                           "--uda.lambda_u", "0", "--eval.select_metric", "accuracy", "--report_to", "none",
                           "--output_dir", str(tmp_path / "run")], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=600)
    assert proc.returncode != 0
    assert "--eval.select_metric 'accuracy'" in proc.stderr and "HasAns_span_f1" in proc.stderr


def test_question_pool_from_uda_augment_trains_as_precomputed_copies(tiny_qa_model_dir, tiny_squad_file,  # noqa: F811
                                                                      tmp_path):
    """uda-augment --task squad_v2 writes copies of exactly the unlabelled questions that training's
    consistency loss augments (the article split of the config), and training reads them back."""
    import gzip

    split = tmp_path / "split.yaml"
    split.write_text("data:\n  num_labeled: 16\n  dev_size: 12\nqa:\n  test_articles: 2\n  dev_articles: 1\n"
                     "  labeled_articles: 2\n", encoding="utf-8")
    copies = tmp_path / "questions.jsonl.gz"
    run("uda_augment.py", ["--task", "squad_v2", "--config", str(split), "--data_path", str(tiny_squad_file),
                           "--method", "swap", "--copies", "1", "--output", str(copies), "--no_progress"])
    rows = [json.loads(line) for line in gzip.open(copies, "rt", encoding="utf-8")]
    out = tmp_path / "run"
    run("train_uda.py", ["--task", "squad_v2", *tiny_qa_args(tiny_qa_model_dir, tiny_squad_file),
                         "--augment.method", "precomputed", "--augment.file", str(copies),
                         "--train.max_steps", "3", "--report_to", "none", "--output_dir", str(out)])
    info = json.loads((out / "data_info.json").read_text())
    assert len(rows) == info["counts"]["unlabeled"] > 0  # one row per unlabelled question, none missing
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("unsup/loss" in line for line in lines)


def test_distribution_alignment_acts_on_the_answerability_head(tiny_qa_model_dir, tiny_squad_file, tmp_path):  # noqa: F811
    from tasks.qa.task import QATask
    from uda.config import build_config, parse_cli
    from uda.task import RunContext

    _, _, over, _ = parse_cli(tiny_qa_args(tiny_qa_model_dir, tiny_squad_file))
    context = RunContext(tmp_path / "setup", wants_unlabeled=True)
    data = QATask().setup(build_config("squad_v2", None, over), context)
    assert data.class_logits_index == 2  # consistency_logits(): start, end, answerability
    assert torch_close(data.class_prior, [0.5, 0.5])  # 16 labelled questions, half answerable
    off = QATask().setup(build_config("squad_v2", None, {**over, "qa.answerability_consistency": "false"}), context)
    assert off.class_logits_index is None and len(data.train) > 0
    # a short UDA run with alignment by prior matching trains and logs the aligned head's class shares
    out = tmp_path / "run"
    run("train_uda.py", ["--task", "squad_v2", *tiny_qa_args(tiny_qa_model_dir, tiny_squad_file),
                         "--train.max_steps", "4", "--uda.distribution_alignment", "true", "--uda.alignment_bank",
                         "8", "--report_to", "none", "--output_dir", str(out)])
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("unsup/loss" in line for line in lines)


def torch_close(t, values):
    import torch

    return torch.allclose(t, torch.tensor(values, dtype=t.dtype))
