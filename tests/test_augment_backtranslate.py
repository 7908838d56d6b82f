"""Back-translation: sentence splitting, the keep-original rule, the MarianMT code path on a tiny random
Marian model with a SentencePiece model trained here (no download), and Apertium."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from augment.backtranslate import (
    ApertiumEngine,
    ApertiumMissingError,
    BackTranslation,
    keep_original,
    marian_back_translation,
    split_paragraphs,
    split_sentences,
)

SENTENCES = [
    "The movie was good and the acting was great.",
    "I hated the plot, it was boring and far too long.",
    "A wonderful story with fun actors and a brilliant end.",
    "This film is the worst thing I have seen this year.",
    "Quite a dull scene, really.",
]


# ---------------------------------------------------------------------------------- splitting


def test_split_paragraphs_roundtrip():
    text = "<br />First one. Second!<br /><br />Third para.\n\nFourth\nline<br />"
    paras, seps = split_paragraphs(text)
    assert paras == ["", "First one. Second!", "Third para.", "Fourth", "line", ""]
    assert seps == ["<br />", "<br /><br />", "\n\n", "\n", "<br />"]
    rebuilt = paras[0] + "".join(s + p for s, p in zip(seps, paras[1:]))
    assert rebuilt == text
    assert split_paragraphs("plain") == (["plain"], [])


def test_split_sentences():
    p = 'He said "Hi." Then he left! Mr. Smith came at 5 p.m. and J. R. Tolkien wrote. Really? Yes... 2 more.'
    assert split_sentences(p) == ['He said "Hi."', "Then he left!", "Mr. Smith came at 5 p.m. and J. R. Tolkien wrote.",
                                  "Really?", "Yes...", "2 more."]
    assert split_sentences("no end punctuation") == ["no end punctuation"]
    assert split_sentences("   ") == []


def test_keep_original_rule_golden():
    assert keep_original("short", "a much longer translation")  # original under 10 chars
    assert keep_original("a normal sentence.", "tiny")  # translation under 10 chars
    assert not keep_original("0123456789", "abcdefghijklmno")  # +50% exactly: kept translation
    assert keep_original("0123456789", "abcdefghijklmnop")  # +60%
    assert not keep_original("0123456789" * 2, "x" * 10)  # -50% exactly
    assert keep_original("0123456789" * 2, "x" * 9)


class UpperEngine:
    """A fake deterministic engine: upper-cases, and drops sentences containing 'drop' to 3 chars."""

    name = "upper"
    deterministic = True

    def __init__(self):
        self.calls = 0
        self.units = 0

    def round_trip(self, units, rng):
        self.calls += 1
        self.units += len(units)
        return ["xyz" if "drop" in u else u.upper() for u in units]


def test_backtranslation_driver_keeps_paragraphs_applies_rule_and_counts():
    engine = UpperEngine()
    bt = BackTranslation(engine)
    texts = ["First sentence here. Please drop this one.<br /><br />Ok. Last paragraph here!", "tiny", ""]
    out = bt(texts, np.random.default_rng(0))
    assert out == ["FIRST SENTENCE HERE. Please drop this one.<br /><br />Ok. LAST PARAGRAPH HERE!", "tiny", ""]
    assert bt.stats["sentences"] == 5
    assert bt.stats["sentences_kept_original"] == 3  # 'drop' (length), 'Ok.' and 'tiny' (too short)
    assert bt.stats["sentences_too_short"] == 3 and bt.stats["texts_unchanged"] == 2
    assert texts[1] == "tiny"
    # deterministic engine: a second copy of the same texts costs no engine call
    calls = engine.calls
    assert bt(texts, np.random.default_rng(1)) == out
    assert engine.calls == calls


# ---------------------------------------------------------------------------------- MarianMT


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The models here are tiny: one thread avoids thread-pool overhead on a busy 2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_marian(tmp_path_factory) -> Path:
    """A randomly initialised 1-layer Marian model with a SentencePiece model trained on SENTENCES."""
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    d = tmp_path_factory.mktemp("tiny_marian")
    model_bytes = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SENTENCES * 20), model_writer=model_bytes,
                                   vocab_size=80, hard_vocab_limit=False, model_type="unigram",
                                   character_coverage=1.0, pad_id=-1, bos_id=-1, eos_id=-1, unk_id=0,
                                   minloglevel=2)
    (d / "source.spm").write_bytes(model_bytes.getvalue())
    (d / "target.spm").write_bytes(model_bytes.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(d / "source.spm"))
    vocab = {"</s>": 0, "<unk>": 1, "<pad>": 2}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    (d / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tok = MarianTokenizer(source_spm=str(d / "source.spm"), target_spm=str(d / "target.spm"),
                          vocab=str(d / "vocab.json"))
    cfg = MarianConfig(vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1,
                       encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                       max_position_embeddings=128, pad_token_id=2, eos_token_id=0, decoder_start_token_id=2,
                       forced_eos_token_id=0)
    torch.manual_seed(0)
    MarianMTModel(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


def test_marian_backtranslation_runs_seeded_and_leaves_global_rng(tiny_marian):
    import torch

    bt = marian_back_translation(str(tiny_marian), str(tiny_marian), temperature=0.9, top_k=20, top_p=0.95,
                                 batch_size=4, max_tokens=12)
    assert bt.name == f"marian-{tiny_marian.name}-{tiny_marian.name}-T0.9-k20-p0.95"
    assert bt.engine.device.type == "cpu" and bt.engine.dtype == torch.float32
    texts = [" ".join(SENTENCES[:3]) + "<br /><br />" + SENTENCES[3], SENTENCES[4], "Hi."]
    state = torch.random.get_rng_state()
    units = [s for t in texts for p in split_paragraphs(t)[0] for s in split_sentences(p)]
    a = bt.engine.round_trip(units, np.random.default_rng(0))
    b = bt.engine.round_trip(units, np.random.default_rng(0))
    c = bt.engine.round_trip(units, np.random.default_rng(1))
    assert torch.equal(state, torch.random.get_rng_state())  # sampling did not touch the global RNG
    assert a == b and a != c and len(a) == len(units)
    out = bt(texts, np.random.default_rng(0))
    assert len(out) == 3 and out[0].count("<br /><br />") == 1
    assert out[2] == "Hi."  # under 10 characters: the original is kept
    assert bt.stats["sentences"] == 6 and bt.stats["texts"] == 3
    assert bt.stats["sentences_kept_original"] >= 1


def test_marian_greedy_sorted_batches_match_one_at_a_time(tiny_marian):
    batched = marian_back_translation(str(tiny_marian), str(tiny_marian), temperature=None, num_beams=1,
                                      batch_size=4, max_tokens=12)
    single = marian_back_translation(str(tiny_marian), str(tiny_marian), temperature=None, num_beams=1,
                                     batch_size=1, sort=False, max_tokens=12)
    assert batched.name.endswith("-beam1")
    assert batched.engine.deterministic and not marian_back_translation(
        str(tiny_marian), str(tiny_marian), temperature=0.9, max_tokens=12).engine.deterministic  # sampling
    rng = np.random.default_rng(0)
    assert batched.engine.translate(SENTENCES, 0, rng) == single.engine.translate(SENTENCES, 0, rng)


# ---------------------------------------------------------------------------------- Apertium


def require_apertium() -> None:
    if shutil.which("apertium") is None:
        msg = "apertium not installed (bash scripts/install_system_deps.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


def test_apertium_round_trip_batches_and_keeps_alignment():
    require_apertium()
    from augment.backtranslate import apertium_back_translation

    engine = ApertiumEngine()
    units = ["The movie was surprisingly good.", "I did not like the ending at all.",
             "This sentence mentions @@UDASEP@@ itself.", "Short one."]
    out = engine.round_trip(units, np.random.default_rng(0))
    assert len(out) == 4 and all(o and "@@UDASEP@@" not in o.replace("@@UDASEP@@ itself", "") for o in out[:2])
    assert "film" in out[0].lower() or "movie" in out[0].lower()
    assert "ending" in out[1].lower() or "end" in out[1].lower()
    assert all("*" not in o for o in out)
    bt = apertium_back_translation()
    assert bt.engine.deterministic
    texts = ["The actors were wonderful and the story moved me.<br /><br />I would watch it again tomorrow.",
             "Bad."]
    got = bt(texts, np.random.default_rng(0))
    assert got[0].count("<br /><br />") == 1 and got[0] != texts[0]
    assert got[1] == "Bad." and bt.stats["sentences_too_short"] == 1


def test_apertium_missing_names_the_package(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ApertiumMissingError, match="apertium-eng-spa"):
        ApertiumEngine()
