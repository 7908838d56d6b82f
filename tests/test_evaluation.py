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
