"""Word-level augmenters: TF-IDF word replacement (``tf_idf-p``) and uniform replacement (``unif-p``).

Both follow google-research/uda (``text/augmentation/word_level_augment.py``) and work, as it does, on
the reference's word lists: each text is cleaned by its web-text rules and split by BERT's basic
tokenizer (lower-cased, accents stripped, every punctuation character a token of its own; see
:func:`augment.text_ops.word_tokenize`).

* corpus statistics (``get_data_stats``): ``idf[w] = log(N_docs / doc_freq[w])`` and
  ``corpus_tfidf[w] = sum over docs of (count of w in doc / len(doc)) * idf[w]``;
* TF-IDF replacement (``TfIdfWordRep``), for one text: each token's score is its TF-IDF in that text
  (``count / len * idf``, unseen words get the largest idf); its replacement probability is
  ``(max score - score)`` normalised so the probabilities average ``p`` over the text (values above
  1 mean "always"); replacement words are drawn from the corpus vocabulary with probability
  proportional to ``max corpus_tfidf - corpus_tfidf[w]``, so uninformative words are the preferred
  replacements. Every text is eligible, as in the reference (a one-word text has nothing to replace);
* uniform replacement (``UnifRep``): each token is replaced with probability ``p`` by a uniformly
  drawn vocabulary word, only in texts of 3 or more tokens (the reference leaves shorter ones alone).

Both take ``protect`` (default False, the reference's behaviour): protected tokens (negations,
wh-words, numbers, capitalised names; the rules are in :mod:`augment.text_ops`, judged on the
original capitalisation) are never replaced and protected words are never inserted.

Output: the reference hands the edited word list to WordPiece; here an edited text is that word list
joined with single spaces, which an uncased BERT tokenizer splits back into the same words. A text in
which nothing was replaced is returned unchanged, so its augmented view equals the original, as in
the reference.

The text operations (this tokenisation, and the surface-keeping :func:`augment.text_ops.tokenize` of
the word-level augmenters of :mod:`augment.word_level`) live in :mod:`augment.text_ops`.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from uda.io import atomic_write_text
from augment.base import check_p
from augment.text_ops import (clean_web_text, is_protected_replacement, reference_protected_tokens, tokenize,
                              word_tokenize)

__all__ = [  # the text operations of augment.text_ops are re-exported under their old names here
    "word_tokenize",
    "clean_web_text",
    "tokenize",
    "TfIdfStats",
    "fit_tfidf_stats",
    "replacement_probs",
    "TfIdfWordReplacement",
    "UniformWordReplacement",
]

# --------------------------------------------------------------------------------------------
# Corpus statistics
# --------------------------------------------------------------------------------------------

# 2: words from the reference's tokenisation (word_tokenize); 1 had a regex tokenizer's words
STATS_FORMAT = "uda-tfidf-stats/2"


@dataclass
class TfIdfStats:
    """Corpus statistics for TF-IDF word replacement (keys are :func:`word_tokenize` tokens)."""

    idf: dict[str, float]
    corpus_tfidf: dict[str, float]
    num_docs: int
    _max_idf: float | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def max_idf(self) -> float:
        """The idf given to words never seen in the corpus (the largest idf)."""
        if self._max_idf is None:
            self._max_idf = max(self.idf.values()) if self.idf else 0.0
        return self._max_idf

    def save(self, path: str | os.PathLike) -> None:
        """Write the statistics as json (atomically: a temporary file renamed into place)."""
        path = os.fspath(path)
        payload = {
            "format": STATS_FORMAT,
            "num_docs": self.num_docs,
            "idf": self.idf,
            "corpus_tfidf": self.corpus_tfidf,
        }
        atomic_write_text(path, json.dumps(payload, ensure_ascii=False), fsync=False)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "TfIdfStats":
        with open(path, encoding="utf-8") as f:
            payload = json.load(f)
        fmt = payload.get("format") if isinstance(payload, dict) else None
        if fmt != STATS_FORMAT:
            # format 1 was fitted with a different tokenisation: its words would not match
            raise ValueError(f"{os.fspath(path)}: TF-IDF statistics of format {fmt!r}, expected {STATS_FORMAT!r}; "
                             "refit them with fit_tfidf_stats")
        try:
            return cls(
                idf={str(k): float(v) for k, v in payload["idf"].items()},
                corpus_tfidf={str(k): float(v) for k, v in payload["corpus_tfidf"].items()},
                num_docs=int(payload["num_docs"]),
            )
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{os.fspath(path)}: not a TF-IDF statistics file ({e!r})") from e


def fit_tfidf_stats(texts: Iterable[str]) -> TfIdfStats:
    """Compute idf and corpus TF-IDF over ``texts`` (one document each; empty documents count in N),
    on the words of :func:`word_tokenize`, as the reference's ``get_data_stats``. ``texts`` is read once,
    in order, so a generator over a pool on disk does (memory: the vocabulary's counts, not the texts)."""
    doc_freq: Counter[str] = Counter()
    tf_sum: dict[str, float] = {}  # sum over docs of count / len(doc)
    num_docs = 0
    get = tf_sum.get
    for text in texts:
        num_docs += 1
        counts = Counter(word_tokenize(text))
        if not counts:
            continue
        doc_freq.update(counts.keys())  # C-level counting of each distinct word once
        inv_len = 1.0 / sum(counts.values())
        for w, c in counts.items():
            tf_sum[w] = get(w, 0.0) + c * inv_len
    if num_docs == 0:
        raise ValueError("fit_tfidf_stats: no documents")
    log_n = math.log(num_docs)
    idf = {w: log_n - math.log(df) for w, df in doc_freq.items()}
    corpus_tfidf = {w: tf_sum[w] * idf[w] for w in idf}
    return TfIdfStats(idf=idf, corpus_tfidf=corpus_tfidf, num_docs=num_docs)


# --------------------------------------------------------------------------------------------
# Per-text replacement probabilities
# --------------------------------------------------------------------------------------------


def replacement_probs(
    tokens_lower: Sequence[str],
    idf: dict[str, float],
    p: float,
    unseen_idf: float | None = None,
    protected: Sequence[bool] | np.ndarray | None = None,
) -> np.ndarray:
    """Replacement probability of each token of one text, for TF-IDF word replacement.

    score(t) = count of t in the text / len(text) * idf[t] (``unseen_idf``, default the largest idf,
    for words not in ``idf``); prob(t) = (max score - score(t)) / sum over tokens of
    (max score - score) * p * len(text), clipped to 1. If all scores are equal the result is all 0.

    ``protected`` (a mask aligned with the tokens; see :func:`augment.text_ops.protected_mask`):
    protected tokens get probability 0 and the rule above is applied to the other tokens (their max
    score, their number and their sum, so that the probabilities average ``p`` over the tokens that
    may be replaced); the scores themselves stay those of the whole text. A mask with nothing
    protected gives exactly the result without one.
    """
    n = len(tokens_lower)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    if unseen_idf is None:
        unseen_idf = max(idf.values()) if idf else 0.0
    counts = Counter(tokens_lower)
    get = idf.get
    word_score = {w: c * get(w, unseen_idf) for w, c in counts.items()}  # times 1/n below
    scores = np.fromiter((word_score[t] for t in tokens_lower), dtype=np.float64, count=n) / n
    if protected is not None:
        keep = ~np.asarray(protected, dtype=bool)
        if len(keep) != n:
            raise ValueError(f"replacement_probs: {n} tokens but a mask of {len(keep)}")
        if not keep.all():
            if not keep.any():
                return np.zeros(n, dtype=np.float64)
            gaps = np.where(keep, scores[keep].max() - scores, 0.0)
            total = gaps.sum()
            if total <= 0.0:
                return np.zeros(n, dtype=np.float64)
            probs = gaps * (p * int(keep.sum()) / total)
            np.minimum(probs, 1.0, out=probs)
            return probs
    gaps = scores.max() - scores
    total = gaps.sum()
    if total <= 0.0:
        return np.zeros(n, dtype=np.float64)
    probs = gaps * (p * n / total)
    np.minimum(probs, 1.0, out=probs)
    return probs


def _join_all(texts: Sequence[str], per_text: list, words: Sequence[str]) -> list[str]:
    """Each text with its replaced tokens, handing each text its share of the batch's replacement
    ``words`` in order. ``per_text`` holds (tokens, indices to replace) per text. A text with nothing
    replaced is returned as it was; an edited one is its tokens joined by single spaces, as the
    reference (which passes the word list on to WordPiece) has it."""
    out = []
    k = 0
    for text, (tokens, idx) in zip(texts, per_text):
        m = len(idx)
        if m == 0:
            out.append(text)
            continue
        tokens = list(tokens)
        for i, w in zip(idx.tolist(), words[k : k + m]):
            tokens[i] = w
        out.append(" ".join(tokens))
        k += m
    return out


def _protected_vocab(vocab: Sequence[str], what: str) -> np.ndarray:
    """Mask of the vocabulary words that must not be inserted (:func:`is_protected_replacement`)."""
    mask = np.fromiter((is_protected_replacement(w) for w in vocab), dtype=bool, count=len(vocab))
    if mask.all():
        raise ValueError(f"{what}(protect=True): every vocabulary word is protected; nothing to replace with")
    return mask


def _protected_tokens(text: str, protect: bool) -> tuple[list[str], np.ndarray | None]:
    """``word_tokenize(text)`` and, with ``protect``, its protected-token mask (None without)."""
    if not protect:
        return word_tokenize(text), None
    tokens, mask = reference_protected_tokens(text)
    return tokens, np.asarray(mask, dtype=bool)


class TfIdfWordReplacement:
    """``tf_idf-p``: replace uninformative words of a text by uninformative corpus words.

    ``protect``: protected tokens (negations, wh-words, numbers, names; see :mod:`augment.text_ops`)
    are never replaced (the probabilities average ``p`` over the other tokens, see
    :func:`replacement_probs`) and protected vocabulary words are never inserted: a draw that lands
    on one is drawn again among the unprotected words (one extra random number, drawn only then),
    which gives exactly the replacement distribution restricted to the unprotected words. A text
    without protected tokens, whose draws land on no protected word, comes out exactly as without
    ``protect``. The name gets the suffix ``-protect``."""

    def __init__(self, stats: TfIdfStats, p: float, protect: bool = False):
        self.p = check_p(p, "replacement probability p")
        self.protect = bool(protect)
        self.name = f"tf_idf-{p}" + ("-protect" if self.protect else "")
        self.stats = stats
        self._idf = stats.idf
        self._unseen_idf = stats.max_idf
        vocab = list(stats.corpus_tfidf.keys())
        if not vocab:
            raise ValueError("TfIdfWordReplacement: empty vocabulary")
        values = np.fromiter(stats.corpus_tfidf.values(), dtype=np.float64, count=len(vocab))
        weights = values.max() - values
        if weights.sum() <= 0.0:  # all words equally informative: fall back to uniform
            weights = np.ones_like(weights)
        self.vocab: list[str] = vocab
        self.sampling_probs: np.ndarray = weights / weights.sum()
        self._cdf = np.cumsum(weights)
        self._cdf_total = float(self._cdf[-1])
        if self.protect:
            self._vocab_protected = _protected_vocab(vocab, "TfIdfWordReplacement")
            allowed = np.flatnonzero(~self._vocab_protected)
            w = weights[allowed]
            if w.sum() <= 0.0:  # only the most informative words are unprotected: uniform among them
                w = np.ones_like(w)
            self._allowed = allowed
            self._allowed_cdf = np.cumsum(w)

    def sample_words(self, n: int, rng: np.random.Generator) -> list[str]:
        """Draw ``n`` vocabulary words with probability ∝ (max corpus TF-IDF - corpus TF-IDF)."""
        if n <= 0:
            return []
        u = rng.random(n) * self._cdf_total
        idx = np.searchsorted(self._cdf, u, side="right")
        np.minimum(idx, len(self.vocab) - 1, out=idx)
        if self.protect:
            hits = np.flatnonzero(self._vocab_protected[idx])
            if len(hits):
                u = rng.random(len(hits)) * float(self._allowed_cdf[-1])
                j = np.searchsorted(self._allowed_cdf, u, side="right")
                np.minimum(j, len(self._allowed) - 1, out=j)
                idx[hits] = self._allowed[j]
        vocab = self.vocab
        return [vocab[i] for i in idx.tolist()]

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        per_text = []
        total = 0
        for text in texts:
            tokens, mask = _protected_tokens(text, self.protect)
            if not tokens:
                per_text.append((tokens, np.zeros(0, dtype=np.int64)))
                continue
            probs = replacement_probs(tokens, self._idf, self.p, self._unseen_idf, mask)
            idx = np.flatnonzero(rng.random(len(probs)) < probs)
            per_text.append((tokens, idx))
            total += len(idx)
        words = self.sample_words(total, rng)
        return _join_all(texts, per_text, words)


# UnifRep.replace_tokens in the reference only touches word lists of 3 or more tokens
MIN_UNIF_TOKENS = 3


class UniformWordReplacement:
    """``unif-p``: in a text of 3 or more tokens, each token is replaced with probability ``p`` by a
    uniformly drawn vocabulary word; shorter texts are returned unchanged.

    ``protect``: protected tokens are never replaced (the others keep probability ``p``) and a drawn
    protected vocabulary word is drawn again, uniformly among the unprotected ones (an extra random
    number drawn only then). Name suffix ``-protect``."""

    def __init__(self, vocab: TfIdfStats | Sequence[str], p: float, protect: bool = False):
        self.p = check_p(p, "replacement probability p")
        self.protect = bool(protect)
        self.name = f"unif-{p}" + ("-protect" if self.protect else "")
        words = list(vocab.idf.keys()) if isinstance(vocab, TfIdfStats) else list(vocab)
        if not words:
            raise ValueError("UniformWordReplacement: empty vocabulary")
        self.vocab: list[str] = words
        if self.protect:
            self._vocab_protected = _protected_vocab(words, "UniformWordReplacement")
            self._allowed = np.flatnonzero(~self._vocab_protected)

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        per_text = []
        total = 0
        for text in texts:
            tokens, mask = _protected_tokens(text, self.protect)
            if len(tokens) < MIN_UNIF_TOKENS:  # the reference's UnifRep leaves short texts alone
                per_text.append((tokens, np.zeros(0, dtype=np.int64)))
                continue
            idx = np.flatnonzero(rng.random(len(tokens)) < self.p)
            if mask is not None:
                idx = idx[~mask[idx]]
            per_text.append((tokens, idx))
            total += len(idx)
        vocab = self.vocab
        drawn = rng.integers(0, len(vocab), size=total)
        if self.protect:
            hits = np.flatnonzero(self._vocab_protected[drawn])
            if len(hits):
                drawn[hits] = self._allowed[rng.integers(0, len(self._allowed), size=len(hits))]
        words = [vocab[i] for i in drawn.tolist()]
        return _join_all(texts, per_text, words)
