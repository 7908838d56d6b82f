"""Protected words (option ``protect`` of the word-level augmenters): the mask of augment.text_ops, the
augmenters keeping protected words, protect=False keeping the outputs of before the option existed,
and the option's way through the registry, the command line, the config build and the pipeline."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from augment import text_ops
from augment.registry import OPTION_HELP, make_augmenter, parse_bool
from augment.text_ops import (
    CONTRACTION_HEADS,
    NEGATIONS,
    NEGATIVE_CONTRACTIONS,
    NUMBER_WORDS,
    WH_WORDS,
    basic_tokenize,
    is_protected,
    is_protected_replacement,
    protected_mask,
    reference_protected_tokens,
    surface_protected_mask,
    tokenize,
    word_tokenize,
)
from augment.word_level import WordNet, load_word_vectors
from augment.word_replace import TfIdfWordReplacement, UniformWordReplacement, fit_tfidf_stats, replacement_probs
from tests.conftest import require_resource, shared_data_dir
from tests.test_augment import awkward_strings
from tests.test_augment_word_level import write_glove, write_tiny_wordnet, write_wordnet

METHODS = ("tf_idf", "unif", "wordnet", "swap", "delete", "embedding")


def protected_words(text: str) -> list[str]:
    return [t for t, m in zip(tokenize(text), surface_protected_mask(text)) if m]


def protected_reference(text: str) -> list[str]:
    tokens, mask = reference_protected_tokens(text)
    return [t for t, m in zip(tokens, mask) if m]


# ---------------------------------------------------------------------------------- the mask


def test_mask_of_the_squad_questions():
    assert protected_words("Why did Tesla not return to Graz in 1880?") == ["Why", "Tesla", "not", "Graz", "1880"]
    assert protected_words("What is NOT a prime number?") == ["What", "NOT"]
    assert protected_words("Which of the 3 Normans never went to Paris?") == ["Which", "3", "Normans", "never",
                                                                              "Paris"]


def test_sentence_initial_capital_is_not_a_name_unless_another_rule_protects_it():
    assert protected_words("The Normans went to Paris.") == ["Normans", "Paris"]
    assert protected_words("Tesla returned. Edison stayed in Menlo Park.") == ["Menlo", "Park"]
    assert protected_words("He left? Then Graz won.") == ["Graz"]  # "Then" starts a sentence
    assert protected_words("He left, then Graz won.") == ["Graz"]
    for first in ("What", "Why", "How", "Whether", "Never", "Not", "Nobody", "None", "Without", "Cannot",
                  "Don't", "Isn't", "Three", "First", "Twenty"):
        assert protected_words(f"{first} was it like?") == [first], first
    assert protected_words("NASA flew. A man went.") == ["NASA"]  # ALL-CAPS anywhere; one letter is not
    assert protected_words("the movie was good") == []
    # a word capitalised mid-sentence elsewhere in the text is a name at a sentence start as well
    assert protected_words("Tesla moved. He met Tesla.") == ["Tesla", "Tesla"]


def test_sentence_boundaries():
    # quotes and brackets after the full stop; a line break; abbreviations and initials
    assert protected_words('He asked "why?" Then we went.') == ["why"]
    assert protected_words("(Really.) Then we went.") == []
    assert protected_words("we went\nHome again") == []
    assert protected_words("we met Dr. Smith and Mr. Jones") == ["Dr", "Smith", "Mr", "Jones"]
    assert protected_words("Dr. Smith left") == ["Smith"]
    assert protected_words("a book by J. K. Rowling") == ["J", "K", "Rowling"]
    assert protected_words("It is 3.5 km... Then we went.") == ["3", ".", "5"]


def test_names_with_apostrophes_initialisms_and_compounds():
    assert protected_words("They ate at McDonald's today") == ["McDonald's"]
    assert protected_reference("They ate at McDonald's today") == ["mcdonald", "'", "s"]
    assert protected_words("the U.S. Army won") == ["U", ".", "S", ".", "Army"]
    assert protected_words("U.S. troops left") == ["U", ".", "S", "."]  # sentence-initial, still protected
    assert protected_reference("U.S. troops left") == ["u", ".", "s", "."]
    assert protected_reference("Who did the Yuan's increase help?") == ["who", "yuan", "'", "s"]
    assert protected_reference("money did Kent-Brown invest at AT&T") == ["kent", "-", "brown", "at", "&", "t"]
    assert protected_words("e.g. the movie") == []  # a lower-case initialism is no name


def test_negations_and_contractions_every_word_of_the_lists():
    for word in sorted(NEGATIONS | NEGATIVE_CONTRACTIONS | WH_WORDS | NUMBER_WORDS):
        assert is_protected(word) and is_protected(word, sentence_initial=True), word
        assert is_protected(word.capitalize(), sentence_initial=True) and is_protected(word.upper()), word
    for word in ("mustn't", "ain't", "needn't", "what's", "who'd", "nobody's", "one's"):
        assert is_protected(word), word
    for word in ("movie", "the", "return", "can", "won", "it's", "", "'", "."):
        assert not is_protected(word), word
    # the surface tokenizer keeps "didn't" whole; "don’t" (curly) and the reference tokens are joined back
    assert protected_words("He didn't go, they don’t care") == ["didn't", "don", "\u2019", "t"]
    assert protected_reference("He didn't go, they don’t care") == ["didn", "'", "t", "don", "\u2019", "t"]
    assert protected_reference("I can't and won't") == ["can", "'", "t", "won", "'", "t"]
    assert protected_reference("we can and we won") == []


def test_numbers():
    assert protected_words("born in 1856, the 3rd son; 2010s and 4x4") == ["1856", "3rd", "2010s", "4x4"]
    assert protected_reference("a 20-year-old at 10:30, 1/2 or +3") == ["20", "10", ":", "30", "1", "/", "2", "+", "3"]
    assert protected_reference("It cost $1,880.50 or 20% in 1880-1890 .") == [
        "$", "1", ",", "880", ".", "50", "20", "%", "1880", "-", "1890"]
    assert protected_words("one hundred and twenty million people, the tenth time") == [
        "one", "hundred", "twenty", "million", "tenth"]
    assert not is_protected("someone") and not is_protected("tone")


def test_cased_reference_tokens_for_accents_and_non_ascii():
    assert protected_reference("Café in Zürich: Émile Zola met Ångström") == ["zurich", "emile", "zola",
                                                                             "angstrom"]
    assert protected_reference("What is 565 °C?") == ["what", "565", "°c"]
    assert protected_reference("Émile Zola met us") == ["zola"]
    assert protected_reference("naïve café, ÇA VA") == ["ca", "va"]


def test_reference_mask_aligns_with_word_tokenize_on_awkward_strings():
    for text in awkward_strings(2000):
        tokens, mask = reference_protected_tokens(text)
        assert tokens == word_tokenize(text) and len(mask) == len(tokens), repr(text)
        cleaned = text_ops.clean_web_text(text)
        cased, gaps = text_ops._cased_reference_tokens(cleaned)
        # one cased token per reference token, giving it back after lower-casing and accent stripping
        assert [text_ops._fold(c) for c in cased] == basic_tokenize(cleaned), repr(text)
        assert len(gaps) == len(cased)


def test_reference_mask_on_squad_questions_agrees_with_the_surface_mask():
    path = require_resource(shared_data_dir() / "squad_v2" / "dev-v2.0.json", "SQuAD 2.0 dev set")
    data = json.loads(path.read_text(encoding="utf-8"))
    questions = [q["question"] for a in data["data"] for p in a["paragraphs"] for q in p["qas"]][:3000]
    n_protected = 0
    for q in questions:
        tokens, mask = reference_protected_tokens(q)
        assert tokens == word_tokenize(q)
        n_protected += sum(mask)
        # every protected surface word is among the protected reference tokens (case folded)
        joined = "".join(t for t, m in zip(tokens, mask) if m)
        for w in protected_words(q):
            assert text_ops._fold(w).replace("'", "").replace("\u2019", "") in joined.replace("'", ""), (q, w)
    assert 0.1 < n_protected / sum(len(word_tokenize(q)) for q in questions) < 0.4


def test_protected_mask_arguments():
    assert protected_mask(["Why", "did", "Tesla", "go", "?"]) == [True, False, True, False, False]
    assert protected_mask([]) == []
    with pytest.raises(ValueError, match="2 tokens but 1 gaps"):
        protected_mask(["a", "b"], [""])


def test_replacement_words_that_are_never_inserted():
    for word in ("not", "never", "what", "1880", "three", "Paris", "City of Light", "didn", "isn", "n't", "NASA"):
        assert is_protected_replacement(word), word
    for word in ("film", "story line", "can", "won", "paris", "'", "u"):
        assert not is_protected_replacement(word), word  # a lower-case name cannot be recognised
    assert "didn" in CONTRACTION_HEADS and "can" not in CONTRACTION_HEADS


# ---------------------------------------------------------------------------------- fixtures for the augmenters

QUESTIONS = [
    "Why did Tesla not return to Graz in 1880?",
    "What is NOT a prime number?",
    "Which of the 3 Normans never went to Paris?",
    "Why was the good movie not a good film for Tesla?",  # words of the existing tiny fixtures
]
EXPECTED = [
    ["Why", "Tesla", "not", "Graz", "1880"],
    ["What", "NOT"],
    ["Which", "3", "Normans", "never", "Paris"],
    ["Why", "not", "Tesla"],
]
# the questions' vocabulary plus protected words, so that TF-IDF / uniform replacement could insert them
QA_CORPUS = QUESTIONS + [
    "When did the war not end in 1918?",
    "How many of the twenty players didn't go to Vienna?",
    "Who went to the city without a ticket?",
    "the film was good and the plot was fine",
]


# synonyms of the questions' words, some of them protected words (which must never be inserted)
QA_SYNSETS = {
    "noun": [["return", "homecoming", "three"], ["number", "figure", "Numeral"], ["paris", "Paris", "City_of_Light"],
             ["tesla", "T"], ["normans", "invaders"], ["graz", "Styrian_capital"]],
    "adj": [["prime", "choice", "never"], ["good", "fine"]],
    "verb": [["return", "go_back", "come_back"], ["went", "travelled", "not"]],
}

# nearest neighbours of the questions' words; the nearest one is often a protected word
QA_VECTORS = {
    "return": [1, 0, 0, 0], "three": [0.99, 0.1, 0, 0], "homecoming": [0.95, 0.2, 0, 0],
    "prime": [0, 1, 0, 0], "one": [0.1, 0.99, 0, 0], "premier": [0.2, 0.95, 0, 0],
    "number": [0, 0, 1, 0], "seven": [0.1, 0, 0.99, 0], "figure": [0.2, 0, 0.95, 0],
    "went": [0, 0, 0, 1], "never": [0.1, 0, 0, 0.99], "travelled": [0.2, 0, 0, 0.95],
    "paris": [1, 1, 0, 0], "london": [1, 0.9, 0, 0], "tesla": [0, 1, 1, 0], "edison": [0, 0.9, 1, 0],
    "graz": [0, 0, 1, 1], "vienna": [0, 0, 0.9, 1], "normans": [1, 0, 1, 0], "saxons": [0.9, 0, 1, 0],
    "good": [1, 0, 1, 1], "great": [0.95, 0.1, 1, 1], "movie": [0, 1, 0, 1], "film": [0.1, 1, 0, 1],
}


@pytest.fixture(scope="module")
def qa_resources(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("protect")
    vec = d / "qa_vectors.txt"
    vec.write_text("".join(f"{w} " + " ".join(str(float(x)) for x in v) + "\n" for w, v in QA_VECTORS.items()),
                   encoding="utf-8")
    return {
        "stats": fit_tfidf_stats(QA_CORPUS),
        "wordnet_dir": str(write_wordnet(d / "qa_wordnet", QA_SYNSETS)),
        "vectors": str(vec),
        "tiny_wordnet_dir": str(write_tiny_wordnet(d / "tiny_wordnet")),
        "tiny_vectors": str(write_glove(d / "glove.txt")),
    }


def build(method: str, p: float, res: dict, protect: bool | None = None, tiny: bool = False):
    opts: dict = {"p": p}
    if protect is not None:
        opts["protect"] = protect
    if method == "wordnet":
        opts["wordnet_dir"] = res["tiny_wordnet_dir" if tiny else "wordnet_dir"]
    if method == "embedding":
        opts.update(vectors=res["tiny_vectors" if tiny else "vectors"], neighbours=2)
    return make_augmenter(method, opts, res["stats"])


def is_subsequence(needles: list[str], haystack: list[str]) -> bool:
    it = iter(haystack)
    return all(any(h == n for h in it) for n in needles)


# ---------------------------------------------------------------------------------- protected words survive


@pytest.mark.parametrize("method", METHODS)
def test_protected_words_survive_every_word_level_augmenter(method, qa_resources):
    seeds = range(8)
    for tiny in (False, True):
        aug = build(method, 1.0, qa_resources, protect=True, tiny=tiny)
        assert aug.name.endswith("-protect")
        unprotected = build(method, 1.0, qa_resources, tiny=tiny)
        for q, expected in zip(QUESTIONS, EXPECTED):
            assert protected_words(q) == expected
            changed = 0
            for seed in seeds:
                out = aug([q], np.random.default_rng(seed))[0]
                changed += out != q
                if method in ("tf_idf", "unif"):
                    # the reference's word list: every protected token stays in its place, the
                    # replacements are no protected words
                    before, mask = reference_protected_tokens(q)
                    after = word_tokenize(out)
                    assert len(after) == len(before), (q, out)
                    for b, a, m in zip(before, after, mask):
                        if m:
                            assert a == b, (q, out)
                        elif a != b:
                            assert not is_protected_replacement(a), (q, out, a)
                            assert a not in NEGATIONS | WH_WORDS | NUMBER_WORDS and not any(c.isdigit() for c in a)
                    assert [t for t, m in zip(before, mask) if m] == [w.lower() for w in expected]
                else:
                    toks = tokenize(out)
                    assert is_subsequence(expected, toks), (q, out)
                    if method == "swap":  # protected words do not move at all
                        src = tokenize(q)
                        assert len(toks) == len(src)
                        for t_src, t_out, m in zip(src, toks, surface_protected_mask(q)):
                            if m:
                                assert t_out == t_src, (q, out)
                    if method in ("wordnet", "embedding"):
                        new = set(toks) - set(tokenize(q))
                        assert not any(is_protected_replacement(w) for w in new), (q, out, new)
            # the augmenter still does something to the unprotected words (swap may draw the identity)
            if tiny and method in ("wordnet", "embedding") and q != QUESTIONS[3]:
                continue  # the existing tiny fixtures know none of these questions' words
            assert changed >= (len(seeds) - 2 if method == "swap" else len(seeds)), (method, q, changed)
        # without protect the same augmenters do edit protected words (so the test above means something)
        if not tiny:
            lost = 0
            for q, expected in zip(QUESTIONS, EXPECTED):
                for seed in seeds:
                    out = unprotected([q], np.random.default_rng(seed))[0]
                    if method in ("tf_idf", "unif"):  # compare in the reference's lower-cased tokens
                        expected, out = [w.lower() for w in expected], " ".join(word_tokenize(out))
                    lost += not is_subsequence(expected, tokenize(out))
            assert lost > 0, method


def test_protected_replacements_are_redrawn_not_dropped(qa_resources):
    # the protected synonym / neighbour ("three", "never", "not") is the first one of several: with
    # protect the allowed ones take its share; without, it is inserted now and then
    wn = build("wordnet", 1.0, qa_resources, protect=True)
    plain = build("wordnet", 1.0, qa_resources)
    seen, seen_plain = set(), set()
    for s in range(60):
        seen.add(tokenize(wn(["they return"], np.random.default_rng(s))[0])[1])
        seen_plain.add(tokenize(plain(["they return"], np.random.default_rng(s))[0])[1])
    assert seen == {"homecoming", "go", "come"}  # "go back", "come back"
    assert "three" in seen_plain
    emb = build("embedding", 1.0, qa_resources, protect=True)
    assert {emb(["they return"], np.random.default_rng(s))[0] for s in range(30)} == {"they homecoming"}
    emb_plain = build("embedding", 1.0, qa_resources)
    assert "they three" in {emb_plain(["they return"], np.random.default_rng(s))[0] for s in range(30)}


def test_tfidf_protected_sampling_is_the_restricted_distribution():
    stats = fit_tfidf_stats(["a b c", "A b", "a d", "not 3 x", "b c what"])
    plain = TfIdfWordReplacement(stats, 0.3)
    aug = TfIdfWordReplacement(stats, 0.3, protect=True)
    allowed = {w: q for w, q in zip(plain.vocab, plain.sampling_probs) if not is_protected_replacement(w)}
    z = sum(allowed.values())
    n = 60_000
    words = aug.sample_words(n, np.random.default_rng(0))
    assert not {"not", "3", "what"} & set(words)
    for w, q in allowed.items():
        assert words.count(w) / n == pytest.approx(q / z, abs=0.01)
    # uniform replacement: uniform over the unprotected words
    unif = UniformWordReplacement(["p", "q", "not", "r", "7", "who"], 1.0, protect=True)
    out = unif(["x " * 6000], np.random.default_rng(0))[0].split()
    assert set(out) == {"p", "q", "r"} and all(abs(out.count(w) / 6000 - 1 / 3) < 0.03 for w in "pqr")


def test_tfidf_probabilities_average_p_over_the_unprotected_tokens():
    stats = fit_tfidf_stats(QA_CORPUS)
    tokens, mask = reference_protected_tokens(QUESTIONS[0])
    np.testing.assert_array_equal(replacement_probs(tokens, stats.idf, 0.1, stats.max_idf, [False] * len(tokens)),
                                  replacement_probs(tokens, stats.idf, 0.1, stats.max_idf))
    probs = replacement_probs(tokens, stats.idf, 0.1, stats.max_idf, mask)
    assert all(probs[i] == 0 for i, m in enumerate(mask) if m)
    keep = ~np.asarray(mask)
    assert probs[keep].mean() == pytest.approx(0.1)
    assert replacement_probs(tokens, stats.idf, 0.1, stats.max_idf, [True] * len(tokens)).sum() == 0
    with pytest.raises(ValueError, match="mask of 2"):
        replacement_probs(tokens, stats.idf, 0.1, None, [True, False])
    with pytest.raises(ValueError, match="every vocabulary word is protected"):
        UniformWordReplacement(["not", "3"], 0.1, protect=True)


def test_delete_and_swap_rates_with_protect():
    from augment.word_level import RandomDeletion, RandomSwap

    text = " ".join("word Paris" for _ in range(500))
    out = RandomDeletion(0.3, protect=True)([text], np.random.default_rng(0))[0].split()
    assert out.count("Paris") == 500 and abs(1 - out.count("word") / 500 - 0.3) < 0.06
    assert RandomDeletion(1.0, protect=True)(["What is it?"], np.random.default_rng(0)) == ["What?"]
    # swap: only the unprotected words move, among themselves; fewer than two of them: unchanged
    assert RandomSwap(1.0, protect=True)(["What is NOT 3?"], np.random.default_rng(0)) == ["What is NOT 3?"]
    for seed in range(5):
        out = RandomSwap(0.5, protect=True)(["a Paris b c Rome d e"], np.random.default_rng(seed))[0].split()
        assert out[1] == "Paris" and out[4] == "Rome" and sorted(out[:1] + out[2:4] + out[5:]) == list("abcde")


# ---------------------------------------------------------------------------------- nothing protected: same output

PLAIN_TEXTS = [
    "the movie was good and the plot was fine",
    "a good film, the plot: fine.",
    "i loved this movie<br /><br />the film was good",
    "the plot",
    "",
    "...",
]
PLAIN_CORPUS = PLAIN_TEXTS + ["the film was bad", "a movie and a plot"]


@pytest.mark.parametrize("method", METHODS)
def test_texts_without_protected_words_come_out_as_without_protect(method, qa_resources):
    res = dict(qa_resources, stats=fit_tfidf_stats(PLAIN_CORPUS))
    assert not any(is_protected_replacement(w) for w in res["stats"].idf)
    assert not any(any(surface_protected_mask(t)) or any(reference_protected_tokens(t)[1]) for t in PLAIN_TEXTS)
    # (the tiny WordNet and vectors hold no protected word either)
    assert not any(is_protected_replacement(w) for w in load_word_vectors(res["tiny_vectors"]).words)
    wn = WordNet(res["tiny_wordnet_dir"])
    assert not any(is_protected_replacement(s) for w in ("movie", "film", "plot", "good") for s in wn.synonyms(w))
    for p in (0.1, 0.5, 1.0):
        plain = build(method, p, res, tiny=True)
        prot = build(method, p, res, protect=True, tiny=True)
        assert prot.name == plain.name + "-protect"
        for seed in range(5):
            assert prot(PLAIN_TEXTS, np.random.default_rng(seed)) == plain(PLAIN_TEXTS, np.random.default_rng(seed))


@pytest.mark.parametrize("method", ["tf_idf", "unif"])
def test_same_output_whenever_no_protected_word_was_drawn(method, qa_resources):
    # a vocabulary with protected words: texts without protected words come out as without protect
    # unless protect=False inserted a protected word (which protect=True drew again)
    plain = build(method, 0.3, qa_resources)
    prot = build(method, 0.3, qa_resources, protect=True)
    same = redrawn = 0
    for seed in range(40):
        a = plain(PLAIN_TEXTS[:1], np.random.default_rng(seed))
        b = prot(PLAIN_TEXTS[:1], np.random.default_rng(seed))
        inserted = [w for o, t in zip(a, PLAIN_TEXTS) for w in set(word_tokenize(o)) - set(word_tokenize(t))]
        if any(is_protected_replacement(w) for w in inserted):
            assert a != b
            redrawn += 1
        else:
            assert a == b
            same += 1
    assert same and redrawn


# ---------------------------------------------------------------------------------- protect=False: outputs of before

GOLDEN_TEXTS = [
    "Why did Tesla not return to Graz in 1880?",
    "What is NOT a prime number?",
    "Which of the 3 Normans never went to Paris?",
    "The movie was good. A good film!<br /><br />Plot: fine.",
    "I loved this MOVIE, and the Film wasn't good",
    "Caf\u00e9 in Z\u00fcrich: the film don\u2019t look bad\u2026 McDonald's U.S. plot",
    "",
    "...",
]
GOLDEN_CORPUS = GOLDEN_TEXTS + ["the film was good and the plot was fine", "a bad movie , not good",
                                "one two three films"]
# Recorded with the implementation before the protect option (p = 0.1, 0.5, 1.0; seeds 0, 1, 2; the tiny
# WordNet and vectors of tests/test_augment_word_level.py, 2 neighbours): sha256 of the json of all outputs.
GOLDEN_SHA256 = {
    "tf_idf": "f2f96a4abf81156c186ba78f52cbe15274a2cddd8844ebc278bf0a12469f8733",
    "unif": "b94a5ac4fd8eac3ec8cba37387991767d31ad6565171434e806a330927d7cac3",
    "wordnet": "7f56748bb2f3721a52024f70ade603b680e278a0164d7731b6a640495129d0ee",
    "swap": "1df469c46f75e5cac910f6f6d8eb44951ebd1ff0a760c343e8a85b4c502b9489",
    "delete": "3733d432bb40e9716a1b6236bcca1f102158d39f570571f76501978d474ea3fa",
    "embedding": "2381a4fa96d37dca8cf427fafe98e6cdaea304d2ade617fe430d1d885d3c6ca8",
}
# and the outputs themselves for p = 0.5, seed 0
GOLDEN_P05_SEED0 = {
    "tf_idf": [
        "why did tesla paris return this graz films 1880 one",
        "what is was zurich prime number film",
        "which of plot 3 normans never went don paris paris",
        "cafe ' was good . u good graz ! t : fine .",
        "i loved this u two and why \u2026 wasn ' t three",
        "cafe two in three mcdonald film look good a \u2019 u \u2026 number ' s u : s . plot",
        "",
        "...",
    ],
    "unif": [
        "why tesla paris two return to graz in 1880 ?",
        "what loved not 3 prime films ?",
        "which i two why was never went to bad ?",
        "the movie was good cafe paris good film . paris : fine !",
        "i a this don return and paris film which ' t t",
        "cafe cafe ' u one film ? graz in t three \u2026 one ' and u three mcdonald . plot",
        "",
        "why . graz",
    ],
    "wordnet": [
        "Why did Tesla not return to Graz in 1880?",
        "What is NOT a prime number?",
        "Which of the 3 Normans never went to Paris?",
        "The movie was beneficial. A beneficial photographic film!<br /><br />Plot: fine.",
        "I loved this MOVIE, and the Photographic film wasn't good",
        "Caf\u00e9 in Z\u00fcrich: the movie don\u2019t look bad\u2026 McDonald's U.S. story line",
        "",
        "...",
    ],
    "swap": [
        "Tesla did 1880 not return to Graz in Why?",
        "What is NOT number prime a?",
        "Paris Which the to Normans never of 3 went?",
        "movie was film fine. A good The!<br /><br />Plot: good.",
        "I loved and the, MOVIE this good wasn't Film",
        "Caf\u00e9 in Z\u00fcrich: the McDonald's S\u2019don look U\u2026 t plot.film. bad",
        "",
        "...",
    ],
    "delete": [
        "Why return to Graz in 1880?",
        "What NOT prime?",
        "Which of went to Paris?",
        "The movie was good. A!<br /><br />Plot: fine.",
        "this MOVIE, the wasn't",
        "Caf\u00e9 Z\u00fcrich: film don\u2019 look\u2026.. plot",
        "",
        "...",
    ],
    "embedding": [
        "Why did Tesla not return to Graz in 1880?",
        "What is NOT a prime number?",
        "Which of the 3 Normans never went to Paris?",
        "The movie was fine. A fine fine!<br /><br />Plot: fine.",
        "I loved this MOVIE, and the Fine wasn't good",
        "Caf\u00e9 in Z\u00fcrich: the film don\u2019t look bad\u2026 McDonald's U.S. plot",
        "",
        "...",
    ],
}


@pytest.mark.parametrize("explicit_false", [False, True])
def test_protect_false_keeps_the_outputs_of_before(explicit_false, tmp_path):
    stats = fit_tfidf_stats(GOLDEN_CORPUS)
    wn = str(write_tiny_wordnet(tmp_path / "wn"))
    vec = str(write_glove(tmp_path / "glove.txt"))
    for method in METHODS:
        outputs = {}
        for p in (0.1, 0.5, 1.0):
            opts: dict = {"p": p}
            if explicit_false:
                opts["protect"] = False
            if method == "wordnet":
                opts["wordnet_dir"] = wn
            if method == "embedding":
                opts.update(vectors=vec, neighbours=2)
            aug = make_augmenter(method, opts, stats)
            assert "protect" not in aug.name
            for seed in (0, 1, 2):
                outputs[f"{method}|{p}|{seed}"] = aug(GOLDEN_TEXTS, np.random.default_rng(seed))
        assert outputs[f"{method}|0.5|0"] == GOLDEN_P05_SEED0[method], method
        blob = json.dumps(outputs, ensure_ascii=False, sort_keys=True)
        assert hashlib.sha256(blob.encode()).hexdigest() == GOLDEN_SHA256[method], method


# ---------------------------------------------------------------------------------- option plumbing


def test_registry_names_and_values(qa_resources):
    stats = qa_resources["stats"]
    assert OPTION_HELP["protect"][0] is False
    names = {m: build(m, 0.2, qa_resources, protect=True).name for m in METHODS}
    assert names["tf_idf"] == "tf_idf-0.2-protect" and names["swap"] == "swap-0.2-protect"
    assert names["wordnet"] == "wordnet-0.2-protect" and names["embedding"] == "embedding-qa_vectors-0.2-k2-protect"
    assert all(build(m, 0.2, qa_resources, protect=False).name == n[: -len("-protect")] for m, n in names.items())
    assert make_augmenter("tf_idf", {"p": 0.1, "protect": True}, stats).name == "tf_idf-0.1-protect"
    assert make_augmenter("swap+delete", {"protect": True}).name == "swap-0.1-protect+delete-0.1-protect"
    for value, expected in (("true", True), ("False", False), ("1", True), ("no", False), (1, True), (0, False)):
        assert parse_bool(value) is expected
        assert make_augmenter("swap", {"protect": value}).protect is expected
    with pytest.raises(ValueError, match="protect must be true or false"):
        make_augmenter("swap", {"protect": "maybe"})


def test_command_line_flag():
    from augment.cli import build_parser

    ap = build_parser()
    assert "--protect" in ap.format_help()
    assert ap.parse_args(["--protect"]).protect is True
    assert ap.parse_args(["--protect", "true"]).protect is True
    assert ap.parse_args(["--protect", "false", "--method", "swap"]).protect is False
    assert ap.parse_args(["--protect", "--method", "swap"]).protect is True
    assert not hasattr(ap.parse_args([]), "protect")  # absent: the registry's default
    with pytest.raises(SystemExit):
        ap.parse_args(["--protect", "maybe"])


def test_config_build_passes_protect():
    from augment.build import build_augmenter

    cfg = SimpleNamespace(method="swap", then="delete", p=0.5, file=None, protect=True)
    assert build_augmenter(cfg, ["a b"]).name == "swap-0.5-protect+delete-0.5-protect"
    cfg = SimpleNamespace(method="swap", then=None, p=0.5, file=None)  # a config without the field
    assert build_augmenter(cfg, ["a b"]).name == "swap-0.5"


def test_pipeline_caches_and_file_names_never_mix(tmp_path):
    from augment.pipeline import augment_texts, default_output_name

    texts = ["Why did Tesla not return to Graz in 1880?", "the movie was good and the plot was fine"]
    kw = dict(copies=1, seed=0, cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    a = augment_texts(texts, "swap", {"p": 1.0}, **kw)
    b = augment_texts(texts, "swap", {"p": 1.0, "protect": True}, **kw)
    assert a.name == "swap-1.0" and b.name == "swap-1.0-protect" and a.cache_folder != b.cache_folder
    assert default_output_name("q", a.name, 0, 1) != default_output_name("q", b.name, 0, 1)
    out = tokenize(b.copies[0][0])
    assert [out[i] for i in (0, 2, 3, 6, 8)] == ["Why", "Tesla", "not", "Graz", "1880"]


def test_word_lists_are_lower_case_and_normalised():
    for words in (NEGATIONS, NEGATIVE_CONTRACTIONS, WH_WORDS, NUMBER_WORDS, CONTRACTION_HEADS, text_ops.ABBREVIATIONS):
        assert all(w == w.lower() == unicodedata.normalize("NFC", w) and w.isascii() for w in words)
