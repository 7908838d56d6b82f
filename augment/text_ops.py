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
import unicodedata
from typing import Sequence

__all__ = ["clean_web_text", "basic_tokenize", "word_tokenize", "tokenize", "is_protected", "is_protected_replacement",
           "protected_mask", "surface_protected_mask", "reference_protected_tokens"]

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


# --------------------------------------------------------------------------------------------
# Protected words (option ``protect`` of the word-level augmenters)
# --------------------------------------------------------------------------------------------
#
# For question answering (SQuAD 2.0) the consistency loss compares the model on a question and on
# its augmented copy, so the copy must ask the same thing. Editing a negation ("not" -> "also"), the
# wh-word ("when" -> "where"), a number ("1880" -> "1890") or a name ("Graz" -> "Paris") can turn an
# answerable question into an unanswerable one (or into another question). With ``protect=True``
# every word-level augmenter leaves the words these rules mark alone (never replaced, deleted or
# moved) and never inserts one as a replacement. The rules, all in this one place:
#
# * negations: NEGATIONS, NEGATIVE_CONTRACTIONS, and any word ending in "n't" (ain't, mustn't, ...);
# * wh-words: WH_WORDS (also with a clitic: "what's", "who'd");
# * numbers: any word holding a digit ("1880", "3rd", "2010s"), NUMBER_WORDS, and the punctuation
#   of a number (NUMBER_SEPARATORS between two numbers it touches: the "," of "1,880", the "." of
#   "3.5", the "-" of "1880-1890"; NUMBER_SIGNS touching one: "$5", "20%");
# * names: a word whose first letter is upper-case and that does not start a sentence, every ALL-CAPS
#   word of 2+ letters (wherever it stands), the letters and dots of an upper-case initialism written
#   without spaces ("U.S.", "U.K."), and a sentence-initial word that the same text also capitalises
#   mid-sentence. A capitalised first word of a sentence is otherwise not protected (it cannot be told
#   from an ordinary word), unless another rule (wh-word, negation, number) protects it. "I" is a
#   capitalised word like any other (the pronoun, and the numeral of "World War I");
# * compounds: a punctuation mark touching a protected word on each side ("Kent-Brown", "AT&T").
#
# Words are judged as the surface words of :func:`tokenize` ("McDonald's", "don't" are one word; a
# curly-apostrophe "don’t" and the reference tokens "don", "'", "t" are joined back into one), in the
# original capitalisation, and a protected word protects all its tokens. Sentences: a text starts
# one; so does the word after ".", "!", "?" or "…" followed by whitespace (closing quotes and
# brackets in between allowed), except a "." right after a single letter or one of ABBREVIATIONS
# ("Dr. Tesla", "J. K. Rowling"); a line break starts one too. When unsure the rules protect (a word
# wrongly judged mid-sentence is kept, which only costs some augmentation).
#
# Replacement words (vocabulary words, synonyms, embedding neighbours) are judged by
# :func:`is_protected_replacement`: the same lists, digits and capitals (a replacement is judged as a
# mid-sentence word), plus CONTRACTION_HEADS, the reference tokens "didn", "isn", ... that stand for a
# negative contraction. Vocabularies are lower-case (TF-IDF statistics, GloVe), so a name in one
# cannot be recognised as such: "paris" may still be inserted; numbers, negations and wh-words never.
#
# TF-IDF and uniform replacement work on the reference's lower-cased, accent-stripped tokens
# (:func:`word_tokenize`); capitalisation is judged on the original text: :func:`_cased_reference_tokens`
# splits the cleaned text exactly as :func:`basic_tokenize` does but without lower-casing (ASCII: the
# same regular expression with upper-case letters added, which gives the same tokens since no
# upper-case letter is punctuation; pieces with non-ASCII characters: transformers' BasicTokenizer
# with lower-casing and accent stripping off, checked token by token against the reference tokens),
# which gives one cased token per reference token, and the text between tokens.

NEGATIONS = frozenset("not no never none nothing nobody nowhere neither nor cannot without n't".split())
NEGATIVE_CONTRACTIONS = frozenset(
    """don't isn't wasn't can't won't didn't doesn't aren't weren't hasn't haven't hadn't shouldn't
    wouldn't couldn't ain't mustn't needn't shan't mightn't""".split()
)  # (any word ending in "n't" is protected as well)
WH_WORDS = frozenset("what which who whom whose when where why how whether".split())
NUMBER_WORDS = frozenset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
    thousand million billion trillion first second third fourth fifth sixth seventh eighth ninth
    tenth""".split()
)
# The reference tokenisation splits "didn't" into "didn", "'", "t"; as a replacement word, such a head
# would bring a negation in ("can" and "won" are ordinary words and stay allowed).
CONTRACTION_HEADS = frozenset(
    "don doesn didn isn aren wasn weren hasn haven hadn shouldn wouldn couldn ain mustn needn shan mightn".split()
)
# A "." after one of these (or after a single letter) does not end a sentence.
ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof st jr sr mt ft gen col lt sgt capt gov sen rep rev hon vs etc inc ltd co corp
    dept est approx fig vol jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)
SENTENCE_END = frozenset(".!?\u2026")
_CLOSERS = frozenset("\"')]}\u201d\u2019\u00bb")
_APOSTROPHES = frozenset("'\u2019\u02bc")
# Punctuation that is part of a number: separators between two numbers ("1,880", "3.5", "10:30", "1/2",
# "1880-1890") and signs next to one ("$5", "20%", "+3").
NUMBER_SEPARATORS = frozenset(".,:/-\u2013\u2212")
NUMBER_SIGNS = frozenset("%$\u00a3\u20ac\u00a5+\u2212")


def _normalise_word(word: str) -> str:
    return word.replace("\u2019", "'").replace("\u02bc", "'").lower()


def is_protected(word: str, sentence_initial: bool = False) -> bool:
    """Whether ``word`` (one surface word in its original case, e.g. "Tesla", "don't", "1880") is
    protected; ``sentence_initial``: it is the first word of a sentence, where a capital letter alone
    does not make a name. See the rules above."""
    if not word:
        return False
    low = _normalise_word(word)
    head = low.split("'", 1)[0]
    if low in NEGATIONS or low in NEGATIVE_CONTRACTIONS or low.endswith("n't") or head in NEGATIONS:
        return True
    if low in WH_WORDS or head in WH_WORDS:
        return True
    if low in NUMBER_WORDS or head in NUMBER_WORDS or any(ch.isdigit() for ch in word):
        return True
    cased = [ch for ch in word if ch.isupper() or ch.islower()]
    if len(cased) >= 2 and all(ch.isupper() for ch in cased):  # ALL-CAPS
        return True
    if not sentence_initial:
        first = next((ch for ch in word if ch.isalpha()), "")
        return first.isupper()
    return False


@functools.lru_cache(maxsize=1 << 16)
def is_protected_replacement(word: str) -> bool:
    """Whether ``word`` (a vocabulary word, synonym or neighbour; several words separated by spaces
    allowed) must not be inserted as a replacement: one of its words is protected as a mid-sentence
    word would be, or is one of CONTRACTION_HEADS."""
    return any(is_protected(w) or _normalise_word(w) in CONTRACTION_HEADS for w in word.split())


def _is_word(token: str) -> bool:
    # a word, not a punctuation mark: the reference's tokens may start with a symbol ("°c")
    return any(ch.isalnum() for ch in token)


def _word_groups(tokens: Sequence[str], gaps: Sequence[str]) -> list[tuple[int, int]]:
    """The words as token ranges ``(start, end)``: a word token and the "'"+word pieces touching it
    ("don", "'", "t" -> "don't")."""
    n = len(tokens)
    groups: list[tuple[int, int]] = []
    i = 0
    while i < n:
        if _is_word(tokens[i]):
            j = i + 1
            while (j + 1 < n and tokens[j] in _APOSTROPHES and gaps[j] == "" and gaps[j + 1] == ""
                   and _is_word(tokens[j + 1])):
                j += 2
            groups.append((i, j))
            i = j
        else:
            i += 1
    return groups


def _sentence_initial(tokens: Sequence[str], gaps: Sequence[str], groups: list[tuple[int, int]],
                      words: list[str]) -> list[bool]:
    """For each word of ``groups``, whether it starts a sentence (or a line)."""
    n = len(tokens)
    group_ending_at = {e - 1: g for g, (s, e) in enumerate(groups)}

    def ends_sentence(k: int) -> bool:
        j = k + 1
        while j < n and gaps[j] == "" and (tokens[j] in _CLOSERS or tokens[j] in SENTENCE_END):
            j += 1
        if j < n and gaps[j] == "":  # "3.5", "U.S", "Yahoo!Inc": no sentence end
            return False
        if tokens[k] == "." and gaps[k] == "" and k - 1 in group_ending_at:
            before = _normalise_word(words[group_ending_at[k - 1]])
            if len(before) == 1 or before in ABBREVIATIONS:
                return False
        return True

    initial = [False] * len(groups)
    at_start = True
    g = 0
    for k in range(n):
        if k > 0 and "\n" in gaps[k]:
            at_start = True
        if g < len(groups) and groups[g][0] == k:
            initial[g] = at_start
            at_start = False
            g += 1
        elif tokens[k] in SENTENCE_END and ends_sentence(k):
            at_start = True
    return initial


def _initialisms(tokens: Sequence[str], gaps: Sequence[str], groups: list[tuple[int, int]]) -> set[int]:
    """The tokens of upper-case initialisms written without spaces: U.S., U.K., J.R.R."""
    n = len(tokens)
    in_initialism: set[int] = set()
    for g, (s, e) in enumerate(groups):
        if e - s == 1 and len(tokens[s]) == 1 and tokens[s].isupper():
            nxt = g + 1
            if (s + 2 < n and tokens[s + 1] == "." and gaps[s + 1] == "" and gaps[s + 2] == ""
                    and nxt < len(groups) and groups[nxt] == (s + 2, s + 3) and len(tokens[s + 2]) == 1
                    and tokens[s + 2].isupper()):
                in_initialism.update((s, s + 1, s + 2))
                if s + 3 < n and tokens[s + 3] == "." and gaps[s + 3] == "":
                    in_initialism.add(s + 3)
    return in_initialism


def _protect_punctuation(tokens: Sequence[str], gaps: Sequence[str], mask: list[bool]) -> None:
    """Protect, in ``mask``, the punctuation of a number ("1,880", "3.5", "1880-1890", "$5", "20%"), then
    a punctuation mark joining two protected words ("Kent-Brown", "AT&T")."""
    n = len(tokens)

    def number_before(k: int) -> bool:
        return k > 0 and gaps[k] == "" and any(c.isdigit() for c in tokens[k - 1])

    def number_after(k: int) -> bool:
        return k + 1 < n and gaps[k + 1] == "" and any(c.isdigit() for c in tokens[k + 1])

    for k in range(n):
        if not mask[k] and ((tokens[k] in NUMBER_SEPARATORS and number_before(k) and number_after(k))
                            or (tokens[k] in NUMBER_SIGNS and (number_before(k) or number_after(k)))):
            mask[k] = True
    for k in range(1, n - 1):
        if (not mask[k] and not _is_word(tokens[k]) and gaps[k] == "" and gaps[k + 1] == "" and mask[k - 1]
                and mask[k + 1] and _is_word(tokens[k - 1]) and _is_word(tokens[k + 1])):
            mask[k] = True


def protected_mask(tokens: Sequence[str], gaps: Sequence[str] | None = None) -> list[bool]:
    """Which of ``tokens`` (words and punctuation marks in their original case, in text order) are
    protected. ``gaps[i]`` is the text between token ``i - 1`` and token ``i`` ("" when they touch,
    ``gaps[0]`` what precedes the first token); None: the tokens are separated by single spaces."""
    n = len(tokens)
    if n == 0 and not gaps:
        return []
    if gaps is None:
        gaps = [""] + [" "] * (n - 1)
    if len(gaps) != n:
        raise ValueError(f"protected_mask: {n} tokens but {len(gaps)} gaps")
    groups = _word_groups(tokens, gaps)
    words = ["".join(tokens[s:e]) for s, e in groups]
    initial = _sentence_initial(tokens, gaps, groups, words)
    in_initialism = _initialisms(tokens, gaps, groups)
    # a capitalised word seen mid-sentence is a name at a sentence start as well
    names = {words[g].lower() for g in range(len(groups)) if not initial[g] and is_protected(words[g])}
    mask = [False] * n
    for g, (s, e) in enumerate(groups):
        word = words[g]
        if s in in_initialism or is_protected(word, initial[g] and word.lower() not in names):
            for k in range(s, e):
                mask[k] = True
    for k in in_initialism:
        mask[k] = True
    _protect_punctuation(tokens, gaps, mask)
    return mask


def surface_protected_mask(text: str, spans: Sequence[tuple[int, int]] | None = None) -> list[bool]:
    """:func:`protected_mask` of the tokens of :func:`tokenize` (at ``spans``, from :func:`_token_spans`)."""
    blank = _blank_br(text)
    if spans is None:
        spans = _token_spans(text)
    tokens = [text[s:e] for s, e in spans]
    gaps = []
    prev = 0
    for s, e in spans:
        gaps.append(blank[prev:s])
        prev = e
    return protected_mask(tokens, gaps)


_ASCII_TOKEN_CASED = re.compile(r"[0-9A-Za-z]+|[!-/:-@\[-`{-~]")


@functools.lru_cache(maxsize=1)
def _bert_cased_basic_tokenizer():
    """transformers' BasicTokenizer as :func:`_bert_basic_tokenizer`, without lower-casing or accent stripping."""
    try:
        from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer
    except ImportError:
        from transformers.models.bert.tokenization_bert import BasicTokenizer
    return BasicTokenizer(do_lower_case=False, tokenize_chinese_chars=False, strip_accents=None)


def _fold(token: str) -> str:
    """The reference's lower-casing and accent stripping of one token."""
    return "".join(ch for ch in unicodedata.normalize("NFD", token.lower()) if unicodedata.category(ch) != "Mn")


@functools.lru_cache(maxsize=1 << 16)
def _cased_piece_tokens(piece: str) -> tuple[str, ...]:
    """The reference tokens of a non-ASCII piece in their original case. When the cased split does
    not pair up with the reference's, token for token (characters whose decomposition is
    punctuation, upper-case letters whose lower case has combining marks: exotic), the reference
    tokens are used, title-cased when the piece holds an upper-case letter (so that they are
    protected like names: the careful side)."""
    ref = _piece_tokens(piece)
    # a token of combining marks only (one after a punctuation mark) vanishes in the reference
    cased = tuple(t for t in _bert_cased_basic_tokenizer().tokenize(piece) if _fold(t))
    if len(cased) == len(ref) and all(_fold(c) == r for c, r in zip(cased, ref)):
        return cased
    if any(ch.isupper() for ch in piece):
        return tuple(t[:1].upper() + t[1:] for t in ref)
    return ref


def _cased_reference_tokens(cleaned: str) -> tuple[list[str], list[str]]:
    """One cased token per token of ``basic_tokenize(cleaned)``, and the text between tokens."""
    tokens: list[str] = []
    gaps: list[str] = []
    pending = ""

    def ascii_part(part: str) -> None:
        nonlocal pending
        part = part.translate(_ASCII_DELETE)
        pos = 0
        for m in _ASCII_TOKEN_CASED.finditer(part):
            gaps.append(pending + part[pos:m.start()])
            pending = ""
            tokens.append(m.group())
            pos = m.end()
        pending += part[pos:]

    if cleaned.isascii():
        ascii_part(cleaned)
        return tokens, gaps
    pos = 0
    for m in _NON_ASCII_PIECE.finditer(cleaned):
        ascii_part(cleaned[pos:m.start()])
        piece = _cased_piece_tokens(m.group())
        for k, tok in enumerate(piece):
            gaps.append(pending if k == 0 else "")
            pending = ""
            tokens.append(tok)
        if not piece:
            pending += m.group()
        pos = m.end()
    ascii_part(cleaned[pos:])
    return tokens, gaps


def reference_protected_tokens(text: str) -> tuple[list[str], list[bool]]:
    """``word_tokenize(text)`` and, aligned with it, which tokens are protected (judged on the cased
    tokens of :func:`_cased_reference_tokens`)."""
    cleaned = clean_web_text(text)
    tokens = basic_tokenize(cleaned)
    cased, gaps = _cased_reference_tokens(cleaned)
    if len(cased) != len(tokens):  # cannot happen (same splitting); the careful side if it ever did
        return tokens, [True] * len(tokens)
    return tokens, protected_mask(cased, gaps)
