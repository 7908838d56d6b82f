"""Shared fixtures: a tiny BERT and tokenizer built in code and saved with save_pretrained (so the
real loading path runs), a small synthetic sentiment data set, and the shared benchmark data."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never touch the hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tasks  # noqa: E402,F401 (registers the built-in tasks, as the commands do)

REPO = Path(__file__).resolve().parent.parent

POS_WORDS = ["good", "great", "excellent", "wonderful", "superb", "loved", "brilliant", "fun"]
NEG_WORDS = ["bad", "awful", "terrible", "boring", "poor", "hated", "dull", "worst"]
FILLER = ["the", "movie", "film", "was", "plot", "acting", "and", "a", "really", "story", "it", "this",
          "i", "of", "very", "quite", "scene", "end", "with", "actors"]


@pytest.fixture(scope="session", autouse=True)
def _own_cache(tmp_path_factory):
    """The tests' Arrow tables and other caches go to a folder of this session (children inherit it),
    not to the user's."""
    os.environ["UDA_CACHE"] = str(tmp_path_factory.mktemp("uda_cache"))


def shared_data_dir() -> Path:
    return Path(os.environ.get("UDA_SHARED_DATA", REPO.parent / "shared" / "data"))


def require_resource(path: Path, what: str) -> Path:
    """Skip when a resource is missing, except under CI where a missing resource is a failure."""
    if not path.exists():
        msg = f"{what} not found at {path} (set UDA_SHARED_DATA)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def make_review(rng: random.Random, label: int, n_words: int = 12) -> str:
    cue = POS_WORDS if label == 1 else NEG_WORDS
    words = [rng.choice(FILLER) for _ in range(n_words)]
    for _ in range(2):
        words.insert(rng.randrange(len(words) + 1), rng.choice(cue))
    return " ".join(words) + "."


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer BERT (hidden 32) with a word-level vocab covering the synthetic data."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    d = tmp_path_factory.mktemp("tiny_bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "'", "<", ">", "/", "br"]
    vocab += sorted(set(POS_WORDS + NEG_WORDS + FILLER))
    vocab += [chr(c) for c in range(ord("a"), ord("z") + 1)] + [f"##{chr(c)}" for c in range(ord("a"), ord("z") + 1)]
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = BertTokenizerFast(vocab=str(d / "vocab.txt"), do_lower_case=True)  # transformers 5 ignores vocab_file=
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=128, num_labels=2)
    model = BertForSequenceClassification(cfg)
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def tiny_text_data(tmp_path_factory) -> Path:
    """train/test/unsup jsonl files of a learnable synthetic sentiment task."""
    d = tmp_path_factory.mktemp("tiny_data")
    rng = random.Random(0)
    train = [{"id": f"train_{i}", "text": make_review(rng, i % 2), "label": i % 2} for i in range(200)]
    test = [{"id": f"test_{i}", "text": make_review(rng, i % 2), "label": i % 2} for i in range(60)]
    unsup = [{"id": f"unsup_{i}", "text": make_review(rng, rng.randrange(2), 14), "label": -1} for i in range(300)]
    write_jsonl(d / "train.jsonl", train)
    write_jsonl(d / "test.jsonl", test)
    write_jsonl(d / "unsup.jsonl", unsup)
    return d


@pytest.fixture
def one_thread():
    """torch on one thread for the test (restored after): tiny runs are faster so on a busy machine,
    and both runs of a comparison compute alike."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
