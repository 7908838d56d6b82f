"""The squad_v2 task's data: its SQuAD 2.0 questions and their split as a run's config has them.

Sources: ``data.path`` (or the ``UDA_DATA_PATH`` environment variable), a json file in the official
SQuAD layout or a folder holding one (``dev-v2.0.json`` is preferred, else the only ``*.json``);
otherwise the hub dataset ``data.hub_id`` (``rajpurkar/squad_v2``, its ``validation`` split: the same
11,873 questions as ``dev-v2.0.json``). The file layout, the examples and the few-label split by
article: tasks/common/squad.py; the tokenised windows: tasks/common/windows.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from tasks.common.squad import few_label_split, find_squad_json, load_squad_file, validate_examples
from uda.data import DataError, resolve_data_path
from uda.hub import hub_reachable

SQUAD_V2_HUB_ID = "rajpurkar/squad_v2"


# ----------------------------------------------------------------------------- loading

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


# ----------------------------------------------------------------------------- features and split

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
