"""A run's saved model (RUN/model) in transformers' own pipeline: the classifier it trained, the window it
read (max_length, truncation side) and the cleaning it applied (HTML line breaks), so that
``pipeline("text-classification", model=RUN/model, trust_remote_code=True, truncation=True)`` gives the
run's own test predictions, with either pooling."""

from __future__ import annotations

import json
import random
import shutil

import pytest

from tests.conftest import FILLER, POS_WORDS, write_jsonl
from tests.trainkit import model_dir, run, tiny_config  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


def _extra_test_rows() -> list[dict]:
    """Texts where an export that forgot the run's window or cleaning predicts differently: longer than
    the run's 32 tokens (the cue words at one end only), and with HTML line breaks (the tiny vocabulary
    has "<", "/", ">" and "br", so uncleaned breaks become tokens)."""
    rng = random.Random(7)
    filler = lambda n: " ".join(rng.choice(FILLER) for _ in range(n))  # noqa: E731
    return [
        {"id": "long_cue_first", "text": "great wonderful superb " + filler(70) + ".", "label": 1},
        {"id": "long_cue_last", "text": filler(70) + " awful terrible dull.", "label": 0},
        {"id": "br", "text": "the movie was fun<br /><br />great acting<BR>and a good story<br/>.", "label": 1},
        {"id": "long_br", "text": ("boring <br /> " * 30) + "loved it<br />.", "label": 0},
    ]


def _run_with_long_and_br_test_texts(model_dir, tiny_text_data, tmp_path, **overrides):
    data = tmp_path / "data"
    shutil.copytree(tiny_text_data, data)
    rows = [json.loads(line) for line in (data / "test.jsonl").read_text().splitlines()][:12]
    rows += _extra_test_rows()
    write_jsonl(data / "test.jsonl", rows)
    out = tmp_path / "run"
    run(tiny_config(model_dir, data, out, **{"uda.lambda_u": 0, "train.max_steps": 6, "train.eval_every": 6,
                                             **overrides}))
    return out, rows


def _pipeline_probs(clf, texts: list[str], label_names: list[str]) -> list[list[float]]:
    probs = []
    for scores in clf(texts, top_k=None):
        by_label = {s["label"]: s["score"] for s in scores}
        probs.append([by_label[name] for name in label_names])
    return probs


@pytest.mark.parametrize("pooling,side", [("mean", "right"), ("mean", "left"), ("cls", "right")])
def test_export_pipeline_gives_the_runs_test_predictions(model_dir, tiny_text_data, tmp_path, pooling, side):
    from transformers import AutoTokenizer, pipeline

    out, rows = _run_with_long_and_br_test_texts(model_dir, tiny_text_data, tmp_path, **{
        "model.pooling": pooling, "model.truncation_side": side})
    folder = out / "model"
    predictions = [json.loads(line) for line in (out / "predictions_test.jsonl").read_text().splitlines()]
    assert [p["id"] for p in predictions] == [r["id"] for r in rows]
    label_names = json.loads((folder / "label_names.json").read_text())

    # the saved tokenizer carries the run's window and cleaning
    tok = AutoTokenizer.from_pretrained(folder)
    assert tok.model_max_length == 32 and tok.truncation_side == side
    assert tok("fun<br />great")["input_ids"] == tok("fun great")["input_ids"]
    assert len(tok(rows[-1]["text"])["input_ids"]) > 32  # the long texts do need the window

    clf = pipeline("text-classification", model=str(folder), trust_remote_code=True, truncation=True)
    got = _pipeline_probs(clf, [r["text"] for r in rows], label_names)
    for p, g in zip(predictions, got):
        assert g == pytest.approx(p["probs"], abs=1e-4), p["id"]
    if pooling == "mean":  # the head was trained: not the near-uniform output of a fresh one
        assert max(abs(a - b) for a, b in (p["probs"] for p in predictions)) > 0.01
        # the shipped pipeline truncates by default
        default = pipeline("text-classification", model=str(folder), trust_remote_code=True)
        assert _pipeline_probs(default, [rows[-1]["text"]], label_names)[0] == pytest.approx(
            predictions[-1]["probs"], abs=1e-4)


def test_export_without_trust_remote_code_is_an_error_not_a_random_head(model_dir, tiny_text_data, tmp_path):
    from transformers import AutoModelForSequenceClassification, pipeline

    from tasks.text.model import load_text_classifier

    out, _ = _run_with_long_and_br_test_texts(model_dir, tiny_text_data, tmp_path, **{"model.pooling": "mean"})
    with pytest.raises(ValueError, match="trust_remote_code"):
        pipeline("text-classification", model=str(out / "model"))
    # the shipped class and the library's loader hold the same weights
    hf = AutoModelForSequenceClassification.from_pretrained(out / "model", trust_remote_code=True)
    ours = load_text_classifier(out / "model")
    theirs = hf.state_dict()
    for k, v in ours.state_dict().items():
        assert k in theirs and theirs[k].equal(v), k
