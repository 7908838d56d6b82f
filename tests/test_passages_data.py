"""Multi-passage reader data: the BM25 builder on a tiny corpus (one corpus, and one per block of the
article split), DPR reader files, answer occurrences, training samples (positive inserted,
unanswerable without one) and the article split."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tasks.passages.data import answer_occurrences, load_reader_file, occurrence_tokens, split_records, \
    trainable, training_passages
from tasks.common.squad import examples_from_official, few_label_split
from tasks.passages.retrieval import build_records, corpus_sizes, recall_at_k, split_corpora, write_records
from tests.qa_fixtures import tiny_squad_file  # noqa: F401 (fixture)
from uda.data import DataError

TINY_SQUAD = {"data": [
    {"title": "Volcano", "paragraphs": [
        {"context": "Mount Etna is an active volcano on the island of Sicily.",
         "qas": [{"id": "v1", "question": "Which island is Mount Etna on?",
                  "answers": [{"text": "Sicily", "answer_start": 49}]}]},
        {"context": "Lava from Etna reached the town of Catania in 1669.",
         "qas": [{"id": "v2", "question": "When did lava reach Catania?",
                  "answers": [{"text": "1669", "answer_start": 46}]}]}]},
    {"title": "Bread", "paragraphs": [
        {"context": "Sourdough bread is leavened by wild yeast and lactic acid bacteria.",
         "qas": [{"id": "b1", "question": "What leavens sourdough bread?",
                  "answers": [{"text": "wild yeast", "answer_start": 31}]},
                 {"id": "b2", "question": "What leavens rye crackers?", "answers": [], "is_impossible": True}]}]},
    {"title": "Chess", "paragraphs": [
        {"context": "The chess champion in 1972 was Bobby Fischer, who beat Boris Spassky in Reykjavik.",
         "qas": [{"id": "c1", "question": "Who beat Boris Spassky in Reykjavik?",
                  "answers": [{"text": "Bobby Fischer", "answer_start": 31}]},
                 # its words point at the lava paragraph: BM25 ranks the gold paragraph second
                 {"id": "c2", "question": "Which champion was there when lava reached the town of Catania?",
                  "answers": [{"text": "Bobby Fischer", "answer_start": 31}]}]}]},
]}


@pytest.fixture(scope="module")
def built():
    examples = examples_from_official(TINY_SQUAD, "tiny")
    return {r["id"]: r for r in build_records(examples, k=4)}


def test_bm25_builder_finds_the_gold_paragraph_and_recall_is_as_counted_by_hand(built):
    assert [c["id"] for c in built["v1"]["ctxs"]][:1] == ["Volcano#0"]
    assert [c["id"] for c in built["b1"]["ctxs"]][:1] == ["Bread#0"]
    assert [c["id"] for c in built["c1"]["ctxs"]][:1] == ["Chess#0"]
    assert built["c2"]["ctxs"][0]["id"] == "Volcano#1"
    rank_c2 = [c["id"] for c in built["c2"]["ctxs"]].index("Chess#0") + 1
    assert rank_c2 == 2
    # has_answer is true exactly on the gold paragraph of an answerable question
    for r in built.values():
        flagged = [c["id"] for c in r["ctxs"] if c["has_answer"]]
        assert flagged == ([r["gold_ctx_id"]] if r["answers"] else [])
    assert built["b2"]["answers"] == [] and built["b2"]["positive_ctxs"] == []
    assert built["c2"]["positive_ctxs"][0]["id"] == "Chess#0"
    assert built["v1"]["ctxs"][0] == {"id": "Volcano#0", "title": "Volcano",
                                      "text": "Mount Etna is an active volcano on the island of Sicily.",
                                      "score": built["v1"]["ctxs"][0]["score"], "has_answer": True}
    # 5 answerable questions; 4 find the gold paragraph first, c2 second, all within the 4 retrieved
    assert recall_at_k(list(built.values()), (1, 2, 4)) == {"answerable": 5.0, "recall@1": 0.8, "recall@2": 1.0,
                                                            "recall@4": 1.0}


def test_built_file_is_dpr_jsonl_gz_that_loads_back(built, tmp_path):
    path = write_records(tmp_path / "data" / "retrieval.jsonl.gz", list(built.values()))
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    assert [r["id"] for r in lines] == list(built)
    assert {"question", "answers", "ctxs"} <= set(lines[0]) and {"id", "title", "text", "score", "has_answer"} <= \
        set(lines[0]["ctxs"][0])
    back = {r["id"]: r for r in load_reader_file(path)}
    assert back["c2"]["ctxs"][1]["has_answer"] and back["c2"]["article"] == "Chess"
    assert back["c2"]["positive_ctxs"][0]["id"] == "Chess#0"


def test_reader_file_fills_has_answer_from_the_answer_strings_and_names_bad_records(tmp_path):
    rows = [{"question": "who won?", "answers": ["Fischer"],
             "ctxs": [{"id": "a", "title": "t", "text": "Fischer won in 1972."},
                      {"id": "b", "title": "t", "text": "Fischerman is a word.", "has_answer": True}]},
            {"question": "who lost?", "answers": [], "ctxs": [{"id": "c", "text": "Spassky lost."}]}]
    p = tmp_path / "r.json"
    p.write_text(json.dumps(rows))
    recs = load_reader_file(p)
    assert [r["id"] for r in recs] == ["q0", "q1"]
    assert [c["has_answer"] for c in recs[0]["ctxs"]] == [True, True]  # computed; given (kept as given)
    assert recs[1]["ctxs"][0] == {"id": "c", "title": "", "text": "Spassky lost.", "has_answer": False}
    j = tmp_path / "r.jsonl"
    j.write_text("\n".join(json.dumps(r) for r in rows))
    assert [r["ctxs"] for r in load_reader_file(j)] == [r["ctxs"] for r in recs]
    j.write_text(json.dumps({"question": "q", "answers": [], "ctxs": []}))
    with pytest.raises(DataError, match=r"line 1: 'ctxs' must be a non-empty list"):
        load_reader_file(j)
    j.write_text(json.dumps({"id": 1, **rows[1]}) + "\n" + json.dumps({"id": 1, **rows[1]}))
    with pytest.raises(DataError, match="question id '1' occurs twice"):
        load_reader_file(j)


def test_answer_occurrences_whole_words_then_case_insensitive():
    text = "In 1972 Fischer won; within a year fischer played in Iceland. Fischer again."
    assert answer_occurrences(text, ["Fischer"], 10) == [(8, 15), (62, 69)]  # case-sensitive first
    assert answer_occurrences(text, ["fischer"], 10) == [(35, 42)]
    assert answer_occurrences(text, ["FISCHER"], 10) == [(8, 15), (35, 42), (62, 69)]  # no exact case: any case
    assert answer_occurrences(text, ["in"], 10) == [(50, 52)]  # not inside "within", "In" has another case
    assert answer_occurrences(text, ["Fischer", "1972"], 2) == [(3, 7), (8, 15)]
    assert answer_occurrences(text, ["Spassky"], 10) == []


def test_occurrence_tokens_drop_spans_cut_off_by_truncation():
    offsets = [None, None, None, (0, 4), (5, 9), (10, 12), (13, 20), None]  # [CLS] q [SEP] ctx... [SEP]
    assert occurrence_tokens(offsets, [(5, 12), (13, 20), (10, 11)]) == [(4, 5), (6, 6), (5, 5)]
    assert occurrence_tokens(offsets, [(13, 25), (30, 35)]) == []


def _record(ctx_flags, answers=("x",), positive_ctxs=()):
    return {"id": "q", "question": "q?", "answers": list(answers),
            "ctxs": [{"id": f"c{i}", "title": "", "text": "t", "has_answer": f} for i, f in enumerate(ctx_flags)],
            "positive_ctxs": [{"id": "gold", "title": "", "text": "x", "has_answer": True} for _ in positive_ctxs]}


def test_training_sample_positive_among_negatives_inserted_or_none():
    rng = np.random.default_rng(0)
    rec = _record([False, True, False, False, False, True])
    seen_slots, seen_pos = set(), set()
    for _ in range(30):
        ps, slot = training_passages(rec, 3, 5, rng)  # top 5: one positive (c1), negatives c0, c2, c3, c4
        assert len(ps) == 3 and ps[slot]["id"] == "c1"
        assert [p["has_answer"] for p in ps].count(True) == 1
        assert {p["id"] for p in ps} <= {"c0", "c1", "c2", "c3", "c4"}
        seen_slots.add(slot)
        seen_pos.add(frozenset(p["id"] for p in ps))
    assert seen_slots == {0, 1, 2} and len(seen_pos) > 1  # slots shuffled, negatives re-drawn
    # retrieval missed the positive: the given one is inserted
    missed = _record([False, False, False], positive_ctxs=[1])
    ps, slot = training_passages(missed, 3, 3, rng)
    assert ps[slot]["id"] == "gold" and len(ps) == 3
    # unanswerable: M negatives, no positive (the target is the no-answer option)
    ps, slot = training_passages(_record([False] * 5, answers=()), 3, 5, rng)
    assert slot is None and len(ps) == 3 and not any(p["has_answer"] for p in ps)
    # too few negatives: fewer passages (the collate pads them)
    ps, slot = training_passages(_record([True, False]), 4, 5, rng)
    assert len(ps) == 2 and ps[slot]["id"] == "c0"
    # an answerable question with no positive anywhere cannot be trained on
    assert not trainable(_record([False, False]), 5) and trainable(_record([False], answers=()), 5)
    assert trainable(_record([False, False, True]), 5) and not trainable(_record([False, False, True]), 2)


def test_split_is_the_single_passage_tasks_article_split(tiny_squad_file):  # noqa: F811
    from types import SimpleNamespace

    from tasks.passages.config import PassagesConfig
    from tasks.common.squad import load_squad_file
    from uda.config import DataConfig

    examples = load_squad_file(tiny_squad_file)
    records = build_records(examples, k=3)
    for r, e in zip(records, examples):
        r["article"] = e["title"]
    cfg = SimpleNamespace(data=DataConfig(num_labeled=8, dev_size=6, max_test=None), seed=3,
                          passages=PassagesConfig(test_articles=2, dev_articles=1, labeled_articles=2))
    ours = split_records(records, cfg)
    theirs = few_label_split(examples, num_labeled=8, dev_size=6, test_articles=2, dev_articles=1,
                             labeled_articles=2, unlabeled_from_train=True, max_unlabeled=None, max_test=None, seed=3)
    for name in ("train", "dev", "test", "unlabeled"):
        assert [r["id"] for r in ours[name]] == [e["id"] for e in theirs[name]], name
    test_articles = set(theirs["info"]["articles"]["test"])
    seen = {r["id"] for name in ("train", "dev", "unlabeled") for r in ours[name]}
    assert not any(e["id"] in seen for e in examples if e["title"] in test_articles)
    # unlabelled records carry no gold: no answers, no has_answer flags
    u = ours["unlabeled"][0]
    assert set(u) == {"id", "question", "ctxs"} and set(u["ctxs"][0]) == {"id", "title", "text"}



# ----------------------------------------------------------------------------- per-block corpora

def test_each_block_is_retrieved_from_its_own_articles_paragraphs_and_recall_is_of_what_was_retrieved():
    examples = examples_from_official(TINY_SQUAD, "tiny")
    corpus_of = {"Volcano": "train", "Bread": "test", "Chess": "test"}
    built = {r["id"]: r for r in build_records(examples, k=4, corpus_of=corpus_of)}
    for r in built.values():
        assert r["corpus"] == corpus_of[r["article"]]
        # every passage is a paragraph of an article of the question's own corpus, each corpus whole
        assert {c["id"].split("#")[0] for c in r["ctxs"]} == {t for t, n in corpus_of.items() if n == r["corpus"]}
        assert len(r["ctxs"]) == 2  # each corpus holds 2 paragraphs (k = 4 is cut to that)
    assert [c["id"] for c in built["v2"]["ctxs"]] == ["Volcano#1", "Volcano#0"]
    # c2's words point at the lava paragraph, which is now in another corpus: its gold comes first
    assert built["c2"]["ctxs"][0]["id"] == "Chess#0" and built["c2"]["ctxs"][0]["has_answer"]
    assert [c["id"] for c in built["b1"]["ctxs"]][:1] == ["Bread#0"]
    assert not any(c["has_answer"] for c in built["b2"]["ctxs"])
    # by hand: all 5 answerable questions find their gold first; a k beyond the 2 retrieved is left out
    assert recall_at_k(list(built.values()), (1, 2, 4)) == {"answerable": 5.0, "recall@1": 1.0, "recall@2": 1.0}
    assert recall_at_k([built["v1"], built["v2"]], (1,)) == {"answerable": 2.0, "recall@1": 1.0}
    assert corpus_sizes(examples, corpus_of) == {"train": 2, "test": 2}
    assert corpus_sizes(examples) == {"file": 4}
    assert {r["corpus"] for r in build_records(examples, k=4)} == {"file"}


def test_the_built_records_of_a_squad_file_never_cross_the_article_split(tiny_squad_file, tmp_path):  # noqa: F811
    from types import SimpleNamespace

    from tasks.passages.config import PassagesConfig
    from tasks.passages.data import load_passage_records
    from tasks.common.squad import load_squad_file, split_by_article
    from uda.config import DataConfig

    examples = load_squad_file(tiny_squad_file)
    blocks = split_by_article(examples, 2, 1, 2)
    corpus_of = split_corpora(examples, 2, 1, 2)
    assert corpus_of == {**{t: "test" for t in blocks["articles"]["test"]}, **{t: "dev" for t in blocks["articles"]["dev"]},
                         **{t: "train" for t in blocks["articles"]["labeled_pool"] + blocks["articles"]["unlabeled_pool"]}}
    cfg = SimpleNamespace(data=DataConfig(path=str(tiny_squad_file), num_labeled=8, dev_size=6), seed=3,
                          passages=PassagesConfig(test_articles=2, dev_articles=1, labeled_articles=2, retrieve_k=20))
    records, _, info = load_passage_records(cfg, tmp_path / "retrieval.jsonl.gz")
    assert info["corpus"] == "split" and info["paragraphs"] == {"test": 6, "dev": 3, "train": 9}
    for r in records:
        assert {corpus_of[c["id"].split("#")[0]] for c in r["ctxs"]} == {corpus_of[r["article"]]}
        assert len(r["ctxs"]) == info["paragraphs"][corpus_of[r["article"]]]
    split = split_records(records, cfg)
    train_corpus = {t for t, n in corpus_of.items() if n == "train"}
    for r in split["train"]:  # a training question's negatives (and positive) are training paragraphs only
        for ps, _ in (training_passages(r, 3, 20, np.random.default_rng(i)) for i in range(5)):
            assert {p["id"].split("#")[0] for p in ps} <= train_corpus
    whole = SimpleNamespace(data=cfg.data, seed=3, passages=PassagesConfig(test_articles=2, dev_articles=1,
                                                                           labeled_articles=2, retrieve_k=20,
                                                                           retrieval_corpus="file"))
    records, _, info = load_passage_records(whole, None)
    assert info["paragraphs"] == {"file": 18} and all(len(r["ctxs"]) == 18 for r in records)
