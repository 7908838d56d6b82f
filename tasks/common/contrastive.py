"""A SetFit-style contrastive stage before consistency training (``--model.contrastive_iterations``).

SetFit (Tunstall et al. 2022) fine-tunes a sentence encoder on pairs of the labelled examples (same
label: cosine similarity 1, different labels: 0) before fitting a classifier; with a few dozen
labels this separates the classes in the encoder's space far better than the pretrained encoder
does, which is what UDA's sharpened targets need to start from. The stage is the ``setfit`` package's
own trainer (its pair sampling, loss and schedule), not a re-implementation; the result is an
encoder folder that the classifier is then built from.

The output depends only on the encoder, the labelled texts and labels, the seed and the settings,
so it is cached under ``$UDA_CACHE/contrastive/<key>`` (default ``~/.cache/uda``): a resumed run, and
the supervised and UDA runs of a sweep that share a labelled set, reuse it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Optional, Sequence

from uda.io import cache_home, staged_cache_folder
from uda.devices import kept_accelerate_state


def cache_root() -> Path:
    return cache_home() / "contrastive"


def contrastive_encoder(model_path: str, texts: Sequence[str], labels: Sequence[int], *, seed: int,
                        max_length: int, truncation_side: str = "right", iterations: int = 20, epochs: int = 1,
                        batch_size: int = 16, lr: float = 2e-5, cache_dir: Optional[Path] = None) -> Path:
    """Fine-tune the encoder at ``model_path`` on pairs of (texts, labels) with SetFit's trainer;
    returns the folder of the fine-tuned encoder (loadable with transformers' Auto classes)."""
    settings = {"model": str(Path(model_path).resolve()) if Path(model_path).exists() else model_path,
                "seed": seed, "max_length": max_length, "truncation_side": truncation_side,
                "iterations": iterations, "epochs": epochs, "batch_size": batch_size, "lr": lr,
                "format": "uda-contrastive/1"}
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for t, y in zip(texts, labels):
        h.update(t.encode("utf-8") + b"\0" + str(int(y)).encode() + b"\0")
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    folder = root / h.hexdigest()[:32]
    if (folder / "DONE").is_file():
        return folder / "encoder"
    try:
        from datasets import Dataset
        from setfit import SetFitModel, Trainer, TrainingArguments
        from transformers import set_seed
    except ImportError as e:
        raise ImportError(f"--model.contrastive_iterations needs the setfit package ({e}); pip install "
                          f"setfit==1.2.0 after torch (see requirements.txt)") from None

    set_seed(seed)
    model = SetFitModel.from_pretrained(model_path, local_files_only=Path(model_path).is_dir())
    body = model.model_body
    body.max_seq_length = max_length
    body.tokenizer.truncation_side = truncation_side
    data = Dataset.from_dict({"text": list(texts), "label": [int(y) for y in labels]})
    with kept_accelerate_state(), staged_cache_folder(folder, {**settings, "examples": len(texts)}) as staged:
        args = TrainingArguments(output_dir=str(staged.parent / "work"), num_iterations=iterations,
                                 num_epochs=epochs, batch_size=batch_size, body_learning_rate=lr, seed=seed,
                                 max_length=max_length, save_strategy="no", report_to="none", logging_steps=10**9,
                                 logging_first_step=False, show_progress_bar=False)
        # the body only: the classifier is ours (trained by the loop), not SetFit's logistic regression
        trainer = Trainer(model=model, args=args, train_dataset=data)
        trainer.train_embeddings(*trainer.dataset_to_parameters(data), args=args)
        transformer = body[0].auto_model  # the Hugging Face encoder inside the sentence-transformers body
        transformer.save_pretrained(staged / "encoder")
        body.tokenizer.save_pretrained(staged / "encoder")
    return folder / "encoder"
