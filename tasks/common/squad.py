"""SQuAD 2.0 files and the deterministic few-label split by article, what both extractive readers read.

A file is in the official SQuAD layout (``{"data": [{"title", "paragraphs": [{"context", "qas": [...]}]}]}``);
:func:`load_squad_file` flattens it into examples, dicts ``{"id", "title", "context", "question",
"answers": [{"text", "answer_start"}], "is_impossible"}``, and :func:`validate_examples` checks them.

The few-label split (:func:`split_by_article`) is deterministic and independent of the seed:
articles are ordered by the SHA-256 of their title, then the first ``test_articles`` are the
held-out test set, the next ``dev_articles`` the dev articles, the next ``labeled_articles``
the labelled pool, and the rest the unlabelled pool (the options of :class:`ArticleSplit`, in the
``qa`` and ``passages`` sections). The seed only picks which questions of the labelled pool are
labelled (``data.num_labeled``, half answerable and half unanswerable as far as the pool allows; 0
takes every question of the pool) and which dev questions are kept (``data.dev_size``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from uda.config import option, require
from uda.data import DataError


@dataclass
class ArticleSplit:
    """What the QA tasks share: question and answer lengths, and the deterministic few-label split of a
    SQuAD-format file by article (its sha256(title) order): test articles first, then dev, then the
    labelled pool, the rest unlabelled."""

    max_question_length: int = option(64, "Questions are cut to at most this many tokens.")
    max_answer_length: int = option(30, "Longest answer span, in tokens, that prediction considers.")
    test_articles: int = option(10, "Held-out test articles: the first ones in sha256(title) order.")
    dev_articles: int = option(3, "Dev articles (model selection, threshold fitting): the next ones in that order.")
    labeled_articles: int = option(8, "Labelled-pool articles (data.num_labeled questions are drawn from them): the "
                               "next ones; every remaining article is the unlabelled pool.")

    def validate_split(self, section: str) -> None:
        require(self.max_question_length >= 1 and self.max_answer_length >= 1,
                f"{section}.max_question_length and {section}.max_answer_length must be >= 1")
        require(self.test_articles >= 1 and self.labeled_articles >= 1 and self.dev_articles >= 0,
                f"{section}.test_articles and {section}.labeled_articles must be >= 1, {section}.dev_articles >= 0")


# ----------------------------------------------------------------------------- files

def examples_from_official(obj: Any, source: str) -> list[dict]:
    """Flatten an official-layout SQuAD json object into examples (file order)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        raise DataError(f"'{source}' is not in the official SQuAD json layout (a top-level 'data' list of "
                        f"articles with 'paragraphs' -> 'qas'); give e.g. dev-v2.0.json")
    out = []
    for a, article in enumerate(obj["data"]):
        title = str(article.get("title", f"article-{a}"))
        for p, para in enumerate(article.get("paragraphs", [])):
            context = para.get("context")
            if not isinstance(context, str):
                raise DataError(f"'{source}': article '{title}', paragraph {p} has no 'context' text")
            for qa in para.get("qas", []):
                qid = qa.get("id")
                if qid is None or "question" not in qa:
                    raise DataError(f"'{source}': article '{title}', paragraph {p}: a question lacks 'id' or "
                                    f"'question'")
                answers = [{"text": str(x["text"]), "answer_start": int(x["answer_start"])}
                           for x in qa.get("answers", [])]
                impossible = bool(qa.get("is_impossible", not answers))
                if impossible and answers:
                    raise DataError(f"'{source}': question id '{qid}' is marked is_impossible but has answers")
                out.append({"id": str(qid), "title": title, "context": context, "question": str(qa["question"]),
                            "answers": answers, "is_impossible": impossible or not answers})
    return out


def find_squad_json(path: Path) -> Path:
    if path.is_file():
        return path
    if not path.is_dir():
        raise DataError(f"SQuAD data path '{path}' does not exist; pass --data.path /path/to/dev-v2.0.json")
    preferred = path / "dev-v2.0.json"
    if preferred.is_file():
        return preferred
    found = sorted(p for p in path.glob("*.json") if p.is_file())
    if len(found) != 1:
        raise DataError(f"folder '{path}' holds {len(found)} json files ({[p.name for p in found][:10]}); "
                        f"pass --data.path with the SQuAD json file itself")
    return found[0]


def load_squad_file(path: str | Path) -> list[dict]:
    p = find_squad_json(Path(path).expanduser())
    try:
        obj = json.loads(p.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"cannot read SQuAD file '{p}': {e}") from None
    except json.JSONDecodeError as e:
        raise DataError(f"SQuAD file '{p}' is not valid JSON (line {e.lineno}: {e.msg})") from None
    return examples_from_official(obj, str(p))


def validate_examples(examples: Sequence[dict], source: str) -> None:
    """Every gold answer's text must be the context at its ``answer_start``; ids must be unique.
    (Some answer_starts in the shared dev file are the first occurrence of the text, not the
    annotated one; they are still checked to point at the text.)"""
    seen: set[str] = set()
    for e in examples:
        if e["id"] in seen:
            raise DataError(f"'{source}': question id '{e['id']}' occurs twice; ids must be unique")
        seen.add(e["id"])
        if not e["question"].strip():
            raise DataError(f"'{source}': question id '{e['id']}' has an empty question")
        for a in e["answers"]:
            s, t = a["answer_start"], a["text"]
            got = e["context"][s:s + len(t)] if s >= 0 else None
            if got != t:
                raise DataError(f"'{source}': question id '{e['id']}': answer {t!r} does not match the context at "
                                f"answer_start {s} (found {got!r}); fix answer_start or the answer text")


# ----------------------------------------------------------------------------- the few-label split

def article_order(titles: Sequence[str]) -> list[str]:
    """Distinct titles ordered by the SHA-256 of their UTF-8 bytes (fixed, file-order independent)."""
    return sorted(set(titles), key=lambda t: hashlib.sha256(t.encode("utf-8")).hexdigest())


def split_by_article(examples: Sequence[dict], test_articles: int, dev_articles: int,
                     labeled_articles: int) -> dict[str, list[dict]]:
    """{"test", "dev", "labeled_pool", "unlabeled_pool"}: consecutive blocks of :func:`article_order`
    (test first; the unlabelled pool takes every article left). Example order within a block is the
    file order."""
    order = article_order([e["title"] for e in examples])
    need = test_articles + dev_articles + labeled_articles
    if test_articles < 1 or labeled_articles < 1 or dev_articles < 0:
        raise DataError("qa.test_articles and qa.labeled_articles must be >= 1 and qa.dev_articles >= 0")
    if need > len(order):
        raise DataError(f"the split asks for {need} articles (qa.test_articles {test_articles} + qa.dev_articles "
                        f"{dev_articles} + qa.labeled_articles {labeled_articles}) but the data has only "
                        f"{len(order)}; lower them")
    block = {}
    for i, t in enumerate(order):
        if i < test_articles:
            block[t] = "test"
        elif i < test_articles + dev_articles:
            block[t] = "dev"
        elif i < need:
            block[t] = "labeled_pool"
        else:
            block[t] = "unlabeled_pool"
    out: dict[str, list[dict]] = {"test": [], "dev": [], "labeled_pool": [], "unlabeled_pool": []}
    for e in examples:
        out[block[e["title"]]].append(e)
    out["articles"] = {k: [t for t in order if block[t] == k] for k in out}  # type: ignore[assignment]
    return out


def stratified_sample(examples: Sequence[dict], n: int, rng: np.random.Generator) -> list[dict]:
    """n examples, half answerable and half unanswerable (odd n: one more answerable) as far as the
    pool allows, drawn with ``rng``; returned in pool order."""
    if n > len(examples):
        raise DataError(f"asked for {n} questions but the pool holds only {len(examples)}")
    has = [i for i, e in enumerate(examples) if not e["is_impossible"]]
    no = [i for i, e in enumerate(examples) if e["is_impossible"]]
    n_has = min(len(has), n - min(len(no), n // 2))
    n_no = n - n_has
    pick = list(rng.choice(has, size=n_has, replace=False)) + list(rng.choice(no, size=n_no, replace=False))
    return [examples[i] for i in sorted(int(i) for i in pick)]


def few_label_split(examples: Sequence[dict], *, num_labeled: int, dev_size: int, test_articles: int,
                    dev_articles: int, labeled_articles: int, unlabeled_from_train: bool,
                    max_unlabeled: Optional[int], max_test: Optional[int], seed: int) -> dict:
    """train / dev / test / unlabeled example lists plus an ``info`` dict (see the module doc)."""
    blocks = split_by_article(examples, test_articles, dev_articles, labeled_articles)
    pool = blocks["labeled_pool"]
    if num_labeled > len(pool):
        raise DataError(f"data.num_labeled={num_labeled} but the labelled pool ({labeled_articles} articles) holds "
                        f"only {len(pool)} questions; lower --data.num_labeled or raise --qa.labeled_articles")
    # num_labeled 0: every question of the labelled-pool articles
    train = list(pool) if num_labeled == 0 else stratified_sample(pool, num_labeled, np.random.default_rng([seed, 0]))
    dev = blocks["dev"]
    if 0 < dev_size < len(dev):
        dev = stratified_sample(dev, dev_size, np.random.default_rng([seed, 1]))
    test = blocks["test"]
    if max_test is not None and max_test < len(test):
        test = stratified_sample(test, max_test, np.random.default_rng([seed, 2]))
    unlabeled = [{"id": e["id"], "question": e["question"], "context": e["context"]} for e in blocks["unlabeled_pool"]]
    from_pool = 0
    if unlabeled_from_train:
        # every question of the labelled pool, the labelled ones included (labels dropped), as the
        # reference UDA's pool holds the IMDB train reviews beside the unsup ones (and as the text tasks do):
        # with --data.num_labeled 0 the consistency loss still has the training questions to act on
        extra = [{"id": e["id"], "question": e["question"], "context": e["context"]} for e in pool]
        from_pool = len(extra)
        unlabeled += extra
    before_cap = len(unlabeled)
    if max_unlabeled is not None and max_unlabeled < len(unlabeled):
        keep = np.sort(np.random.default_rng([seed, 3]).choice(len(unlabeled), size=max_unlabeled, replace=False))
        unlabeled = [unlabeled[int(i)] for i in keep]

    def count(rows: Sequence[dict]) -> dict:
        return {"questions": len(rows), "answerable": sum(not r["is_impossible"] for r in rows),
                "unanswerable": sum(bool(r["is_impossible"]) for r in rows)}

    info = {
        "split": "articles ordered by sha256(title): test, dev, labelled pool, unlabelled pool",
        "articles": blocks["articles"],
        "counts": {"train": count(train), "dev": count(dev), "test": count(test),
                   "labeled_pool": count(pool), "dev_articles_total": len(blocks["dev"]),
                   "test_articles_total": len(blocks["test"]),
                   "unlabeled": len(unlabeled), "unlabeled_before_cap": before_cap,
                   "unlabeled_from_labeled_pool": from_pool},
        "seed": seed,
    }
    return {"train": train, "dev": dev, "test": test, "unlabeled": unlabeled, "info": info}


def require_unlabeled(unlabeled: Sequence[dict], wanted: bool, section: str) -> None:
    """A clear error when the consistency loss is on (``wanted``) but the split left no unlabelled question."""
    if wanted and not unlabeled:
        raise DataError(f"the consistency loss (uda.lambda_u > 0) needs unlabelled questions, but the split leaves "
                        f"none: --{section}.labeled_articles takes every article that is not test or dev, and "
                        f"--data.unlabeled_from_train is false. Set --data.unlabeled_from_train true (the labelled "
                        f"pool's questions without their labels), lower --{section}.labeled_articles, or train "
                        f"supervised only with --uda.lambda_u 0")


def start_held_out(model_path: str | Path, articles: dict) -> None:
    """When the starting encoder is a reader this library trained (a ``model/`` folder inside a run
    folder, or inside one of its checkpoints), make sure that run never trained on the dev or test
    articles of this split (``articles``: the split's ``info["articles"]``): a clear error otherwise.
    The run is found as the nearest of the folder's parents that holds ``data_info.json``."""
    p = Path(model_path)
    run = next((q for q in [p, *p.parents][:4] if (q / "data_info.json").is_file()), None)
    if run is None:
        return
    info = json.loads((run / "data_info.json").read_text(encoding="utf-8"))
    if str(info.get("held_out_check", "")).startswith("none"):
        from tqdm.auto import tqdm

        tqdm.write(f"WARNING: the starting model '{p}' comes from the QA-shaped start '{run}', whose texts were "
                   f"checked against no test or dev article (it was built without --squad): if they hold this "
                   f"run's dev or test articles, its scores are not held out. Rebuild the start with --squad")
    trained = info.get("articles") or {}
    seen = set(trained.get("labeled_pool", [])) | set(trained.get("unlabeled_pool", []))
    leaked = sorted(seen & (set(articles.get("test", [])) | set(articles.get("dev", []))))
    if leaked:
        raise DataError(f"the starting model '{p}' comes from the run '{run}', which trained on {len(leaked)} of this "
                        f"run's dev/test articles (the first: {leaked[:3]}): start from a reader trained with the same "
                        f"test_articles and dev_articles, or from a pretrained encoder")
