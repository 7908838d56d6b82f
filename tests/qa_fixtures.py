"""Tiny QA fixtures built in code: a synthetic SQuAD 2.0 file in the official json layout, and a
2-layer BERT question-answering model (hidden 32) with a word-level vocabulary covering it, saved
with save_pretrained so the real loading path runs. Import the fixtures into a test module."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

ANIMALS = ["fox", "cat", "dog", "owl", "bee", "cow", "pig", "elk"]
COLOURS = ["red", "blue", "green", "black", "white", "brown"]
CITIES = ["paris", "rome", "oslo", "lima", "cairo", "delhi", "tokyo", "quito", "dakar", "sofia"]
WORDS = ["the", "in", "lives", "where", "does", "live", "what", "colour", "is", "a", "and", "near", "river", "old",
         "town", "it", "has", "which", "city"]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "?", "!", "'"]
         + sorted(set(ANIMALS + COLOURS + CITIES + WORDS))
         + [chr(c) for c in range(ord("a"), ord("z") + 1)] + [f"##{chr(c)}" for c in range(ord("a"), ord("z") + 1)])


def make_paragraph(rng: random.Random, pid: str, n_facts: int = 3) -> dict:
    """A context of facts "the <colour> <animal> lives in <city> ." and questions about it: half
    answerable (the city of a stated animal), half not (an animal the context never mentions)."""
    animals = rng.sample(ANIMALS, n_facts + 1)
    facts, qas = [], []
    context = ""
    for k, animal in enumerate(animals[:n_facts]):
        colour, city = rng.choice(COLOURS), rng.choice(CITIES)
        sentence = f"the {colour} {animal} lives in {city} near the old river . "
        start = len(context) + sentence.index(city)
        context += sentence
        facts.append((animal, city, start))
    context = context.strip()
    for k, (animal, city, start) in enumerate(facts):
        qas.append({"id": f"{pid}-a{k}", "question": f"where does the {animal} live ?",
                    "answers": [{"text": city, "answer_start": start}], "is_impossible": False})
    missing = animals[n_facts]
    for k in range(n_facts):
        qas.append({"id": f"{pid}-u{k}", "question": f"where does the {missing} live {'?' * (k + 1)}",
                    "answers": [], "is_impossible": True})
    return {"context": context, "qas": qas}


def make_squad(n_articles: int = 6, paragraphs: int = 3, seed: int = 0) -> dict:
    rng = random.Random(seed)
    data = []
    for a in range(n_articles):
        data.append({"title": f"Article_{a}",
                     "paragraphs": [make_paragraph(rng, f"q{a}-{p}") for p in range(paragraphs)]})
    return {"version": "v2.0", "data": data}


@pytest.fixture(scope="module")
def tiny_squad_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("tiny_squad") / "tiny-v2.0.json"
    p.write_text(json.dumps(make_squad()), encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def tiny_qa_model_dir(tmp_path_factory) -> Path:
    import torch
    from transformers import BertConfig, BertForQuestionAnswering, BertTokenizerFast

    d = tmp_path_factory.mktemp("tiny_qa_bert")
    (d / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    # from_pretrained reads vocab.txt (transformers 5 silently ignores a vocab_file= argument)
    tok = BertTokenizerFast.from_pretrained(str(d), do_lower_case=True)
    assert tok.convert_tokens_to_ids("fox") != tok.unk_token_id
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=128)
    BertForQuestionAnswering(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d
