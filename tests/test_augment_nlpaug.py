"""nlpaug augmenters as methods (augment/nlpaug_adapter.py, docs/augmentation.md): seeded per text, the same in
another process and across pipeline workers, independent of the batch, global RNGs left alone, a
contextual (masked-LM) substitution with a tiny local BERT, method names and clear errors."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from augment.registry import OPTION_HELP, make_augmenter, parse_method
from tests.conftest import REPO

if importlib.util.find_spec("nlpaug") is None:  # not in requirements.txt: an optional integration
    pytest.skip("nlpaug is not installed (pip install --no-deps nlpaug==1.1.11)", allow_module_level=True)

from augment.nlpaug_adapter import NlpaugAugmenter, check_stage, seeded_global_rngs, text_seed  # noqa: E402

TEXTS = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "I really enjoyed this movie, the acting was great and the story was wonderful.",
    "Nobody expected the committee to approve the proposal before Friday.",
    "This is another sentence with several words that can be changed.",
    "",
    "   ",
]
KEYBOARD = {"nlpaug_args": json.dumps({"aug_char_p": 0.2, "aug_word_p": 0.3})}
CHAIN = "nlpaug:keyboard+nlpaug:spelling"
CHAIN_ARGS = {"nlpaug_args": json.dumps({"keyboard": {"aug_char_p": 0.2}, "spelling": {"aug_p": 0.4}})}


def _global_states():
    torch = sys.modules.get("torch")
    return (random.getstate(), np.random.get_state()[1].copy(), np.random.get_state()[2],
            None if torch is None else torch.random.get_rng_state().clone())


def _same_states(a, b) -> bool:
    return (a[0] == b[0] and np.array_equal(a[1], b[1]) and a[2] == b[2]
            and (a[3] is None) == (b[3] is None) and (a[3] is None or bool((a[3] == b[3]).all())))


@pytest.fixture(scope="module")
def chain():
    return make_augmenter(CHAIN, CHAIN_ARGS)


def test_same_output_in_another_process(chain):
    """Another interpreter, with another PYTHONHASHSEED (SpellingAug builds its lists from a set)."""
    script = textwrap.dedent(f"""
        import json, sys, numpy as np
        from augment.registry import make_augmenter
        aug = make_augmenter({CHAIN!r}, {CHAIN_ARGS!r})
        print(json.dumps([aug({TEXTS!r}, np.random.default_rng([7, j])) for j in range(2)]))
    """)
    env = dict(os.environ, PYTHONHASHSEED="12345", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    ours = [chain(TEXTS, np.random.default_rng([7, j])) for j in range(2)]
    assert ours == theirs
    assert ours[0] != ours[1] and ours[0][:4] != TEXTS[:4]  # copies differ, texts are changed
    assert ours[0][4:] == TEXTS[4:]  # empty / blank texts come back as they are


def test_pipeline_workers_agree(tmp_path):
    texts = [f"{t} Number {i} of the batch, with some extra words here." for i, t in enumerate(TEXTS[:4] * 3)]
    opts = {"nlpaug_args": json.dumps({"aug_char_p": 0.3})}
    one = augment_texts_quiet(texts, "nlpaug:ocr", opts, tmp_path / "c1", workers=1)
    two = augment_texts_quiet(texts, "nlpaug:ocr", opts, tmp_path / "c2", workers=2)
    assert one.copies == two.copies
    assert one.name == two.name == "nlpaug-char.OcrAug-aug_char_p=0.3"
    assert all(c[0] != c[1] for c in one.copies)
    assert one.stats["nlpaug_texts"] == len(texts) * 2


def augment_texts_quiet(texts, method, options, cache_dir, workers):
    from augment.pipeline import augment_texts

    return augment_texts(texts, method, options, copies=2, seed=3, chunk_size=3, workers=workers,
                         cache_dir=cache_dir, progress=False, log=lambda msg: None)


def test_output_of_a_text_does_not_depend_on_its_batch(chain):
    whole = chain(TEXTS, np.random.default_rng(5))
    alone = [chain([t], np.random.default_rng(5))[0] for t in TEXTS]
    reordered = chain(TEXTS[::-1] + TEXTS[:1], np.random.default_rng(5))
    assert whole == alone == reordered[::-1][1:]
    assert reordered[-1] == whole[0]  # a repeated text gets the same output
    # and not on the global RNGs either
    random.seed(1)
    np.random.seed(1)
    a = chain(TEXTS, np.random.default_rng(5))
    random.seed(2)
    np.random.seed(2)
    assert chain(TEXTS, np.random.default_rng(5)) == a == whole


def test_global_rng_states_unchanged(chain):
    random.seed(11)
    np.random.seed(11)
    before = _global_states()
    chain(TEXTS, np.random.default_rng(0))
    assert _same_states(before, _global_states())
    # the rng is advanced by a fixed amount per call, whatever the batch
    r1, r2 = np.random.default_rng(9), np.random.default_rng(9)
    chain(TEXTS[:1], r1)
    chain(TEXTS, r2)
    assert r1.bit_generator.state == r2.bit_generator.state
    # restored when nlpaug raises, too
    keyboard = chain.augmenters[0]

    def boom(text):
        random.random()
        np.random.random()
        raise RuntimeError("boom")

    original = keyboard.aug.augment
    keyboard.aug.augment = boom
    try:
        with pytest.raises(RuntimeError, match="boom"):
            keyboard(TEXTS[:1], np.random.default_rng(0))
    finally:
        keyboard.aug.augment = original
    assert _same_states(before, _global_states())
    with seeded_global_rngs(text_seed(b"x" * 16, "t")):
        inside = random.random()
    with seeded_global_rngs(text_seed(b"x" * 16, "t")):
        assert random.random() == inside
    assert _same_states(before, _global_states())


@pytest.fixture(scope="module")
def tiny_mlm_dir(tmp_path_factory):
    """A 1-layer BERT masked LM (hidden 32) with a word-level vocab, saved with save_pretrained."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    d = tmp_path_factory.mktemp("tiny_mlm")
    words = sorted({w.strip(".,").lower() for t in TEXTS for w in t.split() if w.strip(".,")})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "'"] + words
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = BertTokenizerFast(vocab=str(d / "vocab.txt"), do_lower_case=True)
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=37, max_position_embeddings=64))
    torch.random.set_rng_state(state)
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def test_contextual_substitution_with_a_tiny_local_masked_lm(tiny_mlm_dir):
    import torch

    opts = {"nlpaug_args": json.dumps({"model_path": str(tiny_mlm_dir), "aug_p": 0.5})}
    aug = make_augmenter("nlpaug:contextual", opts)
    assert aug.name.startswith("nlpaug-word.ContextualWordEmbsAug-aug_p=0.5,model_path=tiny_mlm")
    texts = [t.lower() for t in TEXTS[:4]]
    torch.manual_seed(123)
    before = _global_states()
    first = aug(texts, np.random.default_rng(1))
    assert _same_states(before, _global_states())  # torch's generator too
    assert first == aug(texts, np.random.default_rng(1))
    assert first != aug(texts, np.random.default_rng(2))
    assert first != texts
    assert [aug([t], np.random.default_rng(1))[0] for t in texts] == first
    again = make_augmenter("nlpaug:word.ContextualWordEmbsAug", opts)  # a fresh model from the folder
    assert again(texts, np.random.default_rng(1)) == first


def test_method_names_and_chains():
    from augment.word_replace import fit_tfidf_stats

    assert parse_method("nlpaug:keyboard+tf_idf") == ["nlpaug:keyboard", "tf_idf"]
    assert parse_method(" nlpaug:char.KeyboardAug + swap ") == ["nlpaug:char.KeyboardAug", "swap"]
    assert "nlpaug_args" in OPTION_HELP
    aug = make_augmenter("nlpaug:keyboard+tf_idf", {**KEYBOARD, "p": 0.2}, tfidf_stats=fit_tfidf_stats(TEXTS))
    assert aug.name == "nlpaug-char.KeyboardAug-aug_char_p=0.2,aug_word_p=0.3+tf_idf-0.2"
    out = aug(TEXTS, np.random.default_rng(0))
    assert len(out) == len(TEXTS) and out == aug(TEXTS, np.random.default_rng(0))
    # alias and class name are the same augmenter (same name, same output); other arguments, another name
    full = make_augmenter("nlpaug:char.KeyboardAug", KEYBOARD)
    short = make_augmenter("nlpaug:keyboard", KEYBOARD)
    assert full.name == short.name and full(TEXTS, np.random.default_rng(4)) == short(TEXTS, np.random.default_rng(4))
    assert make_augmenter("nlpaug:KeyboardAug").name == "nlpaug-char.KeyboardAug"
    assert make_augmenter("nlpaug:keyboard", {"nlpaug_args": {"aug_char_p": 0.5}}).name != short.name
    long = NlpaugAugmenter("keyboard", {"stopwords": ["word"] * 30, "model_path": None})
    assert long.name.startswith("nlpaug-char.KeyboardAug-") and "-h" in long.name and len(long.name) < 110


def test_each_augmenter_reads_its_own_files(chain, tmp_path):
    """nlpaug keeps one SpellingAug dictionary per process (the first loaded): each augmenter gets its own."""
    mine = tmp_path / "spelling_en.txt"  # the last name of nlpaug's own dictionary, too
    mine.write_text("quick QUICK\nfox FOX\n", encoding="utf-8")
    aug = make_augmenter("nlpaug:spelling", {"nlpaug_args": json.dumps({"dict_path": str(mine), "aug_p": 1.0})})
    assert aug(["the quick fox"], np.random.default_rng(0)) == ["the QUICK FOX"]
    assert aug.name.startswith("nlpaug-word.SpellingAug-aug_p=1.0,dict_path=spelling_en.txt-h")
    assert chain.augmenters[1].aug.model is not aug.aug.model


def test_bad_names_and_arguments_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="Did you mean .*char.KeyboardAug"):
        make_augmenter("nlpaug:char.KeybordAug")
    with pytest.raises(ValueError, match="nlpaug has no text augmenter 'NoSuchAug'"):
        make_augmenter("nlpaug:NoSuchAug")
    with pytest.raises(ValueError, match="bad nlpaug method"):
        parse_method("nlpaug:char.Keyboard Aug+tf_idf")
    with pytest.raises(ValueError, match="bad nlpaug method"):
        check_stage("nlpaug:audio.NoiseAug")
    with pytest.raises(ValueError, match="unknown augmentation method 'keyboard'.*nlpaug:NAME"):
        parse_method("keyboard")
    with pytest.raises(ValueError, match=r"has no argument\(s\) \['aug_p'\]; it takes .*aug_char_p"):
        make_augmenter("nlpaug:keyboard", {"nlpaug_args": '{"aug_p": 0.1}'})
    with pytest.raises(ValueError, match="must be a JSON object"):
        make_augmenter("nlpaug:keyboard", {"nlpaug_args": "aug_char_p=0.1"})
    with pytest.raises(ValueError, match="local folder.*never fetched from the Hugging Face hub"):
        make_augmenter("nlpaug:contextual")
    with pytest.raises(ValueError, match="tfidfaug_w2idf.txt"):
        make_augmenter("nlpaug:tfidf", {"nlpaug_args": json.dumps({"model_path": str(tmp_path)})})


def test_missing_optional_dependency_names_what_to_install(monkeypatch):
    import augment.nlpaug_adapter as adapter

    real = importlib.util.find_spec
    monkeypatch.setattr(adapter.importlib.util, "find_spec", lambda name, *a: None if name == "gensim" else real(name, *a))
    with pytest.raises(ImportError, match=r"WordEmbsAug needs gensim: `pip install gensim`"):
        make_augmenter("nlpaug:word_embs", {"nlpaug_args": '{"model_type": "glove"}'})
    if not adapter._nltk_has("taggers/averaged_perceptron_tagger_eng"):
        with pytest.raises(ImportError, match="SynonymAug needs (NLTK|WordNet)"):
            make_augmenter("nlpaug:synonym")


def test_cli_takes_nlpaug_args():
    from augment.cli import build_parser

    args = build_parser().parse_args(["--method", "nlpaug:keyboard+tf_idf", "--nlpaug_args", '{"aug_char_p": 0.1}'])
    assert args.method == "nlpaug:keyboard+tf_idf" and json.loads(args.nlpaug_args) == {"aug_char_p": 0.1}


def test_training_with_an_nlpaug_augmenter(tmp_path, tiny_text_data):
    """--augment.method nlpaug:NAME trains, and a misspelt method is a config error naming the option."""
    from tests.trainkit import model_dir, run, tiny_config  # noqa: F401
    from uda.config import ConfigError, build_config

    with pytest.raises(ConfigError, match="augment.method"):
        build_config("text_classification", None, {"augment.method": "tfidf"})
    cfg = build_config("text_classification", None, {"augment.method": "nlpaug:keyboard",
                                                     "augment.nlpaug_args": '{"aug_char_p": 0.2}'})
    from augment.build import build_augmenter

    aug = build_augmenter(cfg.augment, ["good movie", "bad film"])
    assert "KeyboardAug" in aug.name
