"""The QA-shaped start (task qa_start, command uda-qa-start): the synthetic-example builder on strings
and word pieces, the held-out check, resume through the training loop, and that the saved start loads
in the squad_v2 and passages tasks."""

import json
import random
import signal

import numpy as np
import pytest

from tasks.qa.start import main, start_config, train_argv
from tasks.qa.start_task import QAStartTask
from tasks.qa.synthetic import (QUESTION_TOKEN, kind_counts, name_and_number_spans, paragraph_examples,
                                recurring_spans, sentences, synthetic_examples)
from tests.qa_fixtures import tiny_qa_model_dir  # noqa: F401 (fixture)
from tests.trainkit import metric_lines, run, training_lines, weights
from uda.config import ConfigError
from uda.data import DataError

pytestmark = pytest.mark.usefixtures("one_thread")

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


START_FLAGS = ["--max_length", "112", "--doc_stride", "16", "--max_question_length", "48", "--batch_size", "4",
               "--max_steps", "6", "--eval_every", "3", "--log_every", "2", "--held_out", "8", "--per_paragraph", "4",
               "--report_to", "none", "--test_articles", "2", "--dev_articles", "1"]


def start_argv(model_dir, out, **kw):
    """An uda-qa-start command line of the tiny start (6 steps of 4, held-out evaluation every 3)."""
    argv = ["--output_dir", str(out), "--model", str(model_dir), *START_FLAGS]
    for k, v in kw.items():
        if f"--{k}" in argv:
            argv[argv.index(f"--{k}") + 1] = str(v)
        else:
            argv += [f"--{k}", str(v)]
    return argv


def start_args(model_dir, out, **kw):
    """The config that command line gives (what uda-qa-start hands to the training loop)."""
    return start_config(train_argv(start_argv(model_dir, out, **kw))[0])


def build_start(cfg, task=None):
    return run(cfg, task if task is not None else QAStartTask())


class StoppedAt:
    """The start task; Ctrl-C arrives while it collates labelled batch number ``at`` (the loop then
    stops after that step, with its checkpoint)."""

    def __init__(self, at: int) -> None:
        self.inner, self.at, self.calls = QAStartTask(), at, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def collate_labeled(self, examples):
        self.calls += 1
        if self.calls == self.at:
            signal.raise_signal(signal.SIGINT)
        return self.inner.collate_labeled(examples)


def test_the_flags_are_the_options(tmp_path):
    cfg = start_args("m", tmp_path / "o", squad=tmp_path, texts="a.txt", lr=3e-4, max_steps=100)
    assert (cfg.task, cfg.model.name_or_path, cfg.train.lr, cfg.train.max_steps) == ("qa_start", "m", 3e-4, 100)
    assert (cfg.qa_start.squad, cfg.qa_start.texts, cfg.qa_start.doc_stride) == (str(tmp_path), ["a.txt"], 16)
    assert cfg.train.warmup_steps == 6 and cfg.uda.lambda_u == 0 and cfg.uda.tsa is None  # 6% of the steps
    argv = start_argv("m", tmp_path / "o", texts="a.txt") + ["--texts", "b.txt", "--train.warmup_steps", "2",
                                                             "--bf16", "off", "--qa_start.cloze", "0.25"]
    cfg = start_config(train_argv(argv)[0])
    assert cfg.qa_start.texts == ["a.txt", "b.txt"] and cfg.train.warmup_steps == 2
    assert cfg.train.mixed_precision == "no" and cfg.qa_start.cloze == 0.25
    # the defaults are configs/qa_start.yaml's: those of the start before it was a task
    d = start_config(train_argv(["--output_dir", str(tmp_path / "o"), "--bf16", "off"])[0])
    assert (d.model.name_or_path, d.model.max_length, d.seed, d.train.batch_size, d.train.lr, d.train.head_lr) == \
        ("minilm", 256, 1, 16, 1e-4, 1e-3)
    assert (d.train.max_steps, d.train.warmup_steps, d.train.eval_every, d.train.log_every) == (3000, 180, 250, 25)
    assert (d.checkpoint.every_minutes, d.qa_start.held_out, d.qa_start.per_paragraph, d.qa_start.unanswerable) == \
        (10.0, 400, 16, 0.33)


def test_tokenised_labels_point_at_the_answer_and_the_token_is_saved(tiny_qa_model_dir, tmp_path):  # noqa: F811
    from accelerate.state import AcceleratorState
    from transformers import AutoTokenizer

    from tasks.qa.start_task import start_features

    sq = squad_file(tmp_path / "s.json")
    out = tmp_path / "start"
    AcceleratorState._reset_state(reset_partial_state=True)
    try:  # the command itself: its flags, the training loop, the summary line
        assert main(start_argv(tiny_qa_model_dir, out, squad=sq)) == 0
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
    results = json.loads((out / "results.json").read_text())
    assert [h["step"] for h in results["dev_history"]] == [3, 6] and (out / "model" / "config.json").is_file()
    assert results["selected_model"]["by"] == "dev/span_accuracy" and results["test"] == {}
    tok = AutoTokenizer.from_pretrained(out / "model")
    assert QUESTION_TOKEN in tok.get_vocab()
    assert tok.tokenize(f"where {QUESTION_TOKEN} .") == ["where", QUESTION_TOKEN, "."]  # one token, never split
    counts = json.loads((out / "data" / "synthetic_counts.json").read_text())
    assert sum(counts["examples"].values()) > 0 and 0 < sum(counts["held_out_features"].values()) <= 8
    for f in ("config.yaml", "data_info.json", "metrics.jsonl", "results.json", "data/synthetic_sample.jsonl"):
        assert (out / f).is_file(), f
    lines = metric_lines(out)
    assert any("dev/span_accuracy" in x for x in lines) and any("train/loss" in x for x in lines)
    # word-piece level: the labelled tokens' character offsets cover exactly the answer text
    tok.padding_side = "right"
    examples = [json.loads(x) for x in (out / "data" / "synthetic_sample.jsonl").read_text().splitlines()]
    feats = start_features(tok, examples, 112, 16, 48)
    answerable = [f for f in feats if f["answerable"]]
    assert answerable and len(answerable) < len(feats)
    for f in answerable:
        e = examples[f["example_index"]]
        a = e["answers"][0]
        span = e["context"][f["offsets"][f["start_position"]][0]:f["offsets"][f["end_position"]][1]]
        assert span == a["text"] and f["offsets"][f["start_position"]][0] == a["answer_start"]
        assert tok.convert_tokens_to_ids(QUESTION_TOKEN) in f["input_ids"]


def test_no_test_or_dev_article_text_is_used(tiny_qa_model_dir, tmp_path):  # noqa: F811
    from tasks.common.squad import article_order

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
    for line in (out / "data" / "synthetic_sample.jsonl").read_text().splitlines():
        ctx = json.loads(line)["context"]
        assert not any(s in h or h in ctx for h in held_text for s in [ctx])
    # a text file carrying a test paragraph is refused, naming it
    leak = tmp_path / "more.txt"
    leak.write_text("Some other text about rivers and cities in the north.\n\n" + next(iter(held_text)) + "\n")
    with pytest.raises(DataError, match="more.txt', text 2 shares a sentence with a test or dev article"):
        build_start(start_args(tiny_qa_model_dir, tmp_path / "start2", squad=sq, test_articles=2, dev_articles=1,
                               texts=leak))
    # ... and so is one whose case, punctuation spacing and line breaks were edited
    edited = next(iter(held_text)).upper().replace(",", " ,").replace(". ", " .\n")
    leak.write_text("Some other text about rivers and cities in the north.\n\n" + edited + "\n")
    with pytest.raises(DataError, match="more.txt', text 2 shares a sentence with a test or dev article"):
        build_start(start_args(tiny_qa_model_dir, tmp_path / "start3", squad=sq, test_articles=2, dev_articles=1,
                               texts=leak))
    # the squad_v2 task refuses this start when its own split tests on an article the start read
    from tasks.common.squad import start_held_out

    start_held_out(out / "model", {"test": order[:2], "dev": order[2:3]})  # the same split: fine
    with pytest.raises(Exception, match="trained on"):
        start_held_out(out / "model", {"test": order[3:5], "dev": []})
    with pytest.raises(Exception, match="trained on"):  # and a checkpoint's model of the start, too
        start_held_out(next((out / "checkpoints").glob("step-*")) / "model", {"test": order[3:5], "dev": []})


def test_resume_gives_the_same_start_as_an_uninterrupted_run(tiny_qa_model_dir, tmp_path):  # noqa: F811
    import torch

    from uda.train import RunStopped

    sq = squad_file(tmp_path / "s.json")
    whole = tmp_path / "whole"
    build_start(start_args(tiny_qa_model_dir, whole, squad=sq))
    part = tmp_path / "part"
    with pytest.raises(RunStopped, match="after step 4 of 6"):  # Ctrl-C during step 4: saved after it
        build_start(start_args(tiny_qa_model_dir, part, squad=sq), StoppedAt(4))
    assert not (part / "model").exists() and (part / "checkpoints" / "step-00000004").is_dir()
    # other settings into the same folder: refused, nothing touched
    with pytest.raises(ConfigError, match="with other options: train.lr"):
        build_start(start_args(tiny_qa_model_dir, part, squad=sq, lr=3e-4))
    results = build_start(start_args(tiny_qa_model_dir, part, squad=sq))  # the same command continues
    assert results["resumed_at_steps"] == [4]
    a, b = weights(whole / "model"), weights(part / "model")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert training_lines(part) == training_lines(whole)
    assert [x for x in metric_lines(part) if "dev/span_accuracy" in x] == \
        [x for x in metric_lines(whole) if "dev/span_accuracy" in x]
    assert results["dev_history"] == json.loads((whole / "results.json").read_text())["dev_history"]
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        build_start(start_args(tiny_qa_model_dir, tmp_path / "afile", squad=sq))


def test_the_start_loads_in_the_squad_v2_and_passages_tasks(tiny_qa_model_dir, tmp_path):  # noqa: F811
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from tasks.passages.model import build_passage_reader
    from tasks.common.qa_reader import build_qa_model
    from tasks.common.windows import build_features, clip_questions

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
    from tasks.common.qa_reader import build_qa_model
    from uda.optim import param_groups

    model = build_qa_model(str(tiny_qa_model_dir))
    groups = param_groups(model, 0.01, 1e-4, head_lr=1e-3)  # as the training loop makes them (train.head_lr)
    names = {id(p): n for n, p in model.named_parameters()}
    at_head_lr = {names[id(p)] for g in groups if g["lr"] == 1e-3 for p in g["params"]}
    assert at_head_lr == {"qa_outputs.weight", "qa_outputs.bias", "answerability.1.weight", "answerability.1.bias"}
    assert sum(len(g["params"]) for g in groups) == len(names)


def test_bad_options_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="qa_start.unanswerable"):
        start_args("m", tmp_path / "o", unanswerable=1.5)
    with pytest.raises(ConfigError, match="qa_start.squad .* does not exist"):
        start_args("m", tmp_path / "o", squad=tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="qa_start.doc_stride"):
        start_args("m", tmp_path / "o", doc_stride=90)
    with pytest.raises(ConfigError, match="--output_dir is required"):
        start_config(train_argv(["--model", "m"])[0])
    with pytest.raises(ConfigError, match="--bf16 must be"):
        train_argv(["--output_dir", "o", "--bf16", "maybe"])
    with pytest.raises(ConfigError, match="uda-qa-start builds the task qa_start"):
        train_argv(["--output_dir", "o", "--task", "squad_v2"])


def test_a_start_without_a_held_out_check_is_said_so(tiny_qa_model_dir, tmp_path, capsys):  # noqa: F811
    """Texts with no --squad: nothing tells which are held out; the start says so, and the squad_v2 task
    warns loudly when it starts from it."""
    from tasks.common.squad import start_held_out

    texts = tmp_path / "texts.txt"
    names = ["Ashby", "Brill", "Carden", "Dunmore", "Elstow", "Farley", "Glynde", "Hartop"]
    texts.write_text("".join(f"The river Wen flows north past the old mill town of {a} before it reaches {b}. "
                             f"Its bridges were built in {1800 + 7 * i} by the engineer Thomas {b}, who also "
                             f"drained the marsh near {a}. " for i, (a, b) in enumerate(zip(names, names[1:]))) + "\n")
    out = tmp_path / "start"
    build_start(start_args(tiny_qa_model_dir, out, texts=texts, max_steps=2))
    assert "no qa_start.squad (--squad FILE) given, so the texts were checked against no test" in capsys.readouterr().out
    assert json.loads((out / "data_info.json").read_text())["held_out_check"].startswith("none")
    start_held_out(out / "model", {"test": [], "dev": []})
    assert "WARNING: the starting model" in capsys.readouterr().out
