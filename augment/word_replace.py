"""Word-level augmenters: TF-IDF word replacement (``tf_idf-p``) and uniform replacement (``unif-p``).

The TF-IDF method follows the description of ``TfIdfWordRep`` in google-research/uda
(``text/augmentation/word_level_augment.py``):

* corpus statistics: ``idf[w] = log(N_docs / doc_freq[w])`` and
  ``corpus_tfidf[w] = sum over docs of (count of w in doc / len(doc)) * idf[w]``;
* for one text, each token's score is its TF-IDF in that text (``count / len * idf``, unseen words
  get the largest idf); its replacement probability is ``(max score - score)`` normalised so the
  probabilities average ``p`` over the text (values above 1 mean "always");
* replacement words are drawn from the corpus vocabulary with probability proportional to
  ``max corpus_tfidf - corpus_tfidf[w]``, so uninformative words are the preferred replacements.

Statistics are computed on lower-cased tokens; output keeps the original text around the tokens
that were not replaced (including whitespace and IMDB ``<br />`` tags), and a replaced token is
substituted by the (lower-case) vocabulary word.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

__all__ = [
    "tokenize",
    "TfIdfStats",
    "fit_tfidf_stats",
    "replacement_probs",
    "TfIdfWordReplacement",
    "UniformWordReplacement",
]

# A word (letters/digits/underscore, with inner apostrophes such as "don't") or one punctuation mark.
_TOKEN_RE = re.compile(r"\w+(?:'\w+)*|[^\w\s]")
# IMDB line breaks: "<br />", "<br/>", "<br>" (any case).
_BR_RE = re.compile(r"<\s*br\s*/?\s*>", re.IGNORECASE)


def _blank_br(text: str) -> str:
    """Replace ``<br />`` tags by spaces of the same length (so character offsets are kept)."""
    if "<" not in text:
        return text
    return _BR_RE.sub(lambda m: " " * (m.end() - m.start()), text)


def tokenize(text: str) -> list[str]:
    """Split ``text`` into word and punctuation tokens, keeping their surface forms.

    ``<br />`` tags count as whitespace. Statistics use ``[t.lower() for t in tokenize(text)]``.
    """
    return _TOKEN_RE.findall(_blank_br(text))


def _token_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets in ``text`` of the tokens that :func:`tokenize` returns."""
    return [m.span() for m in _TOKEN_RE.finditer(_blank_br(text))]


# --------------------------------------------------------------------------------------------
# Corpus statistics
# --------------------------------------------------------------------------------------------


@dataclass
class TfIdfStats:
    """Corpus statistics for TF-IDF word replacement (keys are lower-cased tokens)."""

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
            "format": "uda-tfidf-stats/1",
            "num_docs": self.num_docs,
            "idf": self.idf,
            "corpus_tfidf": self.corpus_tfidf,
        }
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tfidf-", suffix=".json.tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(payload, f, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @classmethod
    def load(cls, path: str | os.PathLike) -> "TfIdfStats":
        with open(path, encoding="utf-8") as f:
            payload = json.load(f)
        try:
            return cls(
                idf={str(k): float(v) for k, v in payload["idf"].items()},
                corpus_tfidf={str(k): float(v) for k, v in payload["corpus_tfidf"].items()},
                num_docs=int(payload["num_docs"]),
            )
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{os.fspath(path)}: not a TF-IDF statistics file ({e!r})") from e


def fit_tfidf_stats(texts: Iterable[str]) -> TfIdfStats:
    """Compute idf and corpus TF-IDF over ``texts`` (one document each; empty documents count in N)."""
    doc_freq: Counter[str] = Counter()
    tf_sum: dict[str, float] = {}  # sum over docs of count / len(doc)
    num_docs = 0
    findall = _TOKEN_RE.findall
    get = tf_sum.get
    for text in texts:
        num_docs += 1
        counts = Counter(findall(_blank_br(text).lower()))
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
) -> np.ndarray:
    """Replacement probability of each token of one text, for TF-IDF word replacement.

    score(t) = count of t in the text / len(text) * idf[t] (``unseen_idf``, default the largest idf,
    for words not in ``idf``); prob(t) = (max score - score(t)) / sum over tokens of
    (max score - score) * p * len(text), clipped to 1. If all scores are equal the result is all 0.
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
    gaps = scores.max() - scores
    total = gaps.sum()
    if total <= 0.0:
        return np.zeros(n, dtype=np.float64)
    probs = gaps * (p * n / total)
    np.minimum(probs, 1.0, out=probs)
    return probs


def _rebuild(text: str, spans: list[tuple[int, int]], replace_idx: np.ndarray, words: Sequence[str]) -> str:
    """``text`` with the tokens at ``replace_idx`` (increasing) replaced by ``words``.

    Text between tokens is kept as is. A replaced token that touched a neighbour (the "." of "pig.")
    is set off by a single space so the replacement word does not merge with the neighbour.
    """
    if len(replace_idx) == 0:
        return text
    parts: list[str] = []
    last = ""  # last character written so far
    pos = 0
    n = len(text)
    for i, w in zip(replace_idx.tolist(), words):
        start, end = spans[i]
        gap = text[pos:start]
        if gap:
            parts.append(gap)
            last = gap[-1]
        if last and not last.isspace():
            parts.append(" ")
        parts.append(w)
        last = w[-1:] or last
        if end < n and not text[end].isspace():
            parts.append(" ")
            last = " "
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _rebuild_all(texts: Sequence[str], per_text: list, words: Sequence[str]) -> list[str]:
    """Rebuild every text, handing each its share of the batch's replacement ``words`` in order."""
    out = []
    k = 0
    for text, (spans, idx) in zip(texts, per_text):
        m = len(idx)
        out.append(_rebuild(text, spans, idx, words[k : k + m]))
        k += m
    return out


def _check_p(p: float) -> float:
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"replacement probability p must be in [0, 1], got {p}")
    return p


class TfIdfWordReplacement:
    """``tf_idf-p``: replace uninformative words of a text by uninformative corpus words."""

    def __init__(self, stats: TfIdfStats, p: float):
        self.p = _check_p(p)
        self.name = f"tf_idf-{p}"
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

    def sample_words(self, n: int, rng: np.random.Generator) -> list[str]:
        """Draw ``n`` vocabulary words with probability ∝ (max corpus TF-IDF - corpus TF-IDF)."""
        if n <= 0:
            return []
        u = rng.random(n) * self._cdf_total
        idx = np.searchsorted(self._cdf, u, side="right")
        np.minimum(idx, len(self.vocab) - 1, out=idx)
        vocab = self.vocab
        return [vocab[i] for i in idx.tolist()]

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        per_text = []
        total = 0
        for text in texts:
            spans = _token_spans(text)
            if not spans:
                per_text.append((spans, np.zeros(0, dtype=np.int64)))
                continue
            lower = [text[s:e].lower() for s, e in spans]
            probs = replacement_probs(lower, self._idf, self.p, self._unseen_idf)
            idx = np.flatnonzero(rng.random(len(probs)) < probs)
            per_text.append((spans, idx))
            total += len(idx)
        words = self.sample_words(total, rng)
        return _rebuild_all(texts, per_text, words)


class UniformWordReplacement:
    """``unif-p``: each token is replaced with probability ``p`` by a uniformly drawn vocabulary word."""

    def __init__(self, vocab: TfIdfStats | Sequence[str], p: float):
        self.p = _check_p(p)
        self.name = f"unif-{p}"
        words = list(vocab.idf.keys()) if isinstance(vocab, TfIdfStats) else list(vocab)
        if not words:
            raise ValueError("UniformWordReplacement: empty vocabulary")
        self.vocab: list[str] = words

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        per_text = []
        total = 0
        for text in texts:
            spans = _token_spans(text)
            idx = np.flatnonzero(rng.random(len(spans)) < self.p)
            per_text.append((spans, idx))
            total += len(idx)
        vocab = self.vocab
        words = [vocab[i] for i in rng.integers(0, len(vocab), size=total).tolist()]
        return _rebuild_all(texts, per_text, words)
