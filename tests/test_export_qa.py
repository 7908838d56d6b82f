"""A squad_v2 run's saved reader (RUN/model) in transformers' own loaders: the span model and the
answerability head in ``AutoModelForQuestionAnswering`` with ``trust_remote_code=True``, and a
question-answering pipeline that windows, searches spans and decides "no answer" as the run did, so that
``pipeline("question-answering", model=RUN/model, trust_remote_code=True)`` gives the run's test
predictions; without ``trust_remote_code`` the pipeline is an error and the model a plain span model."""

from __future__ import annotations

import json
import random
import shutil
from itertools import pairwise
from pathlib import Path

import pytest

from tests.qa_fixtures import make_paragraph, tiny_qa_model_dir  # noqa: F401 (fixture)
from tests.test_qa_e2e import run, tiny_qa_args

pytestmark = pytest.mark.usefixtures("one_thread")


def _squad_with_long_contexts(path: Path) -> Path:
    """The tiny SQuAD layout with every other paragraph twice as long (6 facts): its contexts need two or
    more windows of the runs' 48 tokens, and its unanswerable questions (up to six "?") get cut."""
    rng = random.Random(3)
    data = [{"title": f"Article_{a}", "paragraphs": [make_paragraph(rng, f"q{a}-{p}", n_facts=3 + 3 * (p % 2))
                                                     for p in range(3)]} for a in range(6)]
    path.write_text(json.dumps({"version": "v2.0", "data": data}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def marked_model_dir(tiny_qa_model_dir, tmp_path_factory):  # noqa: F811
    """The tiny model with the [QUESTION] token a uda-qa-start start has: the run's questions end in
    " [QUESTION]." inside the question budget."""
    from transformers import AutoTokenizer, BertForQuestionAnswering

    d = tmp_path_factory.mktemp("tiny_qa_marked")
    tok = AutoTokenizer.from_pretrained(tiny_qa_model_dir)
    tok.add_special_tokens({"additional_special_tokens": ["[QUESTION]"]})
    model = BertForQuestionAnswering.from_pretrained(tiny_qa_model_dir)
    model.resize_token_embeddings(len(tok))
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def _train(model_dir: Path, tmp: Path, max_question_length: int) -> Path:
    data = _squad_with_long_contexts(tmp / "tiny-long-v2.0.json")
    out = tmp / "run"
    run("train_uda.py", ["--task", "squad_v2", *tiny_qa_args(model_dir, data), "--qa.max_question_length",
                         str(max_question_length), "--uda.lambda_u", "0", "--train.max_steps", "24",
                         "--train.eval_every", "12", "--report_to", "none", "--output_dir", str(out)])
    return out


@pytest.fixture(scope="module")
def qa_run(tiny_qa_model_dir, tmp_path_factory):  # noqa: F811
    return _train(tiny_qa_model_dir, tmp_path_factory.mktemp("qa_export_run"), 8)


@pytest.fixture(scope="module")
def marked_qa_run(marked_model_dir, tmp_path_factory):
    return _train(marked_model_dir, tmp_path_factory.mktemp("qa_export_marked_run"), 6)


def _test_questions(out: Path) -> list[tuple[dict, dict]]:
    """(example, line of predictions_test.jsonl) of every test question of the run."""
    from tasks.common.squad import load_squad_file

    examples = {e["id"]: e for e in load_squad_file(out.parent / "tiny-long-v2.0.json")}
    preds = [json.loads(line) for line in (out / "predictions_test.jsonl").read_text().splitlines()]
    return [(examples[p["id"]], p) for p in preds]


def _a_threshold_between_scores(scores: list[float]) -> float:
    """A threshold in the widest gap of the middle half of the sorted finite scores (so that the rounded
    scores of the predictions file decide the same way), answering some questions and not others."""
    s = sorted(x for x in scores if x is not None)
    mid = s[len(s) // 4: 3 * len(s) // 4 + 1]
    gap, i = max((b - a, i) for i, (a, b) in enumerate(pairwise(mid)))
    assert gap > 1e-3
    return (mid[i] + mid[i + 1]) / 2


@pytest.mark.parametrize("which", ["plain", "marked"])
def test_export_qa_pipeline_gives_the_runs_test_predictions(which, request):
    from transformers import AutoTokenizer, pipeline

    out = request.getfixturevalue("qa_run" if which == "plain" else "marked_qa_run")
    folder = out / "model"
    rows = _test_questions(out)
    settings = json.loads((folder / "config.json").read_text())["uda_qa"]
    results = json.loads((out / "results.json").read_text())
    # the threshold written at the end of the run is the one the run applied to test
    assert settings["null_threshold"] == results["test"]["null_threshold"] == pytest.approx(rows[0][1]["threshold"],
                                                                                            abs=1e-4)
    assert settings["question_suffix"] == ("" if which == "plain" else " [QUESTION].")
    assert "trust_remote_code=True" in json.loads((folder / "answerability_head.json").read_text())["load"]
    # the data exercises the windowing and the question cut
    tok = AutoTokenizer.from_pretrained(folder)
    assert max(len(tok(e["question"], e["context"])["input_ids"]) for e, _ in rows) > settings["max_length"]
    assert max(len(tok.tokenize(e["question"])) for e, _ in rows) > settings["max_question_length"]
    if which == "plain":  # the run's threshold decides: some test questions answered, some not
        assert 0 < sum(bool(p["prediction"]) for _, p in rows) < len(rows)

    qa = pipeline("question-answering", model=str(folder), trust_remote_code=True)
    got = [qa(question=e["question"], context=e["context"]) for e, _ in rows]
    for (e, p), g in zip(rows, got):
        assert g["answer"] == p["prediction"], p["id"]
        assert g["span_text"] == p["span_text"], p["id"]
        assert g["no_answer_score"] == pytest.approx(p["no_answer_score"], abs=2e-4), p["id"]
        if g["answer"]:
            assert e["context"][g["start"]:g["end"]] == g["answer"]
    # lists in, a list out; and another threshold (threshold=) decides as the run's rule would
    t = _a_threshold_between_scores([p["no_answer_score"] for _, p in rows])
    batch = qa(question=[e["question"] for e, _ in rows], context=[e["context"] for e, _ in rows], threshold=t)
    assert [g["answer"] for g in batch] == ["" if p["no_answer_score"] > t else p["span_text"] for _, p in rows]


def test_export_qa_needs_trust_remote_code_else_a_plain_span_model(qa_run):
    from transformers import AutoModelForQuestionAnswering, pipeline

    from tasks.common.qa_reader import QAWithAnswerability, build_qa_model, load_qa_model

    folder = qa_run / "model"
    with pytest.raises(ValueError, match="trust_remote_code"):
        pipeline("question-answering", model=str(folder))
    # without it transformers reads the span model alone (documented): no answerability head, no decision
    plain = AutoModelForQuestionAnswering.from_pretrained(folder)
    assert type(plain).__name__ == "BertForQuestionAnswering" and not hasattr(plain, "answerability")
    # with it, every saved weight loads into the shipped class, and they are the library loader's
    hf = AutoModelForQuestionAnswering.from_pretrained(folder, trust_remote_code=True)
    assert type(hf).__name__ == "UdaQAWithAnswerability"
    ours = load_qa_model(folder)
    theirs = hf.state_dict()
    from safetensors.torch import load_file

    saved = load_file(str(folder / "model.safetensors"))
    assert set(saved) <= set(theirs)
    for k, v in ours.state_dict().items():
        assert k in theirs and theirs[k].equal(v), k
    # the library's loaders take the folder as before: the plain span model plus the library's head,
    # with no export entries carried into what they would save
    for model in (ours, build_qa_model(str(folder))):
        assert type(model) is QAWithAnswerability and type(model.span_model).__name__ == "BertForQuestionAnswering"
        assert not hasattr(model.config, "uda_qa") and "custom_pipelines" not in model.config.to_dict()
        assert "AutoModelForQuestionAnswering" not in (getattr(model.config, "auto_map", None) or {})


def test_export_qa_checkpoint_has_no_threshold_until_the_run_ends(qa_run, tmp_path):
    from transformers import pipeline

    ckpt = max((qa_run / "checkpoints").glob("step-*")) / "model"
    assert json.loads((ckpt / "config.json").read_text())["uda_qa"]["null_threshold"] is None
    folder = tmp_path / "ckpt_model"
    shutil.copytree(ckpt, folder)
    qa = pipeline("question-answering", model=str(folder), trust_remote_code=True)
    e, _ = _test_questions(qa_run)[0]
    with pytest.raises(ValueError, match="threshold="):
        qa(question=e["question"], context=e["context"])
    assert qa(question=e["question"], context=e["context"], threshold=1e9)["answer"]  # never "no answer"
