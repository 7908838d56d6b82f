"""Tests for augment.word_replace, augment.precomputed and augment.compose."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter

import numpy as np
import pytest

from augment.base import Augmenter
from augment.compose import Compose
from augment.precomputed import MissingAugmentationError, PrecomputedAugmenter, write_precomputed
from augment.text_ops import basic_tokenize, clean_web_text, tokenize, word_tokenize
from augment.word_replace import (
    TfIdfStats,
    TfIdfWordReplacement,
    UniformWordReplacement,
    fit_tfidf_stats,
    replacement_probs,
)
from tests.conftest import require_resource, shared_data_dir

# Tiny corpus: N = 3, doc_freq a=3, b=2, c=1, d=1.
CORPUS = ["a b c", "A b.", "a d"]
L15, L3 = math.log(1.5), math.log(3.0)


@pytest.fixture(scope="module")
def stats() -> TfIdfStats:
    return fit_tfidf_stats(["a b c", "A b", "a d"])


# ---------------------------------------------------------------------------------- tokenize


def test_surface_tokenize_for_word_level_augmenters():
    # augment.word_level edits words in place with these tokens; TF-IDF/unif use word_tokenize
    text = "Hello, world!<br /><br />It's  FINE.<br/>ok"
    assert tokenize(text) == ["Hello", ",", "world", "!", "It's", "FINE", ".", "ok"]
    assert tokenize("") == []
    assert tokenize("<br />") == []


def test_word_tokenize_splits_every_punctuation_character():
    assert word_tokenize("good,bad!") == ["good", ",", "bad", "!"]
    assert word_tokenize("It's 3.5/10 (meh)...") == ["it", "'", "s", "3", ".", "5", "/", "10", "(", "meh", ")",
                                                     ".", ".", "."]
    # ASCII symbols count as punctuation too (BERT's definition), and so does Unicode P*
    assert word_tokenize("a$b^c`d~e") == ["a", "$", "b", "^", "c", "`", "d", "~", "e"]
    assert word_tokenize("\u201cwow\u201d \u2014 ok\u00bf") == ["\u201c", "wow", "\u201d", "\u2014", "ok", "\u00bf"]
    assert word_tokenize("") == [] and word_tokenize(" \t\n ") == []


def test_word_tokenize_lowercases_and_strips_accents():
    assert word_tokenize("Café") == ["cafe"]
    assert word_tokenize("CAFÉ naïve Ångström") == ["cafe", "naive", "angstrom"]
    assert word_tokenize("Cafe\u0301") == ["cafe"]  # decomposed accent (NFD) as well


def test_word_tokenize_whitespace_and_control_characters():
    # tab/newline/no-break space separate; zero-width space (Cf), NUL, U+FFFD, DEL are dropped
    assert word_tokenize("a\tb\nc\u00a0d") == ["a", "b", "c", "d"]
    assert word_tokenize("x\u200by z\x00w v\ufffdu t\x7fs") == ["xy", "zw", "vu", "ts"]


def test_word_tokenize_cleans_web_text_like_the_reference():
    assert word_tokenize("One.<br /><br />Two") == ["one", ".", "two"]
    assert word_tokenize("a<br />b") == ["a", "b"]
    assert clean_web_text("a<br /><br />b") == "a  b"
    assert clean_web_text("&quot;Hi&quot;<p>there") == '"Hi" there'
    assert clean_web_text('see <a href="http://x.y/z">this</a> now') == "see this now"
    assert clean_web_text("<a href=x>1</a> <a href=y>2</a>") == "1 2"
    assert clean_web_text("tail <a href=broken") == "tail broken"  # unterminated tag: marker dropped
    assert clean_web_text("</a> kept without a link") == "</a> kept without a link"
    assert clean_web_text("line\\nnext back\\slash") == "line next back slash"
    # only the exact spellings the reference replaces
    assert word_tokenize("a<br/>b") == ["a", "<", "br", "/", ">", "b"]
    assert word_tokenize("&amp;") == ["&", "amp", ";"]


def _transformers_basic_tokenizer():
    try:
        from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer
    except ImportError:
        from transformers.models.bert.tokenization_bert import BasicTokenizer
    return BasicTokenizer(do_lower_case=True, tokenize_chinese_chars=False)


AWKWARD_ALPHABET = (
    [chr(c) for c in range(128)] * 3
    + list("éÉàçñÑøßİıﬁ\u0301\u0308\u0327\u00a0\u2003\u200b\u2028\u0085\ufffd\u00ad\u037e\u00b7")
    + list("\u201c\u201d\u2019\u2014\u00bf\u00a1\u3002\u4e2d\u6587\uac00\u1100\u1161\u0bca\u0bbe\u212b")
    + ["\U0001f600", "\U0001d400", "\u0000"]
)


def awkward_strings(count: int, seed: int = 0):
    """Random strings of 0-39 characters: ASCII (controls included), accents and combining marks, odd
    spaces and separators, CJK, Hangul, Tamil, astral symbols and NUL."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield "".join(rng.choice(AWKWARD_ALPHABET, size=int(rng.integers(0, 40))).tolist())


def test_basic_tokenize_equals_transformers_basic_tokenizer_on_awkward_strings():
    ref = _transformers_basic_tokenizer()
    for text in awkward_strings(3000):
        assert basic_tokenize(text) == ref.tokenize(text), repr(text)


def test_basic_tokenize_equals_transformers_basic_tokenizer_on_imdb():
    path = require_resource(shared_data_dir() / "imdb" / "unsup.jsonl.gz", "IMDB unsup reviews")
    ref = _transformers_basic_tokenizer()
    with gzip.open(path, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(1500), f)]
    non_ascii = [t for t in texts if not t.isascii()]
    assert len(non_ascii) > 50
    for text in texts[:150] + non_ascii[:150]:
        cleaned = clean_web_text(text)
        assert basic_tokenize(cleaned) == ref.tokenize(cleaned)


# ---------------------------------------------------------------------------------- statistics


def test_idf_and_corpus_tfidf_golden(stats):
    assert stats.num_docs == 3
    assert stats.idf == pytest.approx({"a": 0.0, "b": L15, "c": L3, "d": L3})
    assert stats.corpus_tfidf == pytest.approx(
        {"a": 0.0, "b": (1 / 3 + 1 / 2) * L15, "c": L3 / 3, "d": L3 / 2}
    )
    assert stats.max_idf == pytest.approx(L3)


def test_idf_and_corpus_tfidf_golden_on_the_reference_tokenisation():
    # words: doc 1 don ' t panic ! (5); doc 2 cafe " cafe " don (5: <br /> is a space, &quot; a
    # quote, Café loses its accent); doc 3 t (1). N = 3; df: don 2, t 2, every other word 1.
    s = fit_tfidf_stats(["Don't panic!", "Café &quot;cafe&quot;<br />don", "t"])
    assert s.num_docs == 3
    assert s.idf == pytest.approx({"don": L15, "t": L15, "'": L3, "panic": L3, "!": L3, "cafe": L3, '"': L3})
    assert s.corpus_tfidf == pytest.approx({
        "don": (1 / 5 + 1 / 5) * L15, "t": (1 / 5 + 1) * L15, "'": L3 / 5, "panic": L3 / 5, "!": L3 / 5,
        "cafe": 2 / 5 * L3, '"': 2 / 5 * L3,
    })


def test_fit_reads_an_iterable_once():
    docs = ["a b c", "A b.", "a d", "", "b b e"]
    assert fit_tfidf_stats(t for t in docs) == fit_tfidf_stats(docs)


def test_fit_counts_punctuation_and_lowercases():
    s = fit_tfidf_stats(CORPUS)
    assert set(s.idf) == {"a", "b", "c", "d", "."}
    assert s.idf["."] == pytest.approx(L3)
    # "." is 1 of 3 tokens in "A b."; "b" is 1/3 of docs 1 and 2
    assert s.corpus_tfidf["."] == pytest.approx(L3 / 3)
    assert s.corpus_tfidf["b"] == pytest.approx((1 / 3 + 1 / 3) * L15)


def test_stats_save_load_roundtrip(stats, tmp_path):
    path = tmp_path / "sub" / "stats.json"
    stats.save(path)
    loaded = TfIdfStats.load(path)
    assert loaded.idf == stats.idf
    assert loaded.corpus_tfidf == stats.corpus_tfidf
    assert loaded.num_docs == stats.num_docs
    assert list(loaded.corpus_tfidf) == list(stats.corpus_tfidf)  # order kept: same sampling
    # statistics of format 1 were fitted with another tokenisation: refuse them
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format": "uda-tfidf-stats/1", "num_docs": 1, "idf": {}, "corpus_tfidf": {}}))
    with pytest.raises(ValueError, match="refit"):
        TfIdfStats.load(old)


# ---------------------------------------------------------------------------------- per-text probs


def test_replacement_probs_golden(stats):
    p = 0.3
    probs = replacement_probs(["a", "b", "c"], stats.idf, p)
    # scores: a 0, b log1.5/3, c log3/3; gaps from max: log3/3, log2/3, 0
    l6 = math.log(6.0)
    expected = [math.log(3) / l6 * p * 3, math.log(2) / l6 * p * 3, 0.0]
    np.testing.assert_allclose(probs, expected, rtol=1e-12, atol=1e-15)
    assert probs.mean() == pytest.approx(p)
    assert probs[np.argmax([0, L15 / 3, L3 / 3])] == 0.0  # the highest TF-IDF word is kept


def test_replacement_probs_repeated_and_unseen_words(stats):
    # "z" is unseen -> max idf (log 3); counts: a x2, b x1, z x1 out of 4 tokens
    toks = ["a", "b", "a", "z"]
    probs = replacement_probs(toks, stats.idf, 0.25)
    scores = np.array([0.0, L15 / 4, 0.0, L3 / 4])
    gaps = scores.max() - scores
    np.testing.assert_allclose(probs, gaps / gaps.sum() * 0.25 * 4)
    assert probs[3] == 0.0 and probs.mean() == pytest.approx(0.25)
    # explicit unseen_idf
    probs2 = replacement_probs(toks, stats.idf, 0.25, unseen_idf=0.0)
    # now z scores 0, b is the max
    assert probs2[1] == 0.0 and probs2.mean() == pytest.approx(0.25)


def test_replacement_probs_clipped_and_degenerate(stats):
    # a a a c, p=0.9: each a gets 1/3 * 0.9 * 4 = 1.2 -> clipped to 1
    probs = replacement_probs(["a", "a", "a", "c"], stats.idf, 0.9)
    np.testing.assert_allclose(probs, [1.0, 1.0, 1.0, 0.0])
    # all scores equal -> nothing replaced
    np.testing.assert_array_equal(replacement_probs(["c", "d"], stats.idf, 0.5), [0.0, 0.0])
    np.testing.assert_array_equal(replacement_probs(["a", "a"], stats.idf, 0.5), [0.0, 0.0])
    assert replacement_probs([], stats.idf, 0.5).shape == (0,)


# ---------------------------------------------------------------------------------- TF-IDF augmenter


def test_tfidf_sampling_distribution(stats):
    aug = TfIdfWordReplacement(stats, 0.3)
    ct = stats.corpus_tfidf
    top = max(ct.values())
    expected = {w: (top - v) for w, v in ct.items()}
    z = sum(expected.values())
    expected = {w: v / z for w, v in expected.items()}
    assert dict(zip(aug.vocab, aug.sampling_probs)) == pytest.approx(expected)

    n = 100_000
    freq = Counter(aug.sample_words(n, np.random.default_rng(0)))
    assert freq["d"] == 0  # the most informative corpus word is never a replacement
    for w, q in expected.items():
        assert freq[w] / n == pytest.approx(q, abs=0.006)

    # the same through __call__: in "c a" (p=1) the "a" is always replaced, "c" never
    out = TfIdfWordReplacement(stats, 1.0)(["c a"] * 20_000, np.random.default_rng(1))
    assert all(o.startswith("c ") for o in out)
    freq = Counter(o.split()[1] for o in out)
    for w, q in expected.items():
        assert freq[w] / len(out) == pytest.approx(q, abs=0.015)


def test_tfidf_replacement_rate_matches_probs(stats):
    aug = TfIdfWordReplacement(stats, 0.3)
    text = "a b c"
    probs = replacement_probs(["a", "b", "c"], stats.idf, 0.3)
    rng = np.random.default_rng(5)
    n = 20_000
    outs = aug([text] * n, rng)
    # a replacement word may coincide with the original, so compare with P(replaced and changed)
    sp = dict(zip(aug.vocab, aug.sampling_probs))
    changed = np.array([[o.split()[i] != t for i, t in enumerate(["a", "b", "c"])] for o in outs])
    expect = [probs[i] * (1 - sp[t]) for i, t in enumerate(["a", "b", "c"])]
    np.testing.assert_allclose(changed.mean(axis=0), expect, atol=0.015)


def test_tfidf_determinism_alignment_and_no_mutation(stats):
    aug = TfIdfWordReplacement(stats, 0.5)
    texts = ["a b c d a b", "", "c c a<br /><br />b d", "single", "b, a. c!"]
    before = list(texts)
    o1 = aug(texts, np.random.default_rng(42))
    o2 = aug(texts, np.random.default_rng(42))
    assert o1 == o2
    assert texts == before
    assert len(o1) == len(texts) and all(isinstance(o, str) for o in o1)
    assert o1[1] == ""
    for t, o in zip(texts, o1):
        assert len(word_tokenize(o)) == len(word_tokenize(t))  # token alignment kept
    outs = {tuple(aug(texts, np.random.default_rng(s))) for s in range(20)}
    assert len(outs) > 1


def test_tfidf_output_is_the_original_or_the_joined_words(stats):
    text = "A  b,<br /><br />c!"
    assert TfIdfWordReplacement(stats, 0.0)([text], np.random.default_rng(0)) == [text]  # nothing replaced
    aug = TfIdfWordReplacement(stats, 1.0)
    for seed in range(10):
        out = aug(["b."], np.random.default_rng(seed))[0]
        assert len(word_tokenize(out)) == 2  # a replaced "." does not merge with "b"
    # an edited text is the reference's word list joined by spaces: cleaned, lower-cased, split
    # words: cafe , a c; "cafe", "," (unseen: max idf) and "c" score log3/4, "a" 0: only "a" is replaced
    for seed in range(10):
        out = aug(["Café,  A<br />c"], np.random.default_rng(seed))[0]
        new = out.split(" ")[2]
        assert new in stats.idf and out == f"cafe , {new} c"


def test_protocol_and_names(stats, tmp_path):
    path = tmp_path / "p.jsonl"
    write_precomputed(path, ["x"], [["y"]])
    augs = [
        TfIdfWordReplacement(stats, 0.3),
        UniformWordReplacement(stats, 0.1),
        PrecomputedAugmenter(path),
    ]
    assert [a.name for a in augs] == ["tf_idf-0.3", "unif-0.1", "precomputed:p.jsonl"]
    for a in augs + [Compose(augs[:2])]:
        assert isinstance(a, Augmenter)
    with pytest.raises(ValueError, match=r"replacement probability p must be in \[0, 1\], got 1.5"):
        TfIdfWordReplacement(stats, 1.5)


def test_default_p_stated_once_in_the_registry():
    from augment.cli import build_parser
    from augment.registry import DEFAULT_P, OPTION_HELP, WORD_LEVEL, make_augmenter

    assert set(DEFAULT_P) == WORD_LEVEL
    assert DEFAULT_P == dict.fromkeys(WORD_LEVEL, 0.1)  # what the command line has always used
    stats = fit_tfidf_stats(CORPUS)
    for method in ("tf_idf", "unif", "swap", "delete"):
        assert make_augmenter(method, {}, stats).p == DEFAULT_P[method]
        assert make_augmenter(method, {"p": 0.3}, stats).p == 0.3
    assert OPTION_HELP["p"][0] == 0.1
    assert "(default: 0.1)" in " ".join(build_parser().format_help().split())


# ---------------------------------------------------------------------------------- uniform


def test_uniform_rate_and_vocab():
    aug = UniformWordReplacement(["zz"], 0.2)
    text = " ".join(["x"] * 500)
    outs = aug([text] * 40, np.random.default_rng(3))
    frac = np.mean([word_tokenize(o).count("zz") / 500 for o in outs])
    assert frac == pytest.approx(0.2, abs=0.01)
    assert all(len(word_tokenize(o)) == 500 for o in outs)
    # uniform over the vocabulary
    aug = UniformWordReplacement(["p", "q", "r", "s"], 1.0)
    freq = Counter(aug(["x " * 10_000], np.random.default_rng(0))[0].split())
    assert set(freq) == {"p", "q", "r", "s"}
    assert all(abs(c / 10_000 - 0.25) < 0.02 for c in freq.values())
    a1 = aug(["x y z"], np.random.default_rng(9))
    assert a1 == aug(["x y z"], np.random.default_rng(9))


def test_uniform_from_stats(stats):
    aug = UniformWordReplacement(stats, 1.0)
    out = aug(["hello there, friend"], np.random.default_rng(0))[0]
    assert len(out.split()) == 4 and all(w in stats.idf for w in out.split())


def test_uniform_leaves_texts_under_three_tokens_unchanged():
    # the reference's UnifRep only replaces in word lists of 3 or more tokens
    aug = UniformWordReplacement(["zz"], 1.0)
    short = ["Hello there", "Hi!", "one", "", "<br />x<br />"]
    assert aug(short, np.random.default_rng(0)) == short
    assert aug(["Hello there!"], np.random.default_rng(0)) == ["zz zz zz"]  # 3 tokens with the "!"
    # TF-IDF replacement has no such rule in the reference: a 2-token text can change
    stats = fit_tfidf_stats(["a b c", "A b", "a d"])
    aug = TfIdfWordReplacement(stats, 1.0)
    assert any(aug(["c a"], np.random.default_rng(s))[0] != "c a" for s in range(20))


# ---------------------------------------------------------------------------------- precomputed


@pytest.mark.parametrize("fname", ["aug.jsonl", "aug.jsonl.gz"])
def test_precomputed_lookup(tmp_path, fname):
    path = tmp_path / fname
    originals = ["first text", "second text", "third"]
    copies = [["f1", "f2", "f3"], ["s1"], ["t1", "t2"]]
    write_precomputed(path, originals, copies, ids=["i0", "i1", "i2"])
    if fname.endswith(".gz"):
        with gzip.open(path, "rt") as f:
            assert json.loads(f.readline())["id"] == "i0"
    aug = PrecomputedAugmenter(path)
    assert aug.name == f"precomputed:{fname}"
    assert len(aug) == 3 and "third" in aug and "nope" not in aug
    texts = ["third", "first text", "second text", "first text"]
    before = list(texts)
    out = aug(texts, np.random.default_rng(0))
    assert texts == before
    assert out[0] in copies[2] and out[1] in copies[0] and out[2] == "s1" and out[3] in copies[0]
    assert out == aug(texts, np.random.default_rng(0))
    picks = Counter(aug(["first text"] * 30_000, np.random.default_rng(1)))
    assert set(picks) == {"f1", "f2", "f3"}
    assert all(abs(c / 30_000 - 1 / 3) < 0.015 for c in picks.values())
    assert aug([], np.random.default_rng(0)) == []


def test_precomputed_missing_text(tmp_path):
    path = tmp_path / "bt.jsonl"
    write_precomputed(path, ["known"], [["k"]])
    aug = PrecomputedAugmenter(path)
    missing = "An unknown review " + "x" * 200
    with pytest.raises(MissingAugmentationError) as ei:
        aug(["known", missing], np.random.default_rng(0))
    assert isinstance(ei.value, LookupError) and isinstance(ei.value, KeyError)
    msg = str(ei.value)
    assert str(path) in msg and missing[:80] in msg and missing[:81] not in msg
    assert "regenerate" in msg


def test_precomputed_bad_lines(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "a", "augmented": ["b"]}\n{"text": "oops"\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 2"):
        PrecomputedAugmenter(path)
    path.write_text('\n{"text": "a", "augmented": []}\n')
    with pytest.raises(ValueError, match="line 2"):
        PrecomputedAugmenter(path)


def test_precomputed_repeated_original_and_cache(tmp_path, monkeypatch):
    import augment.precomputed as precomputed
    from uda.io import text_hash

    path = tmp_path / "rep.jsonl"
    write_precomputed(path, ["a", "b", "a"], [["a1", "a2"], ["b1"], ["a3"]])
    aug = PrecomputedAugmenter(path)
    assert len(aug) == 2 and aug.copies("a") == ["a1", "a2", "a3"]  # a repeated original: copies pooled in file order
    texts = ["a", "b", "a", "a"]
    draws = np.random.default_rng(5).integers(0, [3, 1, 3, 3])  # the pick: one draw per text over its pooled copies
    assert aug(texts, np.random.default_rng(5)) == [["a1", "a2", "a3"][i] if t == "a" else "b1"
                                                    for t, i in zip(texts, draws)]
    hashes = np.array([text_hash(t) for t in ["b", "c", "a", "d"]], dtype="S16")
    assert aug.missing(hashes).tolist() == [1, 3]
    monkeypatch.setattr(precomputed, "_records", lambda p: pytest.fail("the file was converted again"))
    assert PrecomputedAugmenter(path).copies("a") == ["a1", "a2", "a3"]  # from the Arrow cache


def test_write_precomputed_length_mismatch(tmp_path):
    with pytest.raises(ValueError):
        write_precomputed(tmp_path / "x.jsonl", ["a", "b"], [["c"]])
    with pytest.raises(ValueError):
        write_precomputed(tmp_path / "x.jsonl", ["a"], [["c"], ["d"]])
    assert not (tmp_path / "x.jsonl").exists()


# ---------------------------------------------------------------------------------- compose


class _Suffix:
    def __init__(self, s: str):
        self.s = s
        self.name = f"suffix{s}"

    def __call__(self, texts, rng):
        return [t + self.s + str(rng.integers(10)) for t in texts]


def test_compose_order_name_and_determinism():
    comp = Compose([_Suffix("A"), _Suffix("B")])
    assert comp.name == "suffixA+suffixB"
    texts = ["x", "y"]
    out = comp(texts, np.random.default_rng(0))
    assert texts == ["x", "y"]
    assert all(o[0] in "xy" and o[1] == "A" and o[3] == "B" for o in out)
    assert out == comp(texts, np.random.default_rng(0))
    with pytest.raises(ValueError):
        Compose([])


def test_compose_with_real_augmenters(stats, tmp_path):
    path = tmp_path / "c.jsonl"
    write_precomputed(path, ["a b c"], [["c b a"]])
    comp = Compose([PrecomputedAugmenter(path), UniformWordReplacement(["q"], 1.0)])
    assert comp.name == "precomputed:c.jsonl+unif-1.0"
    assert comp(["a b c"], np.random.default_rng(0)) == ["q q q"]
