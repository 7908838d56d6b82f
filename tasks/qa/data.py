"""SQuAD 2.0 data: loading, validation, the few-label split by article, and tokenised features.

Sources: ``data.path`` (or the ``UDA_DATA_PATH`` environment variable), a json file in the official
SQuAD layout (``{"data": [{"title", "paragraphs": [{"context", "qas": [...]}]}]}``) or a folder
holding one (``dev-v2.0.json`` is preferred, else the only ``*.json``); otherwise the hub dataset
``data.hub_id`` (``rajpurkar/squad_v2``, its ``validation`` split: the same 11,873 questions as
``dev-v2.0.json``).

The few-label split (:func:`split_by_article`) is deterministic and independent of the seed:
articles are ordered by the SHA-256 of their title, then the first ``qa.test_articles`` are the
held-out test set, the next ``qa.dev_articles`` the dev articles, the next ``qa.labeled_articles``
the labelled pool, and the rest the unlabelled pool. The seed only picks which questions of the
labelled pool are labelled (``data.num_labeled``, half answerable and half unanswerable as far as
the pool allows; 0 takes every question of the pool) and which dev questions are kept (``data.dev_size``).

An example is a dict ``{"id", "title", "context", "question", "answers": [{"text", "answer_start"}],
"is_impossible"}``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from tasks.qa.synthetic import QUESTION_SUFFIX, QUESTION_TOKEN
from uda.data import DataError, resolve_data_path
from uda.hub import hub_reachable

SQUAD_V2_HUB_ID = "rajpurkar/squad_v2"


# ----------------------------------------------------------------------------- loading

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


def load_squad_hub(hub_id: str) -> list[dict]:
    """The hub dataset's validation split (columns id, title, context, question, answers)."""
    if not hub_reachable():
        raise DataError(f"no local SQuAD data given and the hub is unreachable (to load '{hub_id}'); pass "
                        f"--data.path /path/to/dev-v2.0.json (the official SQuAD 2.0 json) or set UDA_DATA_PATH")
    from datasets import load_dataset

    ds = load_dataset(hub_id, split="validation")
    out = []
    for r in ds:
        ans = r["answers"]
        answers = [{"text": t, "answer_start": int(s)} for t, s in zip(ans["text"], ans["answer_start"])]
        out.append({"id": str(r["id"]), "title": str(r["title"]), "context": r["context"],
                    "question": r["question"], "answers": answers, "is_impossible": not answers})
    return out


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


def load_squad_examples(data_cfg: Any) -> tuple[list[dict], str]:
    """(validated examples, source description) from ``data.path`` / UDA_DATA_PATH / the hub."""
    path = resolve_data_path(data_cfg)
    if path:
        examples = load_squad_file(path)
        source = str(find_squad_json(Path(path).expanduser()))
    else:
        hub_id = data_cfg.hub_id or SQUAD_V2_HUB_ID
        examples = load_squad_hub(hub_id)
        source = f"hub:{hub_id} (validation)"
    if not examples:
        raise DataError(f"'{source}' holds no questions")
    validate_examples(examples, source)
    return examples, source


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


def require_unlabeled(unlabeled: Sequence[dict], lambda_u: float, section: str) -> None:
    """A clear error when the consistency loss is on but the split left no unlabelled question."""
    if lambda_u > 0 and not unlabeled:
        raise DataError(f"uda.lambda_u={lambda_u} needs unlabelled questions, but the split leaves none: "
                        f"--{section}.labeled_articles takes every article that is not test or dev, and "
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
    trained = json.loads((run / "data_info.json").read_text(encoding="utf-8")).get("articles") or {}
    seen = set(trained.get("labeled_pool", [])) | set(trained.get("unlabeled_pool", []))
    leaked = sorted(seen & (set(articles.get("test", [])) | set(articles.get("dev", []))))
    if leaked:
        raise DataError(f"the starting model '{p}' comes from the run '{run}', which trained on {len(leaked)} of this "
                        f"run's dev/test articles (the first: {leaked[:3]}): start from a reader trained with the same "
                        f"test_articles and dev_articles, or from a pretrained encoder")


# ----------------------------------------------------------------------------- features

def question_suffix(tokenizer: Any) -> str:
    """`` [QUESTION].`` when the tokenizer knows the ``[QUESTION]`` token (a start built by
    ``uda-qa-start``, whose synthetic questions point at their answer from that token), else ''."""
    unk = tokenizer.unk_token_id
    tid = tokenizer.convert_tokens_to_ids(QUESTION_TOKEN)
    return QUESTION_SUFFIX if tid is not None and tid != unk else ""


def clip_questions(tokenizer: Any, questions: Sequence[str], max_question_length: int,
                   mark: bool = True) -> list[str]:
    """Questions without leading whitespace (some SQuAD questions have a lot), cut to at most
    ``max_question_length`` tokens (cut at a token boundary of the original text). With ``mark`` and a
    tokenizer that knows ``[QUESTION]`` (:func:`question_suffix`), each question then ends in
    `` [QUESTION].``, inside the same token budget."""
    suffix = question_suffix(tokenizer) if mark else ""
    budget = max(1, max_question_length - (len(tokenizer.tokenize(suffix)) if suffix else 0))
    out = [q.lstrip() for q in questions]
    enc = tokenizer(out, add_special_tokens=False, return_offsets_mapping=True)
    for i, offsets in enumerate(enc["offset_mapping"]):
        if len(offsets) > budget:
            out[i] = out[i][:offsets[budget - 1][1]]
    return [q.rstrip() + suffix for q in out] if suffix else out


def build_features(tokenizer: Any, examples: Sequence[dict], max_length: int, doc_stride: int,
                   max_question_length: int, with_labels: bool, mark: bool = True) -> list[dict]:
    """Tokenise (question, context) pairs into features; a long context becomes several windows.

    ``doc_stride`` is the number of context tokens consecutive windows share (the ``stride`` of
    transformers tokenizers, as in its run_qa example). Each feature holds ``input_ids``,
    ``token_type_ids`` (when the tokenizer makes them), ``example_index``, ``id`` (the question's id,
    when the example has one: a run's ``labeled_ids.txt`` is written from it), ``offsets`` (the
    character span of each token in the context; None for question, special and padding tokens) and
    ``span_mask`` (True at position 0, the no-answer slot, and at context tokens). ``mark``: questions
    end in `` [QUESTION].`` when the tokenizer knows that token (:func:`clip_questions`). With labels:
    ``start_position``/``end_position`` of the first gold answer's tokens, both 0 (the first token)
    when the question is unanswerable or the answer is not wholly inside this window, and
    ``answerable`` (1 when this window holds the answer, else 0).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("QA features need a fast tokenizer (offset mappings)")
    if tokenizer.padding_side != "right":
        raise ValueError("QA features need a tokenizer that pads on the right (the question comes first)")
    questions = clip_questions(tokenizer, [e["question"] for e in examples], max_question_length, mark)
    enc = tokenizer(questions, [e["context"] for e in examples], truncation="only_second", max_length=max_length,
                    stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True)
    features = []
    for f, ex_idx in enumerate(enc["overflow_to_sample_mapping"]):
        seq = enc.sequence_ids(f)
        offsets = [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][f], seq)]
        feat = {"input_ids": enc["input_ids"][f], "example_index": int(ex_idx), "offsets": offsets,
                "span_mask": [i == 0 or s == 1 for i, s in enumerate(seq)]}
        if examples[ex_idx].get("id") is not None:
            feat["id"] = str(examples[ex_idx]["id"])
        if "token_type_ids" in enc:
            feat["token_type_ids"] = enc["token_type_ids"][f]
        if with_labels:
            start, end = _label_span(examples[ex_idx], offsets)
            feat.update(start_position=start, end_position=end, answerable=int(start > 0))
        features.append(feat)
    return features


def _label_span(example: dict, offsets: Sequence[Optional[tuple]]) -> tuple[int, int]:
    """Token (start, end) of the first gold answer inside this window, or (0, 0)."""
    if example["is_impossible"] or not example["answers"]:
        return 0, 0
    a = example["answers"][0]
    start_char, end_char = a["answer_start"], a["answer_start"] + len(a["text"])
    ctx = [i for i, o in enumerate(offsets) if o is not None]
    if not ctx or offsets[ctx[0]][0] > start_char or offsets[ctx[-1]][1] < end_char:
        return 0, 0
    # the token holding the first answer character, and the one holding the last
    start = next(i for i in ctx if offsets[i][1] > start_char)
    end = next(i for i in reversed(ctx) if offsets[i][0] < end_char)
    return start, end


def collate_features(tokenizer: Any, features: Sequence[dict], with_labels: bool) -> dict:
    """Pad features (right) into model inputs + ``span_mask`` (+ labels)."""
    import torch

    keys = ["input_ids"] + (["token_type_ids"] if "token_type_ids" in features[0] else [])
    batch = dict(tokenizer.pad([{k: f[k] for k in keys} for f in features], return_tensors="pt"))
    width = batch["input_ids"].shape[1]
    batch["span_mask"] = torch.tensor([f["span_mask"] + [False] * (width - len(f["span_mask"])) for f in features],
                                      dtype=torch.bool)
    if with_labels:
        for k in ("start_position", "end_position", "answerable"):
            batch[k] = torch.tensor([f[k] for f in features], dtype=torch.long)
    return batch


def describe_features(features: Sequence[dict]) -> dict:
    return {"features": len(features),
            "answerable_features": sum(f.get("answerable", 0) for f in features),
            "max_features_per_example": max((sum(1 for _ in g) for g in _groups(features)), default=0)}


def _groups(features: Sequence[dict]):
    by: dict[int, list] = {}
    for f in features:
        by.setdefault(f["example_index"], []).append(f)
    return by.values()


def split_for_config(cfg: Any) -> tuple[dict, str]:
    """(few_label_split of the file, its source) as a run with config ``cfg`` (a squad_v2 Config) has it."""
    examples, source = load_squad_examples(cfg.data)
    split = few_label_split(
        examples, num_labeled=cfg.data.num_labeled, dev_size=cfg.data.dev_size,
        test_articles=cfg.qa.test_articles, dev_articles=cfg.qa.dev_articles,
        labeled_articles=cfg.qa.labeled_articles, unlabeled_from_train=cfg.data.unlabeled_from_train,
        max_unlabeled=cfg.data.max_unlabeled, max_test=cfg.data.max_test, seed=cfg.seed)
    return split, source
