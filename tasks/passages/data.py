"""Multi-passage reader data: DPR reader-format records, the article split, training samples and features.

Input (``data.path``): either a retriever's output in DPR reader format, a ``.jsonl(.gz)`` file or a
``.json`` list of ``{"question", "answers": [texts] (empty: unanswerable), "ctxs": [{"id", "title",
"text", "score"?, "has_answer"?}], "id"?, "article"?, "positive_ctxs"?}``, or a SQuAD-format json (a
top-level ``data`` list), which :mod:`tasks.passages.retrieval` turns into such records with BM25 over the
file's paragraphs (``passages.retrieval_corpus``: by default a question is retrieved from the
paragraphs of its own block of the article split only, a training question from the training
articles').
A passage without ``has_answer`` gets it from the text: true when an answer string occurs in it as
whole words (:func:`answer_occurrences`).

The split (:func:`split_records`) is the single-passage task's: :func:`tasks.common.squad.few_label_split`
on the records' ``article`` (the SQuAD title; a record without one is its own article, so that the
block sizes then count questions), ordered by sha256(title): test articles first, then dev,
labelled pool, unlabelled pool. Which split a question is in is decided by its own article only;
the passages it comes with are those its retriever gave (for a SQuAD-format input, paragraphs of
its own block's articles unless ``passages.retrieval_corpus`` is ``file``).

A training sample (:func:`training_passages`): M passages, the positive (a ``has_answer`` passage of
the top K, drawn at random when there are several; the first of ``positive_ctxs`` inserted when
retrieval missed it) and M - 1 negatives drawn at random from the other passages of the top K; an
unanswerable question gets M negatives and the no-answer option as its target. Slots are shuffled.
An answerable question with no positive at all (none retrieved, none given) cannot teach either
head and is left out of training (counted in data_info.json), as DPR does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from tasks.common.squad import few_label_split
from tasks.common.windows import build_features, clip_questions
from uda.data import DataError, resolve_data_path
from uda.io import iter_jsonl, open_text


# ----------------------------------------------------------------------------- reading

def is_squad_file(path: Path) -> bool:
    """True for a json file holding an object with a ``data`` list (the official SQuAD layout)."""
    if not path.name.lower().endswith((".json", ".json.gz")):
        return False
    try:
        with open_text(path) as f:
            obj = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False  # reported by the reader-file loader, which names the line
    return isinstance(obj, dict) and isinstance(obj.get("data"), list)


def validate_record(rec: Any, where: str, index: int) -> dict:
    """A DPR reader record, checked and normalised (ids as strings, titles default to "")."""
    if not isinstance(rec, dict):
        raise DataError(f"{where}: not a JSON object")
    q = rec.get("question")
    if not isinstance(q, str) or not q.strip():
        raise DataError(f"{where}: 'question' must be a non-empty string")
    answers = rec.get("answers", [])
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise DataError(f"{where}: 'answers' must be a list of strings (empty: unanswerable)")
    ctxs = rec.get("ctxs")
    if not isinstance(ctxs, list) or not ctxs:
        raise DataError(f"{where}: 'ctxs' must be a non-empty list of passages")

    def ctx(c: Any, k: int, field: str) -> dict:
        if not isinstance(c, dict) or not isinstance(c.get("text"), str):
            raise DataError(f"{where}: {field}[{k}] must be an object with a 'text' string")
        out = {"id": str(c.get("id", f"{index}-{field}-{k}")), "title": str(c.get("title") or ""), "text": c["text"]}
        if c.get("score") is not None:
            out["score"] = float(c["score"])
        if c.get("has_answer") is not None:
            out["has_answer"] = bool(c["has_answer"])
        return out

    out = {"id": str(rec.get("id", rec.get("qid", f"q{index}"))), "question": q, "answers": list(answers),
           "ctxs": [ctx(c, k, "ctxs") for k, c in enumerate(ctxs)],
           "positive_ctxs": [ctx(c, k, "positive_ctxs") for k, c in enumerate(rec.get("positive_ctxs") or [])]}
    out["article"] = str(rec["article"]) if rec.get("article") is not None else None
    return out


def load_reader_file(path: str | Path) -> list[dict]:
    """Validated records of a DPR reader-format file (``.jsonl``/``.jsonl.gz`` one a line, or ``.json``
    a list); every passage gets ``has_answer`` (given, or from the answer strings)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise DataError(f"reader data '{p}' does not exist; pass --data.path with a DPR reader-format file "
                        f"or a SQuAD-format json")
    if p.name.lower().endswith((".json", ".json.gz")):
        try:
            with open_text(p) as f:
                rows = json.load(f)
        except json.JSONDecodeError as e:
            raise DataError(f"'{p}' is not valid JSON (line {e.lineno}: {e.msg})") from None
        if not isinstance(rows, list):
            raise DataError(f"'{p}' must hold a JSON list of records (or be a SQuAD-format file with a 'data' list)")
        records = [validate_record(r, f"'{p}', record {i}", i) for i, r in enumerate(rows)]
    else:
        try:
            records = [validate_record(r, f"'{p}', line {n}", i) for i, (n, r) in enumerate(iter_jsonl(p))]
        except ValueError as e:
            raise DataError(str(e)) from None
    if not records:
        raise DataError(f"'{p}' holds no records")
    seen: set[str] = set()
    for r in records:
        if r["id"] in seen:
            raise DataError(f"'{p}': question id '{r['id']}' occurs twice; ids must be unique")
        seen.add(r["id"])
        for c in r["ctxs"] + r["positive_ctxs"]:
            if "has_answer" not in c:
                c["has_answer"] = bool(answer_occurrences(c["text"], r["answers"], 1))
    return records


def load_passage_records(cfg: Any, retrieval_path: Optional[Path]) -> tuple[list[dict], str, dict]:
    """(records, source, retrieval info) from ``data.path``: a DPR reader-format file as it is, or a
    SQuAD-format json through BM25 (the built file is written to ``retrieval_path``)."""
    from tasks.common.squad import load_squad_file, validate_examples
    from tasks.passages.retrieval import build_records, corpus_sizes, recall_at_k, split_corpora, write_records

    path = resolve_data_path(cfg.data)
    if not path:
        raise DataError("task passages reads local data only: pass --data.path with a DPR reader-format file "
                        "(jsonl or json list) or a SQuAD-format json such as dev-v2.0.json")
    p = Path(path).expanduser()
    if p.is_dir():
        found = sorted(q for q in p.iterdir() if q.name.lower().endswith((".json", ".jsonl", ".jsonl.gz")))
        if len(found) != 1:
            raise DataError(f"folder '{p}' holds {len(found)} data files ({[q.name for q in found][:10]}); pass "
                            f"--data.path with the file itself")
        p = found[0]
    if not p.is_file():
        raise DataError(f"data path '{p}' does not exist")
    if not is_squad_file(p):
        records = load_reader_file(p)
        return records, str(p), {"source": "reader file", "recall": recall_at_k(records)}
    examples = load_squad_file(p)
    validate_examples(examples, str(p))
    sp = cfg.passages
    corpus_of = split_corpora(examples, sp.test_articles, sp.dev_articles, sp.labeled_articles) \
        if sp.retrieval_corpus == "split" else None
    records = [validate_record(r, f"built from '{p}'", i)
               for i, r in enumerate(build_records(examples, sp.retrieve_k, corpus_of))]
    for r, e in zip(records, examples):
        r["article"] = e["title"]
    sizes = corpus_sizes(examples, corpus_of)
    where = "every paragraph of the file" if corpus_of is None else \
        "the paragraphs of each block's own articles (" + ", ".join(f"{n} {c}" for c, n in sizes.items()) + ")"
    info = {"source": f"BM25 (bm25s) over {where} of '{p}'", "corpus": sp.retrieval_corpus,
            "paragraphs": sizes, "k": sp.retrieve_k, "recall": recall_at_k(records)}
    if retrieval_path is not None:
        write_records(retrieval_path, records)
        info["file"] = str(retrieval_path)
    return records, str(p), info


# ----------------------------------------------------------------------------- answers in passages

def answer_occurrences(text: str, answers: Sequence[str], limit: int) -> list[tuple[int, int]]:
    """Character spans [start, end) where an answer string occurs in ``text`` as whole words (not
    inside a longer word), at most ``limit``, in text order. Case-sensitive; when no answer occurs
    with its case, case-insensitive."""
    answers = [a.strip() for a in dict.fromkeys(answers) if a.strip()]
    for flags in (0, re.IGNORECASE):
        spans: set[tuple[int, int]] = set()
        for a in answers:
            for m in re.finditer(r"(?<!\w)" + re.escape(a) + r"(?!\w)", text, flags):
                spans.add((m.start(), m.end()))
        if spans:
            return sorted(spans)[:limit]
    return []


def occurrence_tokens(offsets: Sequence[Optional[tuple]], spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Token (start, end) of each character span wholly inside the window's context tokens (the token
    holding its first character, the token holding its last); spans cut off by truncation are dropped."""
    ctx = [i for i, o in enumerate(offsets) if o is not None]
    if not ctx:
        return []
    out = []
    for s, e in spans:
        if offsets[ctx[0]][0] > s or offsets[ctx[-1]][1] < e:
            continue
        start = next(i for i in ctx if offsets[i][1] > s)
        end = next(i for i in reversed(ctx) if offsets[i][0] < e)
        if end >= start:
            out.append((start, end))
    return list(dict.fromkeys(out))


# ----------------------------------------------------------------------------- the split

def split_records(records: Sequence[dict], cfg: Any) -> dict:
    """train / dev / test / unlabeled records and info, by :func:`tasks.common.squad.few_label_split` on the
    records' articles. Unlabelled records keep only id, question and passages (no answers, no
    ``has_answer``: nothing of the gold reaches the consistency loss)."""
    proxies = [{"id": r["id"], "title": r["article"] if r.get("article") is not None else f"question:{r['id']}",
                "question": r["question"], "context": "", "answers": [{"text": a} for a in r["answers"]],
                "is_impossible": not r["answers"]} for r in records]
    p = cfg.passages
    split = few_label_split(
        proxies, num_labeled=cfg.data.num_labeled, dev_size=cfg.data.dev_size, test_articles=p.test_articles,
        dev_articles=p.dev_articles, labeled_articles=p.labeled_articles,
        unlabeled_from_train=cfg.data.unlabeled_from_train, max_unlabeled=cfg.data.max_unlabeled,
        max_test=cfg.data.max_test, seed=cfg.seed)
    by_id = {r["id"]: r for r in records}
    out = {k: [by_id[e["id"]] for e in split[k]] for k in ("train", "dev", "test")}
    out["unlabeled"] = [{"id": e["id"], "question": by_id[e["id"]]["question"],
                         "ctxs": [{"id": c["id"], "title": c["title"], "text": c["text"]}
                                  for c in by_id[e["id"]]["ctxs"]]} for e in split["unlabeled"]]
    out["info"] = split["info"]
    return out


def trainable(record: dict, top_k: int) -> bool:
    """Unanswerable (target: the no-answer option), or answerable with a positive passage to learn from."""
    if not record["answers"]:
        return True
    return any(c["has_answer"] for c in record["ctxs"][:top_k]) or bool(record["positive_ctxs"])


# ----------------------------------------------------------------------------- samples and features

def training_passages(record: dict, num_passages: int, top_k: int,
                      rng: np.random.Generator) -> tuple[list[dict], Optional[int]]:
    """The M passages of a labelled question and the slot of its positive (None: unanswerable, or no
    positive). See the module doc."""
    top = record["ctxs"][:top_k]
    positives = [c for c in top if c["has_answer"]] if record["answers"] else []
    negatives = [c for c in top if not c["has_answer"]]
    positive = None
    if record["answers"]:
        if positives:
            positive = positives[int(rng.integers(len(positives)))]
        elif record["positive_ctxs"]:
            positive = record["positive_ctxs"][0]  # retrieval missed it: inserted
    n_neg = min(len(negatives), num_passages - (positive is not None))
    chosen = [negatives[int(i)] for i in rng.permutation(len(negatives))[:n_neg]]
    if positive is not None:
        chosen.append(positive)
    order = rng.permutation(len(chosen))
    passages = [chosen[int(i)] for i in order]
    slot = None if positive is None else int(np.nonzero(order == len(chosen) - 1)[0][0])
    return passages, slot


def first_segments(tokenizer: Any, questions: Sequence[str], titles: Sequence[str], max_question_length: int,
                   max_title_length: int) -> list[str]:
    """"question [SEP] title" (question and title cut to their token budgets); the question alone when
    titles are off or empty. The context (the passage text) is the second segment."""
    qs = clip_questions(tokenizer, questions, max_question_length)
    if max_title_length == 0:
        return qs
    ts = clip_questions(tokenizer, titles, max_title_length, mark=False)
    sep = tokenizer.sep_token or "|"
    return [f"{q} {sep} {t}" if t else q for q, t in zip(qs, ts)]


def first_segment_budget(max_question_length: int, max_title_length: int) -> int:
    return max_question_length + (max_title_length + 1 if max_title_length else 0)


def encode_pairs(tokenizer: Any, firsts: Sequence[str], texts: Sequence[str], max_length: int,
                 budget: int) -> list[dict]:
    """One feature per (first segment, passage text) pair: the first window of tasks.common.windows's
    build_features (a passage longer than the window is cut), with ``ctx_mask`` (True at context
    tokens) and ``offsets`` (character spans in the passage text; None elsewhere)."""
    examples = [{"question": q, "context": t} for q, t in zip(firsts, texts)]
    feats = build_features(tokenizer, examples, max_length, 0, budget, with_labels=False, mark=False)
    first: list[Optional[dict]] = [None] * len(examples)
    for f in feats:
        if first[f["example_index"]] is None:
            f["ctx_mask"] = [o is not None for o in f["offsets"]]
            first[f["example_index"]] = f
    return first  # type: ignore[return-value]


def pad_passages(passages: list[dict], num_passages: int) -> tuple[list[dict], list[bool]]:
    """Passages padded to ``num_passages`` with empty ones (mask False), and the mask."""
    n = len(passages)
    return passages + [{"id": "", "title": "", "text": ""}] * (num_passages - n), \
        [True] * n + [False] * (num_passages - n)
