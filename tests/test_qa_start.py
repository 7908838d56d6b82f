"""The QA-shaped start (uda-qa-start): the synthetic-example builder on strings and word pieces, the
held-out check, resume, and that the saved start loads in the squad_v2 and passages tasks."""

import json
import random

import numpy as np
import pytest

from tasks.qa.start import StartError, build_start, check_args, parser
from tasks.qa.synthetic import (QUESTION_TOKEN, kind_counts, name_and_number_spans, paragraph_examples,
                                recurring_spans, sentences, synthetic_examples)
from tests.qa_fixtures import tiny_qa_model_dir  # noqa: F401 (fixture)

CITIES = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Delhi", "Tokyo", "Quito"]
ANIMALS = ["fox", "cat", "dog", "owl", "bee", "cow"]


def paragraph(rng: random.Random) -> str:
    a, b = rng.sample(CITIES, 2)
    x, y = rng.sample(ANIMALS, 2)
    return (f"The red {x} lives in {a} near the old river. The river runs from {a} to {b} in {1800 + rng.randrange(200)}. "
            f"A blue {y} lives in {b} with the red {x}. Every spring the {y} flies over the old river to {a}.")


def squad_file(path, n_articles=8, paragraphs=4, seed=0):
    rng = random.Random(seed)
    data = [{"title": f"Article_{k}", "paragraphs": [{"context": paragraph(rng), "qas": []} for _ in range(paragraphs)]}
            for k in range(n_articles)]
    path.write_text(json.dumps({"version": "v2.0", "data": data}), encoding="utf-8")
    return path


def check_offsets(e):
    for a in e["answers"]:
        assert e["context"][a["answer_start"]:a["answer_start"] + len(a["text"])] == a["text"]


def test_recurring_span_is_found_masked_in_the_question_and_answered_elsewhere():
    text = ("The Normans came from Normandy in the north. Their dukes ruled Normandy for two centuries. "
            "Later the kings of France took the land.")
    spans = recurring_spans(text)
    assert "normandy" in spans and len(spans["normandy"]) == 2
    assert all(text[s.start:s.end] == "Normandy" for s in spans["normandy"])
    assert "the" not in spans  # stopwords alone are no span
    rng = np.random.default_rng(0)
    ex = paragraph_examples(text, "p", "t", rng, per_paragraph=30, recurring_weight=1.0, cloze_weight=0.0,
                            unanswerable=0.0)
    rec = [e for e in ex if e["kind"] == "recurring" and e["answers"][0]["text"] == "Normandy"]
    assert rec
    for e in rec:
        check_offsets(e)
        assert QUESTION_TOKEN in e["question"] and "Normandy" not in e["question"]
        # the question's sentence is cut out of the context: the answer is the other occurrence
        q_sentence = e["question"].replace(QUESTION_TOKEN, "Normandy").rstrip(".")
        assert q_sentence not in e["context"]
        assert e["context"].count("Normandy") == 1


def test_names_numbers_and_sentences():
    text = "In 1066 the Duke of Normandy crossed to England. He won the Battle of Hastings on 14 October 1066."
    sents = sentences(text)
    assert [text[s.start:s.end] for s in sents] == ["In 1066 the Duke of Normandy crossed to England.",
                                                    "He won the Battle of Hastings on 14 October 1066."]
    got = [text[s.start:s.end] for s in name_and_number_spans(text, sents[0])]
    assert got == ["1066", "Duke of Normandy", "England"]
    got = [text[s.start:s.end] for s in name_and_number_spans(text, sents[1])]
    assert got == ["Battle of Hastings", "14 October 1066"]


def test_synthetic_examples_offsets_kinds_and_unanswerable_share():
    rng = random.Random(1)
    paras = [(f"p{i}", "T", paragraph(rng)) for i in range(60)]
    ex = synthetic_examples(paras, seed=3, per_paragraph=8, unanswerable=0.33)
    counts = kind_counts(ex)
    assert all(counts[k] > 0 for k in ("recurring", "cloze", "removed", "swapped")), counts
    for e in ex:
        check_offsets(e)
        assert QUESTION_TOKEN in e["question"]
        if e["kind"] in ("removed", "swapped"):
            assert e["is_impossible"] and e["answers"] == []
        else:
            assert not e["is_impossible"] and len(e["answers"]) == 1
    share = sum(e["is_impossible"] for e in ex) / len(ex)
    assert 0.25 < share < 0.42
    # deterministic in the seed
    assert synthetic_examples(paras, seed=3, per_paragraph=8) == ex
    assert synthetic_examples(paras, seed=4, per_paragraph=8) != ex


def test_removed_context_holds_no_answer_and_swapped_question_changes_a_name():
    rng = random.Random(2)
    ex = synthetic_examples([(f"p{i}", "T", paragraph(rng)) for i in range(40)], seed=0, per_paragraph=10,
                            unanswerable=0.9)
    removed = [e for e in ex if e["kind"] == "removed"]
    swapped = [e for e in ex if e["kind"] == "swapped"]
    assert removed and swapped
    for e in swapped:  # the context is the whole paragraph, but the question names something it does not say
        assert e["question"].replace(QUESTION_TOKEN, "") not in e["context"]


def start_args(model_dir, out, **kw):
    argv = ["--output_dir", str(out), "--model", str(model_dir), "--max_length", "112", "--doc_stride", "16",
            "--max_question_length", "48", "--batch_size", "4", "--max_steps", "6", "--eval_every", "3",
            "--log_every", "2", "--held_out", "8", "--per_paragraph", "4", "--report_to", "none",
            "--progress", "false", "--threads", "1", "--test_articles", "2", "--dev_articles", "1"]
    for k, v in kw.items():
        if f"--{k}" in argv:
            argv[argv.index(f"--{k}") + 1] = str(v)
        else:
            argv += [f"--{k}", str(v)]
    args = parser().parse_args(argv)
    check_args(args)
    return args


def test_tokenised_labels_point_at_the_answer_and_the_token_is_saved(tiny_qa_model_dir, tmp_path):  # noqa: F811
    from transformers import AutoTokenizer

    from tasks.qa.start import start_features

    sq = squad_file(tmp_path / "s.json")
    out = tmp_path / "start"
    results = build_start(start_args(tiny_qa_model_dir, out, squad=sq))
    assert results["steps"] == 6 and (out / "model" / "config.json").is_file()
    tok = AutoTokenizer.from_pretrained(out / "model")
    assert QUESTION_TOKEN in tok.get_vocab()
    assert tok.tokenize(f"where {QUESTION_TOKEN} .") == ["where", QUESTION_TOKEN, "."]  # one token, never split
    counts = json.loads((out / "synthetic_counts.json").read_text())
    assert sum(counts["examples"].values()) > 0 and "examples_sha256" in counts
    for f in ("settings.json", "data_info.json", "metrics.jsonl", "results.json", "synthetic_sample.jsonl"):
        assert (out / f).is_file(), f
    assert not (out / "checkpoint.pt").exists()  # removed once the start is saved
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("held_out/span_accuracy" in x for x in lines) and any("train/loss" in x for x in lines)
    # word-piece level: the labelled tokens' character offsets cover exactly the answer text
    tok.padding_side = "right"
    examples = [json.loads(x) for x in (out / "synthetic_sample.jsonl").read_text().splitlines()]
    feats = start_features(tok, examples, start_args(tiny_qa_model_dir, out))
    answerable = [f for f in feats if f["answerable"]]
    assert answerable and len(answerable) < len(feats)
    for f in answerable:
        e = examples[f["example_index"]]
        a = e["answers"][0]
        span = e["context"][f["offsets"][f["start_position"]][0]:f["offsets"][f["end_position"]][1]]
        assert span == a["text"] and f["offsets"][f["start_position"]][0] == a["answer_start"]
        assert tok.convert_tokens_to_ids(QUESTION_TOKEN) in f["input_ids"]


def test_no_test_or_dev_article_text_is_used(tiny_qa_model_dir, tmp_path):  # noqa: F811
    from tasks.qa.data import article_order

    sq = squad_file(tmp_path / "s.json")
    obj = json.loads(sq.read_text())
    order = article_order([a["title"] for a in obj["data"]])
    held = set(order[:3])  # 2 test + 1 dev
    held_text = {p["context"] for a in obj["data"] if a["title"] in held for p in a["paragraphs"]}
    out = tmp_path / "start"
    build_start(start_args(tiny_qa_model_dir, out, squad=sq, test_articles=2, dev_articles=1, max_steps=2))
    info = json.loads((out / "data_info.json").read_text())
    assert set(info["articles"]["unlabeled_pool"]).isdisjoint(held)
    assert set(info["held_out_articles"]["test"]) | set(info["held_out_articles"]["dev"]) == held
    for line in (out / "synthetic_sample.jsonl").read_text().splitlines():
        ctx = json.loads(line)["context"]
        assert not any(s in h or h in ctx for h in held_text for s in [ctx])
    # a text file carrying a test paragraph is refused, naming it
    leak = tmp_path / "more.txt"
    leak.write_text("Some other text about rivers and cities in the north.\n\n" + next(iter(held_text)) + "\n")
    with pytest.raises(StartError, match="more.txt', text 2 shares a sentence with a test or dev article"):
        build_start(start_args(tiny_qa_model_dir, tmp_path / "start2", squad=sq, test_articles=2, dev_articles=1,
                               texts=leak))
    # the squad_v2 task refuses this start when its own split tests on an article the start read
    from tasks.qa.data import start_held_out

    start_held_out(out / "model", {"test": order[:2], "dev": order[2:3]})  # the same split: fine
    with pytest.raises(Exception, match="trained on"):
        start_held_out(out / "model", {"test": order[3:5], "dev": []})


def test_resume_gives_the_same_start_as_an_uninterrupted_run(tiny_qa_model_dir, tmp_path):  # noqa: F811
    import torch
    from safetensors.torch import load_file

    sq = squad_file(tmp_path / "s.json")
    whole = tmp_path / "whole"
    build_start(start_args(tiny_qa_model_dir, whole, squad=sq))
    part = tmp_path / "part"
    stopped = build_start(start_args(tiny_qa_model_dir, part, squad=sq), stop_at_step=3)
    assert stopped == {"stopped_at_step": 3} and (part / "checkpoint.pt").is_file()
    assert not (part / "model").exists()
    build_start(start_args(tiny_qa_model_dir, part, squad=sq))
    a, b = load_file(whole / "model" / "model.safetensors"), load_file(part / "model" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    steps = [json.loads(x)["step"] for x in (part / "metrics.jsonl").read_text().splitlines()]
    assert steps == [json.loads(x)["step"] for x in (whole / "metrics.jsonl").read_text().splitlines()]
    # other settings into the same folder: refused, nothing touched
    with pytest.raises(StartError, match="started with other settings"):
        build_start(start_args(tiny_qa_model_dir, part, squad=sq, lr=3e-4))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(StartError, match="is a file"):
        build_start(start_args(tiny_qa_model_dir, tmp_path / "afile", squad=sq))


def test_the_start_loads_in_the_squad_v2_and_passages_tasks(tiny_qa_model_dir, tmp_path):  # noqa: F811
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from tasks.passages.model import build_passage_reader
    from tasks.qa.data import build_features, clip_questions
    from tasks.qa.model import build_qa_model

    sq = squad_file(tmp_path / "s.json")
    out = tmp_path / "start"
    build_start(start_args(tiny_qa_model_dir, out, squad=sq))
    saved = load_file(out / "model" / "model.safetensors")
    reader = build_qa_model(str(out / "model"))  # what --task squad_v2 --model.name_or_path does
    assert torch.equal(reader.answerability[1].weight, saved["answerability.1.weight"])
    assert torch.equal(reader.span_model.qa_outputs.weight, saved["qa_outputs.weight"])
    passages = build_passage_reader(str(out / "model"))  # what --task passages does
    assert torch.equal(passages.span_model.qa_outputs.weight, saved["qa_outputs.weight"])
    # real questions end in " [QUESTION]." with this tokenizer, and not with the plain one
    tok = AutoTokenizer.from_pretrained(out / "model")
    assert clip_questions(tok, ["where does the fox live ?"], 24) == ["where does the fox live ? [QUESTION]."]
    plain = AutoTokenizer.from_pretrained(tiny_qa_model_dir)
    assert clip_questions(plain, ["where does the fox live ?"], 24) == ["where does the fox live ?"]
    long_q = " ".join(["fox"] * 40)
    assert clip_questions(tok, [long_q], 24)[0].endswith(" [QUESTION].")  # the mark survives the cut
    tok.padding_side = "right"
    f = build_features(tok, [{"question": "where ?", "context": "the fox lives in rome ."}], 64, 16, 24, False)[0]
    assert tok.convert_tokens_to_ids(QUESTION_TOKEN) in f["input_ids"]


def test_heads_train_at_the_head_learning_rate(tiny_qa_model_dir):  # noqa: F811
    from tasks.qa.model import build_qa_model
    from uda.optim import param_groups

    model = build_qa_model(str(tiny_qa_model_dir))
    groups = param_groups(model, 0.01, 1e-4, head_lr=1e-3)  # as the start-building run makes them
    names = {id(p): n for n, p in model.named_parameters()}
    at_head_lr = {names[id(p)] for g in groups if g["lr"] == 1e-3 for p in g["params"]}
    assert at_head_lr == {"qa_outputs.weight", "qa_outputs.bias", "answerability.1.weight", "answerability.1.bias"}
    assert sum(len(g["params"]) for g in groups) == len(names)


def test_bad_options_are_clear_errors(tmp_path):
    with pytest.raises(StartError, match="--unanswerable"):
        start_args("m", tmp_path / "o", unanswerable=1.5)
    with pytest.raises(StartError, match="--squad .* does not exist"):
        start_args("m", tmp_path / "o", squad=tmp_path / "missing.json")
    with pytest.raises(StartError, match="--doc_stride"):
        start_args("m", tmp_path / "o", doc_stride=90)
