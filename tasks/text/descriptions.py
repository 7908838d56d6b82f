"""The class descriptions that the head's zero-shot start reads (``--model.head_init descriptions``),
from wherever the user wrote them: ``--model.label_descriptions`` as a list in label order, a JSON file
of descriptions or a template with ``{label}``; when it is not given, ``labels.json`` in the
``--data.path`` folder, else :data:`DEFAULT_TEMPLATE` filled with the class names."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional, Sequence

from tasks.text.config import LABEL_SLOT
from uda.config import ConfigError
from uda.data import DataError

LABELS_FILE = "labels.json"
DEFAULT_TEMPLATE = f"This text is about {LABEL_SLOT}."
_INT = re.compile(r"^\d+$")


def template_description(template: str, name: str) -> str:
    """``template`` with ``{label}`` replaced by ``name`` lower-cased, underscores as spaces."""
    return template.replace(LABEL_SLOT, " ".join(name.replace("_", " ").split()).lower())


def _check_count(texts: Sequence[str], names: Sequence[str], where: str, error: type = ConfigError) -> None:
    """One description per class: else ``error`` (a file's texts: DataError) names ``where`` they came from."""
    if len(texts) != len(names):
        raise error(f"{where} has {len(texts)} texts but the data has {len(names)} classes "
                          f"({', '.join(names)}): give one description per class, in that order")


def _by_label(mapping: dict, names: list[str], path: Path) -> list[str]:
    """The descriptions of a {label name or integer label as a string: description} object, in label order."""
    expected = ", ".join(f"'{n}'" for n in names)
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


def read_labels_file(path: Path, label_names: Sequence[str]) -> list[str]:
    """The descriptions of ``path`` in label order: a JSON object mapping each label name, or integer
    label as a string, to its description (labels.json), or a JSON list of one text per class. A
    DataError names the file and what is wrong with it."""
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"label descriptions file '{path}' could not be read as JSON ({e}); it must be an "
                        f"object mapping each label to its description, or a list of them in label order") from None
    names = [str(n) for n in label_names]
    if isinstance(content, dict):
        return _by_label(content, names, path)
    if not isinstance(content, list):
        raise DataError(f"label descriptions file '{path}' holds a {type(content).__name__}; it must be a JSON "
                        f"object mapping each label ({', '.join(names)}) to its description, or a list of them "
                        f"in label order")
    if not all(isinstance(t, str) and t.strip() for t in content):
        raise DataError(f"label descriptions file '{path}': every description must be a non-empty text, got "
                        f"{content!r}")
    _check_count(content, names, f"label descriptions file '{path}'", DataError)
    return list(content)


def _descriptions_file(value: str, data_path: Optional[str]) -> Optional[Path]:
    """``value`` as a file: as given, else in the ``data_path`` folder (a bare name); None when neither is."""
    path = Path(value).expanduser()
    if not path.is_file() and data_path and not path.is_absolute() and (Path(data_path) / path).is_file():
        path = Path(data_path) / path
    return path if path.is_file() else None


def _from_template(template: str, names: list[str], names_from: str, where: str) -> list[str]:
    if names_from == "class indices":
        raise DataError(f"{where}: the classes have no names (integer labels 0..{len(names) - 1}), so the "
                        f"template {template!r} has nothing to fill in; write {LABELS_FILE} in the data folder "
                        f"(label -> description), or give --model.label_descriptions (one text per class, in "
                        f"label order, or a JSON file of them) or --data.label_names")
    return [template_description(template, n) for n in names]


def _from_option(value: Any, names: list[str], data_path: Optional[str], names_from: str) -> tuple[list[str], str]:
    """(descriptions, source) of ``model.label_descriptions``: a list, a template or a file."""
    if isinstance(value, list):
        texts = [str(t) for t in value]
        _check_count(texts, names, "--model.label_descriptions")
        return texts, "model.label_descriptions"
    if LABEL_SLOT in value:
        where = "--model.label_descriptions"
        return _from_template(value, names, names_from, where), f"model.label_descriptions template {value!r}"
    path = _descriptions_file(value, data_path)
    if path is None:
        raise DataError(f"--model.label_descriptions '{value}' is not a file (not found as given"
                        f"{' nor in the data folder' if data_path else ''}) and not a template (it has no "
                        f"{LABEL_SLOT}); give a JSON file of descriptions, a template such as "
                        f"{DEFAULT_TEMPLATE!r}, or a list of one text per class")
    return read_labels_file(path, names), f"model.label_descriptions file {path}"


def resolve_label_descriptions(model: Any, label_names: Sequence[str], data_path: Optional[str],
                               names_from: str = "") -> tuple[Optional[list[str]], Optional[dict]]:
    """(descriptions in label order, or None for a random head; what data_info.json records about them).

    With ``model.head_init`` descriptions, the first of: ``model.label_descriptions``; ``labels.json``
    in the ``data_path`` folder; :data:`DEFAULT_TEMPLATE` filled with the class names (not for labels
    that are bare indices: ``names_from`` 'class indices'). Every source gives one text per class."""
    if model.head_init != "descriptions":
        return None, None
    names = [str(n) for n in label_names]
    if model.label_descriptions is not None:
        texts, source = _from_option(model.label_descriptions, names, data_path, names_from)
    elif data_path and Path(data_path).is_dir() and (Path(data_path) / LABELS_FILE).is_file():
        path = Path(data_path) / LABELS_FILE
        texts, source = read_labels_file(path, names), f"{LABELS_FILE} {path}"
    else:
        texts = _from_template(DEFAULT_TEMPLATE, names, names_from, "--model.head_init descriptions")
        source = f"template {DEFAULT_TEMPLATE!r}"
    return texts, {"source": source, "texts": dict(zip(names, texts))}
