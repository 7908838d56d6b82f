"""Synthetic SQuAD 2.0-style examples from unlabelled text, for a span-selection start.

Plain encoders (all-MiniLM-L6-v2 was trained to embed sentences) never learned to point at spans, so
a reader fine-tuned from them on a few hundred questions stays at what answering nothing scores.
Few-shot QA gets its start from unlabelled text made question-shaped:

- **recurring spans** (Splinter, Ram et al. 2021): a word n-gram that occurs in two sentences of a
  paragraph; the sentence holding one occurrence becomes the question, that occurrence replaced by the
  ``[QUESTION]`` token, and the paragraph without that sentence the context, where the other
  occurrence is the answer. The span is found only by reading the context, not by copying the question.
- **cloze questions** (Lewis et al. 2019): a sentence with a name, a number or a recurring phrase replaced
  by ``[QUESTION]``; the paragraph, sentence included, is the context and the phrase the answer.
- **unanswerable questions**, in about SQuAD 2.0's proportion so that the answerability head starts
  trained too: ``removed``, the question of either kind with every sentence that held its answer cut
  out of the context; ``swapped``, a cloze question with another name or number of the same shape
  swapped in for one it mentions (a hard in-paragraph negative: the context still matches the question
  almost word for word, but no longer says what it asks).

Everything here is pure Python on strings: no tokenizer, so the character offsets are exact by
construction and checked (``answer_start`` points at the answer text in the context). Words,
sentences, names and numbers are found with regular expressions: no tagger is needed offline, and
Wikipedia- or review-style English is all the start needs. An example is a dict in the SQuAD task's
layout (``id``, ``title``, ``context``, ``question``, ``answers``, ``is_impossible``) plus ``kind``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import numpy as np

from tasks.common.windows import QUESTION_TOKEN  # the token real questions end in too (fine-tuning's marker)

KINDS = ("recurring", "cloze", "removed", "swapped")

# Small English stopword list (no corpus download needed): a span made only of these is not a span.
STOPWORDS = frozenset("""a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
nor not now of off on once only or other our ours ourselves out over own same she should so some such than that
the their theirs them themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves one two its also
however although though since thus many much may might must shall upon within without""".split())
# lower-case words allowed inside a name ("Duke of Normandy", "Charles de Gaulle")
NAME_JOINERS = frozenset({"of", "de", "du", "da", "von", "van", "der", "la", "le", "y"})
SCALES = frozenset({"million", "billion", "trillion", "thousand", "hundred", "percent", "%"})
MONTHS = frozenset("january february march april may june july august september october november december".split())

_WORD = re.compile(r"\w+(?:[-'’.,]\w+)*", re.UNICODE)  # 1,000 and 3.5 and Lu's and co-operate are one word
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"”')\]]*\s+(?=[\"“'(\[]?[A-Z0-9])")


@dataclass(frozen=True)
class Span:
    start: int  # character offsets in the paragraph, end exclusive
    end: int


def words(text: str) -> list[Span]:
    return [Span(m.start(), m.end()) for m in _WORD.finditer(text)]


def sentences(text: str) -> list[Span]:
    """Sentence spans (stripped), split after . ! ? followed by space and an upper-case letter or digit."""
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        out.append((start, m.start()))
        start = m.end()
    out.append((start, len(text)))
    spans = []
    for s, e in out:
        seg = text[s:e]
        lead = len(seg) - len(seg.lstrip())
        if seg.strip():
            spans.append(Span(s + lead, s + lead + len(seg.strip())))
    return spans


def _sentence_of(sents: Sequence[Span], pos: int) -> int:
    for i, s in enumerate(sents):
        if s.start <= pos < s.end:
            return i
    return -1


def recurring_spans(text: str, max_words: int = 10) -> dict[str, list[Span]]:
    """Word n-grams (1 to ``max_words`` words, case-insensitive) that occur at least twice without
    overlapping, whose words are separated by spaces only (no punctuation inside), not all stopwords
    and not a bare number below 10; only maximal ones are kept (an n-gram every occurrence of which
    lies inside occurrences of a longer recurring n-gram is dropped). Returns {lower-cased n-gram:
    occurrences in text order}."""
    ws = words(text)
    low = [text[w.start:w.end].lower() for w in ws]
    # runs of words joined by plain spaces: an n-gram must stay inside one run
    joined = [i + 1 < len(ws) and text[ws[i].end:ws[i + 1].start] == " " for i in range(len(ws))]
    found: dict[str, list[Span]] = {}
    for n in range(max_words, 0, -1):
        grams: dict[str, list[int]] = {}
        for i in range(len(ws) - n + 1):
            if n > 1 and not all(joined[i:i + n - 1]):
                continue
            gram = " ".join(low[i:i + n])
            grams.setdefault(gram, []).append(i)
        for gram, starts in grams.items():
            toks = gram.split(" ")
            if all(t in STOPWORDS for t in toks) or (n == 1 and (len(gram) < 3 or gram.isdigit() and len(gram) < 2)):
                continue
            occ, last_end = [], -1
            for i in starts:  # non-overlapping, left to right
                if i > last_end:
                    occ.append(Span(ws[i].start, ws[i + n - 1].end))
                    last_end = i + n - 1
            if len(occ) < 2:
                continue
            covered = all(any(o.start >= p.start and o.end <= p.end for ps in found.values() for p in ps) for o in occ)
            if not covered:
                found[gram] = occ
    return found


def name_and_number_spans(text: str, sentence: Span) -> list[Span]:
    """Names and numbers in one sentence: cloze answers and swap candidates. A name is a run of
    capitalised words, with "of"/"de"/"von"/... between two of them ("Duke of Normandy"); a sentence's
    first word counts only when it is not a stopword. A number is a run of words with a digit, month
    names and scale words ("14 October 1066", "3.5 million"), holding at least one digit."""
    ws = [w for w in words(text) if sentence.start <= w.start and w.end <= sentence.end]
    toks = [text[w.start:w.end] for w in ws]
    kind = [_word_kind(t, w.start == sentence.start) for t, w in zip(toks, ws)]

    def spaced(i: int) -> bool:  # word i and word i + 1 are separated by one space only
        return i + 1 < len(ws) and text[ws[i].end:ws[i + 1].start] == " "

    out: list[Span] = []
    i = 0
    while i < len(ws):
        j = i
        if kind[i] in ("number", "month"):
            while spaced(j) and kind[j + 1] in ("number", "month", "scale"):
                j += 1
            if any(kind[k] == "number" for k in range(i, j + 1)):
                out.append(Span(ws[i].start, ws[j].end))
                i = j + 1
                continue
            j = i  # a month alone is a name
        if kind[i] in ("name", "month"):
            while True:
                if spaced(j) and kind[j + 1] in ("name", "month"):
                    j += 1
                elif (spaced(j) and toks[j + 1] in NAME_JOINERS and spaced(j + 1)
                      and kind[j + 2] in ("name", "month")):
                    j += 2
                else:
                    break
            out.append(Span(ws[i].start, ws[j].end))
        i = j + 1
    return out


def _word_kind(w: str, sentence_initial: bool) -> str:
    if any(c.isdigit() for c in w):
        return "number"
    if w.lower() in MONTHS and w[:1].isupper():
        return "month"
    if w.lower() in SCALES:
        return "scale"
    if w[:1].isupper() and not (sentence_initial and w.lower() in STOPWORDS):
        return "name"
    return "other"


def _shape(s: str) -> str:
    return "number" if any(c.isdigit() for c in s) else "name"


# ----------------------------------------------------------------------------- building examples

def _question(text: str, sentence: Span, answer: Span, max_words: int) -> str:
    """The sentence with ``answer`` replaced by the question token, cut to at most ``max_words`` words
    around it."""
    ws = [w for w in words(text) if sentence.start <= w.start and w.end <= sentence.end]
    before = [w for w in ws if w.end <= answer.start]
    after = [w for w in ws if w.start >= answer.end]
    keep = max(0, max_words - 1)
    nb = min(len(before), max(keep // 2, keep - len(after)))
    na = min(len(after), keep - nb)
    start = before[-nb].start if nb else answer.start
    end = after[na - 1].end if na else answer.end
    if na == len(after):
        end = sentence.end  # keep the sentence's own final punctuation
    q = text[start:answer.start] + QUESTION_TOKEN + text[answer.end:end]
    return " ".join(q.split())


def _cut(text: str, sents: Sequence[Span], drop: set[int]) -> tuple[str, list[int]]:
    """The paragraph without the sentences ``drop`` (kept sentences joined by one space), and for each
    sentence its offset in the new text (-1 if dropped)."""
    parts, where, pos = [], [], 0
    for i, s in enumerate(sents):
        if i in drop:
            where.append(-1)
            continue
        if parts:
            pos += 1
        where.append(pos)
        parts.append(text[s.start:s.end])
        pos += s.end - s.start
    return " ".join(parts), where


def _moved(span: Span, sents: Sequence[Span], where: Sequence[int]) -> Optional[int]:
    k = _sentence_of(sents, span.start)
    if k < 0 or where[k] < 0:
        return None
    return where[k] + span.start - sents[k].start


def _example(eid: str, title: str, context: str, question: str, answer: Optional[tuple[str, int]], kind: str) -> dict:
    if answer is not None:
        text, start = answer
        if context[start:start + len(text)] != text:  # the builder's own invariant
            raise AssertionError(f"synthetic example {eid}: answer {text!r} is not at {start}")
    return {"id": eid, "title": title, "context": context, "question": question,
            "answers": [] if answer is None else [{"text": answer[0], "answer_start": answer[1]}],
            "is_impossible": answer is None, "kind": kind}


def paragraph_examples(text: str, pid: str, title: str, rng: np.random.Generator, *, per_paragraph: int,
                       recurring_weight: float, cloze_weight: float, unanswerable: float,
                       max_question_words: int = 30, min_context_words: int = 25,
                       swap_pool: Sequence[str] = ()) -> list[dict]:
    """Up to ``per_paragraph`` synthetic examples from one paragraph (see the module doc). Each example
    first draws answerable or not (probability ``unanswerable``), then its kind in proportion to the
    weights among the kinds this paragraph allows. ``swap_pool``: names and numbers from elsewhere, to
    swap in when the paragraph has no second one of the right shape."""
    sents = sentences(text)
    if len(sents) < 2:
        return []
    # recurring: a span, one occurrence alone in its sentence as the question, another in another sentence
    rec = []
    for gram, occ in recurring_spans(text).items():
        by_sent = Counter(_sentence_of(sents, o.start) for o in occ)
        for o in occ:
            k = _sentence_of(sents, o.start)
            if k >= 0 and by_sent[k] == 1 and any(s != k and s >= 0 for s in by_sent):
                rec.append((o, k, occ))
    cand = []  # cloze answers: names, numbers and recurring phrases alone in their sentence
    for k, s in enumerate(sents):
        for sp in name_and_number_spans(text, s):
            cand.append((sp, k))
    cand += [(o, k) for o, k, _ in rec]
    used: set[tuple] = set()
    out: list[dict] = []
    tries = 0
    negative = None  # a draw that failed (no example of that kind here) is kept for the next try
    while len(out) < per_paragraph and tries < 6 * per_paragraph:
        tries += 1
        if negative is None:
            negative = bool(rng.random() < unanswerable)
        kinds = [("recurring", recurring_weight, rec), ("cloze", cloze_weight, cand)]
        kinds = [(k, w, pool) for k, w, pool in kinds if w > 0 and pool]
        if not kinds:
            break
        weights = np.array([w for _, w, _ in kinds], dtype=float)
        kind, _, pool = kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
        pick = pool[int(rng.integers(len(pool)))]
        key = (kind, negative, pick[0])
        if key in used:
            continue
        used.add(key)
        eid = f"{pid}-s{len(out)}"
        ex = (_recurring(text, sents, pick, eid, title, negative, max_question_words, min_context_words)
              if kind == "recurring" else
              _cloze(text, sents, pick, eid, title, negative, max_question_words, min_context_words, rng, swap_pool))
        if ex is not None:
            out.append(ex)
            negative = None
    return out


def _recurring(text, sents, pick, eid, title, negative, max_q, min_ctx) -> Optional[dict]:
    occ_q, k, occ = pick
    question = _question(text, sents[k], occ_q, max_q)
    answer_text = text[occ_q.start:occ_q.end].lower()
    if negative:  # every sentence holding the span cut out
        drop = {_sentence_of(sents, o.start) for o in occ} | {k}
        context, _ = _cut(text, sents, drop)
        if len(words(context)) < min_ctx or answer_text in context.lower():
            return None
        return _example(eid, title, context, question, None, "removed")
    context, where = _cut(text, sents, {k})
    for o in occ:
        if _sentence_of(sents, o.start) != k:
            start = _moved(o, sents, where)
            if start is not None:
                return _example(eid, title, context, question, (text[o.start:o.end], start), "recurring")
    return None


def _cloze(text, sents, pick, eid, title, negative, max_q, min_ctx, rng, swap_pool) -> Optional[dict]:
    ans, k = pick
    question = _question(text, sents[k], ans, max_q)
    answer_text = text[ans.start:ans.end]
    if not negative:
        return _example(eid, title, text, question, (answer_text, ans.start), "cloze")
    if rng.random() < 0.5:  # swapped: another name/number of the same shape in place of one the question holds
        others = [sp for sp in name_and_number_spans(text, sents[k]) if sp.end <= ans.start or sp.start >= ans.end]
        if others:
            old = others[int(rng.integers(len(others)))]
            old_text = text[old.start:old.end]
            in_sentence = text[sents[k].start:sents[k].end]
            pool = [text[sp.start:sp.end] for s in sents for sp in name_and_number_spans(text, s)]
            pool = [p for p in dict.fromkeys(list(pool) + list(swap_pool))
                    if _shape(p) == _shape(old_text) and p not in in_sentence and p.lower() != old_text.lower()]
            if pool:
                new = pool[int(rng.integers(len(pool)))]
                if old_text in question:
                    return _example(eid, title, text, question.replace(old_text, new, 1), None, "swapped")
    context, _ = _cut(text, sents, {k})
    if len(words(context)) < min_ctx or answer_text.lower() in context.lower():
        return None
    return _example(eid, title, context, question, None, "removed")


def synthetic_examples(paragraphs: Iterable[tuple[str, str, str]], *, seed: int, per_paragraph: int = 6,
                       recurring_weight: float = 0.5, cloze_weight: float = 0.5, unanswerable: float = 0.33,
                       max_question_words: int = 30) -> list[dict]:
    """Synthetic examples from ``(paragraph id, title, text)`` triples, deterministic given the seed (each
    paragraph draws from its own generator, seeded by the seed and the paragraph's position)."""
    paragraphs = list(paragraphs)
    names = [text[sp.start:sp.end] for _, _, text in paragraphs[:200] for s in sentences(text)[:2]
             for sp in name_and_number_spans(text, s)]
    swap_pool = list(dict.fromkeys(names))[:2000]
    out: list[dict] = []
    for i, (pid, title, text) in enumerate(paragraphs):
        rng = np.random.default_rng([seed, i])
        out += paragraph_examples(text, pid, title, rng, per_paragraph=per_paragraph, recurring_weight=recurring_weight,
                                  cloze_weight=cloze_weight, unanswerable=unanswerable,
                                  max_question_words=max_question_words, swap_pool=swap_pool)
    return out


def kind_counts(examples: Sequence[dict]) -> dict[str, int]:
    c = Counter(e["kind"] for e in examples)
    return {k: int(c.get(k, 0)) for k in KINDS}


# ----------------------------------------------------------------------------- text sources

def chunk_text(text: str, max_words: int = 150, min_words: int = 40) -> list[str]:
    """A long text (an IMDB review) as paragraphs of whole sentences, at most about ``max_words`` words
    each; ``<br />`` tags become spaces; chunks shorter than ``min_words`` are dropped."""
    text = " ".join(re.sub(r"<br\s*/?>", " ", text).split())
    chunks, cur, n = [], [], 0
    for s in sentences(text):
        k = len(words(text[s.start:s.end]))
        if cur and n + k > max_words:
            chunks.append(" ".join(cur))
            cur, n = [], 0
        cur.append(text[s.start:s.end])
        n += k
    if cur:
        chunks.append(" ".join(cur))
    return [c for c in chunks if len(words(c)) >= min_words]


def word_windows(text: str, n: int = 10) -> set[str]:
    """Every run of ``n`` consecutive words of ``text``, lower-cased, with punctuation, spacing and line
    breaks gone: what the held-out check compares (a paragraph whose case, punctuation or spacing was
    edited still shares its word runs). A text shorter than ``n`` words gives itself."""
    w = re.findall(r"\w+", text.lower())
    return {" ".join(w[i:i + n]) for i in range(max(len(w) - n + 1, 1))} if w else set()

