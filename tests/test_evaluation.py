"""uda/evaluation.py: length-sorted batches and the padding evaluation builds itself."""

import torch

from uda.evaluation import length_sorted_batches, pad_right


def test_pad_right_equals_the_tokenizers_padding(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    seqs = tok(["great movie", "the plot was really boring and the acting poor", "fun"])["input_ids"]
    ours = pad_right(seqs, tok.pad_token_id)
    theirs = tok.pad([{"input_ids": s} for s in seqs], return_tensors="pt")
    assert torch.equal(ours["input_ids"], theirs["input_ids"])
    assert torch.equal(ours["attention_mask"], theirs["attention_mask"])
    assert pad_right([], 0)["input_ids"].shape == (0, 0)


def test_length_sorted_batches_cover_every_index_once():
    batches = length_sorted_batches([3, 9, 1, 9, 4], 2)
    assert batches == [[1, 3], [4, 0], [2]]
    assert sorted(i for b in batches for i in b) == list(range(5))


def test_window_token_ids_equal_full_tokenisation(tiny_model_dir):
    import random

    from transformers import AutoTokenizer

    from tasks.text.task import window_token_ids
    from tests.conftest import FILLER, NEG_WORDS, POS_WORDS

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    rng = random.Random(0)
    words = FILLER + POS_WORDS + NEG_WORDS + [",", "!", "...", "a,b,c,d,e"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(1, 400))) for _ in range(60)]
    texts += ["x" * 5000, "great " * 300, ",,,,!!!! " * 200 + "good", "   lots   of   spaces   " * 50]
    for side in ("left", "right"):
        tok.truncation_side = side
        for max_length in (8, 32, 128):
            full = tok(texts, truncation=True, max_length=max_length)["input_ids"]
            # a small chars_per_token makes cut texts too short to fill the window: the fallback path
            for cpt in (8, 2):
                assert window_token_ids(tok, texts, max_length, cpt) == full, (side, max_length, cpt)
