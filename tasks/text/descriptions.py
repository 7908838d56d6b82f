"""The label descriptions a zero-shot start reads (``TextClassificationTask``), from wherever the user
wrote them: ``--model.label_descriptions`` (a list in label order), a JSON file mapping labels to
descriptions (``--model.label_descriptions_file``, or ``labels.json`` in the ``--data.path`` folder with
``--model.zero_shot_start``), or ``--model.label_template`` filled with the label names."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional, Sequence

from uda.config import ConfigError
from uda.data import DataError

LABELS_FILE = "labels.json"
_INT = re.compile(r"^\d+$")


def template_description(template: str, name: str) -> str:
    """``template`` with ``{name}`` replaced by ``name`` lower-cased, underscores as spaces."""
    return template.replace("{name}", " ".join(name.replace("_", " ").split()).lower())


def read_labels_file(path: Path, label_names: Sequence[str]) -> list[str]:
    """The descriptions of ``path`` (a JSON object: label name, or integer label as a string ->
    description) in label order; a DataError names the file and what is wrong with it."""
    try:
        mapping = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"label descriptions file '{path}' could not be read as JSON ({e}); it must be an "
                        f"object mapping each label to its description") from None
    names = list(label_names)
    expected = ", ".join(f"'{n}'" for n in names)
    if not isinstance(mapping, dict):
        raise DataError(f"label descriptions file '{path}' holds a {type(mapping).__name__}; it must be a JSON "
                        f"object mapping each label ({expected}) to its description")
    index = {n: i for i, n in enumerate(names)}
    out: list[Optional[str]] = [None] * len(names)
    for key, text in mapping.items():
        c = index.get(key.strip())
        if c is None and _INT.match(key.strip()) and int(key) < len(names):
            c = int(key)
        if c is None:
            raise DataError(f"label descriptions file '{path}' names the unknown label '{key}'; the data's labels "
                            f"are {expected} (or their indices 0..{len(names) - 1}): fix or remove it")
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"label descriptions file '{path}': the description of '{key}' must be a non-empty "
                            f"text, got {text!r}")
        if out[c] is not None:
            raise DataError(f"label descriptions file '{path}' describes label '{names[c]}' twice (by name and by "
                            f"index); keep one")
        out[c] = text
    missing = [f"'{names[c]}'" for c in range(len(names)) if out[c] is None]
    if missing:
        raise DataError(f"label descriptions file '{path}' has no description of label(s) {', '.join(missing)}; "
                        f"it must describe every class ({expected})")
    return [t for t in out if t is not None]


def resolve_label_descriptions(model: Any, label_names: Sequence[str], data_path: Optional[str],
                               names_from: str = "") -> tuple[Optional[list[str]], Optional[dict]]:
    """(descriptions in label order, or None for a random head; what data_info.json records about them).

    The first of: ``model.label_descriptions``; ``model.label_descriptions_file``; with
    ``model.zero_shot_start``, ``labels.json`` in the ``data_path`` folder, then ``model.label_template``
    filled with the label names (not for labels that are bare indices: ``names_from`` 'class indices')."""
    names = [str(n) for n in label_names]
    if model.label_descriptions is not None:
        texts, source = [str(t) for t in model.label_descriptions], "model.label_descriptions"
        if len(texts) != len(names):
            raise ConfigError(f"--model.label_descriptions has {len(texts)} texts but the data has {len(names)} "
                              f"classes ({', '.join(names)}): give one description per class, in that order")
    elif model.label_descriptions_file:
        path = Path(model.label_descriptions_file).expanduser()
        if not path.is_file() and data_path and not path.is_absolute() and (Path(data_path) / path).is_file():
            path = Path(data_path) / path  # a bare name is looked up in the data folder
        if not path.is_file():
            raise DataError(f"--model.label_descriptions_file '{model.label_descriptions_file}' does not exist; "
                            f"fix the path (a JSON object mapping each label to its description)")
        texts, source = read_labels_file(path, names), f"model.label_descriptions_file {path}"
    elif not model.zero_shot_start:
        return None, None
    elif data_path and Path(data_path).is_dir() and (Path(data_path) / LABELS_FILE).is_file():
        path = Path(data_path) / LABELS_FILE
        texts, source = read_labels_file(path, names), f"{LABELS_FILE} {path}"
    else:
        if names_from == "class indices":
            raise DataError(f"--model.zero_shot_start: the classes have no names (integer labels 0..{len(names) - 1}"
                            f"), so --model.label_template has nothing to fill in; write {LABELS_FILE} in the data "
                            f"folder (label -> description), or give --model.label_descriptions (one text per "
                            f"class, in label order) or --data.label_names")
        texts = [template_description(model.label_template, n) for n in names]
        source = f"model.label_template {model.label_template!r}"
    return texts, {"source": source, "texts": dict(zip(names, texts))}
