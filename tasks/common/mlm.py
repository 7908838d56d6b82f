"""Task-adaptive masked-LM pretraining of the encoder on the unlabelled pool (``--model.mlm_steps``).

UDA's strongest IMDB result started from BERT whose masked-LM pretraining had been continued on IMDB
text before fine-tuning (Xie et al. 2019, section 4; "task-adaptive pretraining" in Gururangan et
al. 2020). This stage does that before consistency training: ``transformers.AutoModelForMaskedLM``
on the encoder, BERT's masking (``DataCollatorForLanguageModeling``: 15% of the tokens, of which 80%
become [MASK], 10% a random token, 10% stay), a short visible AdamW loop; the encoder part is saved,
and the classifier (or the contrastive stage) is then built from it exactly as from any encoder.

The output depends only on the encoder, the texts (their identity and order), the seed and the
settings, so it is cached under ``$UDA_CACHE/mlm/<key>`` (default ``~/.cache/uda``): a resumed run,
and the supervised and UDA runs of a sweep that share a pool and a seed, reuse it. The stage draws
from torch's global RNG inside a fork of it, so the run's later draws (the classifier's new head)
are the same whether the encoder was trained now or read from the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch

from uda.io import cache_home, staged_cache_folder, text_hash

FORMAT = "uda-mlm/1"  # bump when the loop's fixed choices below change what a setting produces
WEIGHT_DECAY = 0.01   # BERT's
WARMUP_SHARE = 0.1    # linear warm-up over the first 10% of the steps, then linear decay to 0
MAX_GRAD_NORM = 1.0
# what sentence-transformers reads beside the weights (pooling, normalisation): copied from a local
# encoder so that the contrastive stage, run after this one, sees the same sentence encoder
_SENTENCE_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")
_SENTENCE_MODULE_DIR = re.compile(r"^\d+_\w+$")  # 1_Pooling, 2_Normalize


def cache_root() -> Path:
    return cache_home() / "mlm"


def text_window(texts: Sequence[str], start: int, size: int) -> list[str]:
    """``size`` texts from position ``start`` (mod ``len(texts)``), wrapping round to the start: the
    stage reads the texts in the order given, a batch at a time (one slice, or two at the wrap)."""
    n, out = len(texts), []
    while len(out) < size:
        a = (start + len(out)) % n
        out.extend(texts[a:min(n, a + size - len(out))])
    return out


def train_mlm(model: torch.nn.Module, tokenizer: Any, texts: Sequence[str], *, steps: int, batch_size: int,
              lr: float, probability: float, max_length: int, seed: int) -> list[float]:
    """Continue the masked-LM training of ``model`` (an ``AutoModelForMaskedLM``, on its device) on
    ``texts``, read in order and cycled; tokens are cut to ``max_length`` on the tokenizer's truncation
    side. Returns the loss of every step that had a masked token. Masks come from the collator's own
    generator (seeded); dropout from torch's global RNG, which the caller seeds."""
    from transformers import DataCollatorForLanguageModeling, get_linear_schedule_with_warmup

    from uda.optim import param_groups

    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability, seed=seed)
    optimizer = torch.optim.AdamW(param_groups(model, WEIGHT_DECAY, lr), lr=lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(WARMUP_SHARE * steps), steps)
    device = next(model.parameters()).device
    losses = []
    model.train()
    for step in range(steps):
        batch_texts = text_window(texts, step * batch_size, batch_size)
        enc = tokenizer(batch_texts, truncation=True, max_length=max_length, return_special_tokens_mask=True)
        batch = collator([{k: enc[k][i] for k in enc} for i in range(len(batch_texts))])  # pads, masks
        batch = {k: v.to(device) for k, v in batch.items()}  # labels: -100 except at the masked tokens
        if not (batch["labels"] >= 0).any():  # nothing masked (a batch of very short texts): no loss
            scheduler.step()
            continue
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def mlm_encoder(model_path: str, texts: Sequence[str], *, seed: int, max_length: int, truncation_side: str = "right",
                steps: int, batch_size: int = 32, lr: float = 5e-5, probability: float = 0.15,
                text_hashes: Optional[Sequence[bytes]] = None, trust_remote_code: bool = False,
                cache_dir: Optional[Path] = None) -> Path:
    """Continue the masked-LM pretraining of the encoder at ``model_path`` on ``texts`` for ``steps``
    steps; returns the folder of the trained encoder (loadable with transformers' Auto classes).

    ``texts`` is any sequence of strings, read in the order given a slice at a time (shuffle it
    beforehand; the unlabelled pool's view reads each slice from disk). ``text_hashes``: one key per
    text that identifies it (the pool's 16-byte ``text_hashes()``), for the cache key; by default each
    text is hashed as the texts are streamed once."""
    from tqdm.auto import tqdm

    settings = {"model": str(Path(model_path).resolve()) if Path(model_path).exists() else model_path,
                "seed": seed, "max_length": max_length, "truncation_side": truncation_side, "steps": steps,
                "batch_size": batch_size, "lr": lr, "probability": probability, "texts": len(texts),
                "format": FORMAT}
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    if text_hashes is None:
        for a in range(0, len(texts), 1024):
            for t in texts[a:a + 1024]:
                h.update(text_hash(t))
    else:
        keys = np.asarray(text_hashes, dtype="S16")  # (n,) 16 bytes each, as text_hash gives them
        if len(keys) != len(texts):
            raise ValueError(f"{len(keys)} text hashes for {len(texts)} texts")
        h.update(keys.tobytes())
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    folder = root / h.hexdigest()[:32]
    if (folder / "DONE").is_file():
        tqdm.write(f"MLM stage: reusing the encoder cached at {folder / 'encoder'}")
        return folder / "encoder"
    if not len(texts):
        raise ValueError("the MLM stage needs at least one text")

    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

    local = Path(model_path).is_dir()
    tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    if tokenizer.mask_token is None:
        raise ValueError(f"the tokenizer of '{model_path}' has no mask token: it cannot be trained as a masked LM "
                         f"(drop --model.mlm_steps)")
    tokenizer.truncation_side = truncation_side
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # torch's global RNG (the fresh MLM head's initialisation, dropout) in a fork: the caller's stream
    # is left where it was, whether the encoder is trained here or read from the cache
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        # A checkpoint saved without its MLM head (a sentence encoder such as all-MiniLM-L6-v2, or a
        # BertModel) gets a freshly initialised transform + bias; the decoder matrix is not new: it
        # is tied to the input word embeddings (tie_word_embeddings, checked below), as in BERT.
        model = AutoModelForMaskedLM.from_pretrained(model_path, trust_remote_code=trust_remote_code,
                                                     local_files_only=local)
        out_emb, in_emb = model.get_output_embeddings(), model.get_input_embeddings()
        if out_emb is not None and out_emb.weight is not in_emb.weight:
            tqdm.write(f"MLM stage: the decoder of '{model_path}' is not tied to its word embeddings; "
                       f"a fresh one would start untrained")
        model.to(device)
        losses = train_mlm(model, tokenizer, texts, steps=steps, batch_size=batch_size, lr=lr,
                           probability=probability, max_length=max_length, seed=seed)

    # The masked-LM class builds its base model without the pooler (BERT: add_pooling_layer=False);
    # the encoder saved is the original base model, pooler included, with the trained weights laid
    # over it, so that --model.pooling cls reads the pretrained pooler and not a fresh one.
    encoder = AutoModel.from_pretrained(model_path, trust_remote_code=trust_remote_code, local_files_only=local)
    missing, unexpected = encoder.load_state_dict(model.base_model.state_dict(), strict=False)
    if unexpected or any(not k.startswith("pooler.") for k in missing):
        raise RuntimeError(f"the masked-LM model of '{model_path}' does not match its base model "
                           f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
    window = max(1, min(10, len(losses) // 2))
    record = {**settings, "losses": [round(x, 5) for x in losses],
              "loss_first": sum(losses[:window]) / window if losses else None,
              "loss_last": sum(losses[-window:]) / window if losses else None}
    with staged_cache_folder(folder, record) as staged:
        encoder.save_pretrained(staged / "encoder")
        tokenizer.save_pretrained(staged / "encoder")
        if local:
            for name in os.listdir(model_path):
                src = Path(model_path) / name
                if name in _SENTENCE_FILES and src.is_file():
                    shutil.copy(src, staged / "encoder" / name)
                elif _SENTENCE_MODULE_DIR.match(name) and src.is_dir():
                    shutil.copytree(src, staged / "encoder" / name)
    summary = (f"loss {record['loss_first']:.3f} -> {record['loss_last']:.3f} (mean of the first and last "
               f"{window} step{'s' if window > 1 else ''})" if losses else "no step had a masked token")
    tqdm.write(f"MLM stage: trained {steps} steps on {len(texts)} texts, {summary}; encoder cached at "
               f"{folder / 'encoder'}")
    return folder / "encoder"
