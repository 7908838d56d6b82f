"""The reference's word tokenisation for word-level replacement (google-research/uda).

In the reference a text is cleaned once when it is read (``clean_web_text`` in
``text/utils/raw_data_utils.py``) and split into words by BERT's ``BasicTokenizer``
(``tokenize_to_word`` in ``text/utils/tokenization.py``, called from ``text/preprocess.py``); the
TF-IDF statistics, TF-IDF replacement and uniform replacement all work on those word lists, and the
augmented word list goes to WordPiece as it is. :func:`word_tokenize` returns that word list.

BERT's basic tokenisation, as the reference has it: drop NUL, U+FFFD and control characters (Unicode
category C* other than tab/newline/carriage return), turn whitespace (space, tab, newline, CR, Zs)
into spaces, split on whitespace, lower-case, strip accents (NFD, drop category Mn), and split off
every punctuation character (ASCII 33-47, 58-64, 91-96, 123-126 and Unicode categories P*) as a
token of its own. The reference's tokenizer has no CJK splitting, so ``tokenize_chinese_chars`` is
off; transformers' version also NFC-normalises first, which changes no result once accents are
stripped (checked for every code point alone, after "a" and before combining marks).

The shared text is put in this module so that a task can clean the model's input the same way.

The word-level augmenters of :mod:`augment.word_level` (synonyms, swap, deletion, embedding
neighbours) use a different, surface-keeping tokenisation, also here: :func:`tokenize` and
:func:`_token_spans` find words and punctuation marks in place, and :func:`_substitute` /
:func:`_delete_spans` edit them while keeping the text around them (whitespace, ``<br />`` tags).
"""

from __future__ import annotations

import functools
import re
from typing import Sequence

__all__ = ["clean_web_text", "basic_tokenize", "word_tokenize", "tokenize"]

_HREF = "<a href="


def clean_web_text(text: str) -> str:
    """The reference's web-text cleaning (``clean_web_text``), applied to every text it reads.

    ``<br />`` and ``<p>`` become spaces, ``&quot;`` becomes ``"``; when the text has a link, every
    ``<a href=...>`` opening tag is removed and so is every ``</a>``; the two characters ``\\n``
    (a backslash and an n, as the data files escape newlines) and any remaining backslash become
    spaces. Only these exact spellings are handled (``<br/>``, ``<BR>`` are left as they are).
    """
    text = text.replace("<br />", " ").replace("&quot;", '"').replace("<p>", " ")
    if _HREF in text:
        while True:
            start = text.find(_HREF)
            if start < 0:
                break
            end = text.find(">", start)
            if end < 0:
                # An unterminated tag. The reference means to drop the marker here, but its code
                # indexes one character where it meant a slice (``st[start + len(...)]``), which
                # throws away the rest of the text; we drop the marker and keep the rest.
                text = text[:start] + text[start + len(_HREF):]
            else:
                text = text[:start] + text[end + 1:]
        text = text.replace("</a>", "")
    return text.replace("\\n", " ").replace("\\", " ")


@functools.lru_cache(maxsize=1)
def _bert_basic_tokenizer():
    """transformers' BasicTokenizer, configured as the reference's (imported on first use: ~2 s)."""
    try:  # transformers >= 5 keeps the pure-Python BERT tokenizer in a "legacy" module
        from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer
    except ImportError:  # transformers 4.x
        from transformers.models.bert.tokenization_bert import BasicTokenizer
    return BasicTokenizer(do_lower_case=True, tokenize_chinese_chars=False, strip_accents=None)


# Why a hand-written path at all: transformers' BasicTokenizer loops over characters in Python and
# runs at ~400 IMDB reviews/s on this CPU, which makes fitting the statistics on the 75k IMDB texts
# take minutes and the online augmentation of every unlabelled batch a visible cost. For ASCII text
# the tokenizer's steps reduce to: delete the control characters other than tab/newline/CR, lower-case
# (ASCII has no accents), and take maximal runs of [0-9a-z] or single punctuation characters (every
# printable ASCII character other than letters, digits and space is punctuation in BERT's definition);
# whitespace only separates. In other text, each whitespace-delimited piece holding a non-ASCII
# character goes through transformers' tokenizer (ASCII whitespace is BERT whitespace, so no token
# crosses it, and the tokenizer's steps act within a piece) and the ASCII stretches between such
# pieces take the fast path. tests/test_augment.py checks that the result equals transformers'
# tokenizer on random strings of awkward characters and on IMDB reviews.
_ASCII_DELETE = {c: None for c in range(128) if (c < 32 and c not in (9, 10, 13)) or c == 127}
_ASCII_TOKEN = re.compile(r"[0-9a-z]+|[!-/:-@\[-`{-~]")
# a maximal run of non-(ASCII whitespace) holding a non-ASCII character; the look-behind makes a match
# start only where a piece starts, which keeps the search linear
_NON_ASCII_PIECE = re.compile(r"(?<![^ \t\n\r])[^ \t\n\r]*[^\x00-\x7f][^ \t\n\r]*")


def _ascii_tokens(text: str) -> list[str]:
    return _ASCII_TOKEN.findall(text.translate(_ASCII_DELETE).lower())


@functools.lru_cache(maxsize=1 << 16)
def _piece_tokens(piece: str) -> tuple[str, ...]:
    # the same pieces (curly-quoted words, accented names) recur across a corpus
    return tuple(_bert_basic_tokenizer().tokenize(piece))


def basic_tokenize(text: str) -> list[str]:
    """BERT's basic tokenisation with lower-casing, as the reference's ``BasicTokenizer.tokenize``."""
    if text.isascii():
        return _ascii_tokens(text)
    out: list[str] = []
    pos = 0
    for m in _NON_ASCII_PIECE.finditer(text):
        out += _ascii_tokens(text[pos:m.start()])
        out += _piece_tokens(m.group())
        pos = m.end()
    out += _ascii_tokens(text[pos:])
    return out


def word_tokenize(text: str) -> list[str]:
    """The reference's word list of a raw text: :func:`clean_web_text`, then :func:`basic_tokenize`."""
    return basic_tokenize(clean_web_text(text))


# --------------------------------------------------------------------------------------------
# Surface-keeping tokenisation and in-place edits (augment.word_level)
# --------------------------------------------------------------------------------------------

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
    """Split ``text`` into word and punctuation tokens, keeping their surface forms (case, accents,
    "don't" as one word); ``<br />`` tags count as whitespace. For :mod:`augment.word_level`; the
    TF-IDF and uniform replacements use the reference's :func:`word_tokenize` instead."""
    return _TOKEN_RE.findall(_blank_br(text))


def _token_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets in ``text`` of the tokens that :func:`tokenize` returns."""
    return [m.span() for m in _TOKEN_RE.finditer(_blank_br(text))]


def _word_indices(text: str, spans: Sequence[tuple[int, int]]) -> list[int]:
    """Indices of the tokens that are words (start with a letter or digit), not punctuation."""
    return [i for i, (s, _) in enumerate(spans) if text[s].isalnum()]


def _match_case(source: str, word: str) -> str:
    """``word`` with the capitalisation pattern of ``source`` (UPPER, Title or as is)."""
    if len(source) > 1 and source.isupper():
        return word.upper()
    if source[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def _substitute(text: str, spans: Sequence[tuple[int, int]], replacements: dict[int, str]) -> str:
    """``text`` with token ``i`` (at ``spans[i]``) replaced by ``replacements[i]``; the rest kept as is."""
    if not replacements:
        return text
    parts: list[str] = []
    pos = 0
    for i in sorted(replacements):
        start, end = spans[i]
        parts.append(text[pos:start])
        parts.append(replacements[i])
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _delete_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` without the tokens at ``spans`` (increasing) and one side of their surrounding spaces."""
    out = text
    for start, end in reversed(spans):  # right to left: earlier offsets stay valid
        s = start
        while s > 0 and out[s - 1] in " \t":
            s -= 1
        e = end
        if s == 0 or out[s - 1] == "\n" or out[s - 1] == ">":  # at a line start: eat following spaces
            s = start
            while e < len(out) and out[e] in " \t":
                e += 1
        out = out[:s] + out[e:]
    return out
