"""A BM25 retriever over the paragraphs of a SQuAD-format file, writing DPR reader-format records.

The corpus is made of paragraphs of the file (each distinct (title, context) once, in file order, id
``<title>#<n>``, n its position in the article); the passage text indexed is "title text" (DPR indexes
titles too), with underscores in titles read as spaces. BM25 is the PyPI package ``bm25s`` (Lucene's
BM25, k1 = 1.5, b = 0.75, English stop words, no stemming). Every question of the file gets its top
``k`` paragraphs as ``ctxs``; since the gold paragraph is known, ``has_answer`` is true exactly on it
for an answerable question (and on no passage of an unanswerable one), ``positive_ctxs`` holds it (so
a reader can insert it when retrieval missed it), and recall@k (a positive among the top k, over the
answerable questions: the reader's upper bound) is measured.

Which paragraphs a question is retrieved from (``corpus_of``, :func:`split_corpora`): by default those
of the articles of its own block of the article split, one BM25 index per block: test questions from
the test articles' paragraphs, dev questions from the dev articles', and training questions (the
labelled and the unlabelled pool) from the paragraphs of the training articles. So a reader never
sees a paragraph of another block: with one corpus of the whole file, only labelled-pool paragraphs
are ever positives in training while negatives come from everywhere, and a reader learns "a
paragraph I saw as a positive" instead of reading the question (it then ranks labelled-pool
paragraphs first on the test questions). ``corpus_of=None``: one corpus, every paragraph of the file.

A record: ``{"id", "question", "answers": [texts], "article": title, "corpus": its corpus's name,
"gold_ctx_id", "ctxs": [{"id", "title", "text", "score", "has_answer"}], "positive_ctxs": [ctx]}``:
DPR's reader format plus the fields this project's split and reader read (``article``,
``positive_ctxs``).

    python -m tasks.passages.retrieval --squad ../shared/data/squad_v2/dev-v2.0.json --out runs/bm25/retrieval.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Mapping, Optional, Sequence

RECALL_KS = (1, 5, 20)
WHOLE_FILE = "file"  # the corpus name of every record when one corpus holds every paragraph
# block of tasks.common.squad.split_by_article -> the corpus its questions are retrieved from
CORPUS_OF_BLOCK = {"test": "test", "dev": "dev", "labeled_pool": "train", "unlabeled_pool": "train"}


def paragraph_corpus(examples: Sequence[dict]) -> tuple[list[dict], dict[tuple[str, str], str]]:
    """The distinct paragraphs of flattened SQuAD examples (file order) as DPR ctxs
    ``{"id", "title", "text"}``, and the id of each (title, context)."""
    corpus: list[dict] = []
    ids: dict[tuple[str, str], str] = {}
    per_article: dict[str, int] = {}
    for e in examples:
        key = (e["title"], e["context"])
        if key in ids:
            continue
        n = per_article.get(e["title"], 0)
        per_article[e["title"]] = n + 1
        ids[key] = f"{e['title']}#{n}"
        corpus.append({"id": ids[key], "title": e["title"].replace("_", " "), "text": e["context"]})
    return corpus, ids


def bm25_top_k(corpus_texts: Sequence[str], queries: Sequence[str], k: int) -> tuple[list[list[int]], list[list[float]]]:
    """Indices and scores of the top ``k`` corpus texts per query, best first (bm25s)."""
    import bm25s

    k = min(k, len(corpus_texts))
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(corpus_texts), stopwords="en", show_progress=False), show_progress=False)
    # query tokens as strings: bm25s maps them onto the corpus vocabulary (ids of a separate call would not be)
    query_tokens = bm25s.tokenize(list(queries), stopwords="en", return_ids=False, show_progress=False)
    docs, scores = retriever.retrieve(query_tokens, k=k, show_progress=False, n_threads=1)
    return docs.tolist(), scores.tolist()


def split_corpora(examples: Sequence[dict], test_articles: int, dev_articles: int,
                  labeled_articles: int) -> dict[str, str]:
    """Article title -> the corpus its questions are retrieved from and its paragraphs belong to:
    "test", "dev" or "train" (labelled and unlabelled pool), the blocks of
    :func:`tasks.common.squad.split_by_article`."""
    from tasks.common.squad import split_by_article

    blocks = split_by_article(examples, test_articles, dev_articles, labeled_articles)
    return {t: CORPUS_OF_BLOCK[block] for block, titles in blocks["articles"].items() for t in titles}


def build_records(examples: Sequence[dict], k: int, corpus_of: Optional[Mapping[str, str]] = None) -> list[dict]:
    """DPR reader records for every question of ``examples`` (flattened SQuAD examples), in file
    order. ``corpus_of``: article title -> corpus name; a question is retrieved from the paragraphs
    of the articles of its own article's corpus (one BM25 index each). None: one corpus, every
    paragraph of the file."""
    groups: dict[str, list[int]] = {}
    for i, e in enumerate(examples):
        groups.setdefault(WHOLE_FILE if corpus_of is None else corpus_of[e["title"]], []).append(i)
    records: list[Optional[dict]] = [None] * len(examples)
    for name, rows in groups.items():
        part = [examples[i] for i in rows]
        for i, r in zip(rows, _retrieve(part, k)):
            records[i] = {**r, "corpus": name}
    return records  # type: ignore[return-value]


def _retrieve(examples: Sequence[dict], k: int) -> list[dict]:
    """Records of ``examples``, retrieved from the paragraphs of ``examples`` only."""
    corpus, ids = paragraph_corpus(examples)
    docs, scores = bm25_top_k([f"{c['title']} {c['text']}" for c in corpus], [e["question"] for e in examples], k)
    by_id = {c["id"]: c for c in corpus}
    records = []
    for e, doc_idx, doc_scores in zip(examples, docs, scores):
        gold = ids[(e["title"], e["context"])]
        answerable = bool(e["answers"]) and not e["is_impossible"]
        ctxs = [{**corpus[d], "score": round(float(s), 4), "has_answer": answerable and corpus[d]["id"] == gold}
                for d, s in zip(doc_idx, doc_scores)]
        answers = list(dict.fromkeys(a["text"] for a in e["answers"]))
        records.append({"id": e["id"], "question": e["question"], "answers": answers, "article": e["title"],
                        "gold_ctx_id": gold, "ctxs": ctxs,
                        "positive_ctxs": [{**by_id[gold], "has_answer": True}] if answerable else []})
    return records


def corpus_sizes(examples: Sequence[dict], corpus_of: Optional[Mapping[str, str]] = None) -> dict[str, int]:
    """Paragraphs in each corpus (name -> count)."""
    seen: dict[str, set] = {}
    for e in examples:
        seen.setdefault(WHOLE_FILE if corpus_of is None else corpus_of[e["title"]], set()).add(
            (e["title"], e["context"]))
    return {name: len(paragraphs) for name, paragraphs in seen.items()}


def recall_at_k(records: Sequence[dict], ks: Sequence[int] = RECALL_KS) -> dict[str, float]:
    """``recall@k``: share of answerable questions (non-empty ``answers``) with a ``has_answer`` passage
    among their top k ``ctxs``; also ``answerable`` (their count). 0.0 when there are none. A k above
    the longest ``ctxs`` list is left out (it would only repeat the recall at that length)."""
    has = [r for r in records if r["answers"]]
    out: dict[str, float] = {"answerable": float(len(has))}
    longest = max((len(r["ctxs"]) for r in records), default=0)
    for k in (k for k in ks if k <= longest):
        hits = sum(any(c.get("has_answer") for c in r["ctxs"][:k]) for r in has)
        out[f"recall@{k}"] = hits / len(has) if has else 0.0
    return out


def write_records(path: str | Path, records: Sequence[dict]) -> Path:
    """One record a line, gzipped (level 6: a third of level 9's time on these files, a few per cent
    larger) for a ``.gz`` name; written to a temporary file and renamed, so a reader never sees half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        opener = gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) if path.name.endswith(".gz") \
            else open(tmp, "w", encoding="utf-8")
        with opener as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def main(argv: list[str] | None = None) -> int:
    from tasks.common.squad import load_squad_file, split_by_article, validate_examples

    ap = argparse.ArgumentParser(description="BM25 over the paragraphs of a SQuAD-format file -> DPR reader records, "
                                             "with recall@1/5/20 per block of the article split.")
    ap.add_argument("--squad", required=True, help="SQuAD-format json (e.g. dev-v2.0.json)")
    ap.add_argument("--out", required=True, help="output .jsonl.gz")
    ap.add_argument("--k", type=int, default=100, help="passages kept per question (default 100)")
    ap.add_argument("--test_articles", type=int, default=10)
    ap.add_argument("--dev_articles", type=int, default=3)
    ap.add_argument("--labeled_articles", type=int, default=8)
    ap.add_argument("--corpus", choices=("split", "file"), default="split",
                    help="split (default): each block of the article split retrieves from its own articles' "
                         "paragraphs (training questions from the training articles'); file: every paragraph")
    args = ap.parse_args(argv)
    examples = load_squad_file(args.squad)
    validate_examples(examples, args.squad)
    corpus_of = split_corpora(examples, args.test_articles, args.dev_articles, args.labeled_articles) \
        if args.corpus == "split" else None
    records = build_records(examples, args.k, corpus_of)
    write_records(args.out, records)
    blocks = split_by_article(examples, args.test_articles, args.dev_articles, args.labeled_articles)
    by_id = {r["id"]: r for r in records}
    report = {"file": str(args.out), "questions": len(records), "k": args.k, "corpus": args.corpus,
              "paragraphs": corpus_sizes(examples, corpus_of), "all": recall_at_k(records)}
    for name in ("test", "dev", "labeled_pool", "unlabeled_pool"):
        report[name] = recall_at_k([by_id[e["id"]] for e in blocks[name]])
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
