"""Shipping a model class and a pipeline beside saved weights, so that transformers' Auto classes and
``pipeline(..., trust_remote_code=True)`` load a reader or classifier of this library whole: what the
text and QA exports share."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any


def ship_model_code(out: Path, base_class: type, file_name: str, source: str, auto_class: str, model_class: str,
                    pipeline_task: str, pipeline_class: str, settings: dict[str, Any], fallback: str) -> bool:
    """Write ``source`` (a modeling file built on ``base_class``) as ``out/file_name`` and register in
    config.json its ``model_class`` for ``auto_class``, its ``pipeline_class`` for ``pipeline_task``, and
    ``settings`` (more config entries). False, with a warning naming ``fallback`` (how to load the folder
    instead), when ``base_class`` is not one of transformers' own (a model loaded with remote code)."""
    import transformers

    name = base_class.__name__
    if getattr(transformers, name, None) is not base_class:
        warnings.warn(f"{out}: the class {name} is not one of transformers' own, so no {file_name} is saved: "
                      f"transformers' loaders read this folder without the library's heads; load it with {fallback}",
                      stacklevel=3)
        return False
    (out / file_name).write_text(source, encoding="utf-8")
    config_path = out / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    module = file_name[:-len(".py")]
    config["architectures"] = [model_class]
    config.setdefault("auto_map", {})[auto_class] = f"{module}.{model_class}"
    config["custom_pipelines"] = {pipeline_task: {"impl": f"{module}.{pipeline_class}", "pt": [auto_class],
                                                  "type": "text"}}
    config.update(settings)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return True
