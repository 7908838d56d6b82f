"""Task-adaptive masked-LM pretraining of the encoder on the unlabelled pool (``--model.mlm_steps``).

UDA's strongest IMDB result started from BERT whose masked-LM pretraining had been continued on IMDB
text before fine-tuning (Xie et al. 2019, section 4; "task-adaptive pretraining" in Gururangan et
al. 2020). This stage does that before consistency training: a task of its own (:class:`MLMTask`),
trained by the training loop (``uda.train.train``) with no dev or test set, on
``transformers.AutoModelForMaskedLM`` with BERT's masking (``DataCollatorForLanguageModeling``: 15%
of the tokens, of which 80% become [MASK], 10% a random token, 10% stay), AdamW with a linear warm-up
over the first 10% of the steps, then linear decay, and gradients clipped at norm 1 (:func:`stage_config`).
The encoder part is saved, and the classifier (or the contrastive stage) is then built from it exactly
as from any encoder.

The output depends only on the encoder, the texts (their identity and order), the seed and the
settings, so it is cached under ``$UDA_CACHE/mlm/<key>`` (default ``~/.cache/uda``): ``encoder/``,
``settings.json`` (the settings and the loss of every step), the stage's ``metrics.jsonl`` and ``DONE``.
A resumed run, and the supervised and UDA runs of a sweep that share a pool and a seed, reuse it. The
stage's run folder is a temporary one beside the cache entry (a stage stopped before it finished
starts over). The Python, NumPy and torch RNG states are put back after the stage, so the run's later
draws (the classifier's new head) are the same whether the encoder was trained now or read from the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from uda.io import cache_home, staged_cache_folder, text_hash
from uda.task import RunContext, SupervisedOutput, Task, TaskData

FORMAT = "uda-mlm/2"  # bump when the stage's fixed choices below change what a setting produces
WEIGHT_DECAY = 0.01   # BERT's
WARMUP_SHARE = 0.1    # linear warm-up over the first 10% of the steps, then linear decay to 0
MAX_GRAD_NORM = 1.0
# what sentence-transformers reads beside the weights (pooling, normalisation): copied from a local
# encoder so that the contrastive stage, run after this one, sees the same sentence encoder
_SENTENCE_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")
_SENTENCE_MODULE_DIR = re.compile(r"^\d+_\w+$")  # 1_Pooling, 2_Normalize


def cache_root() -> Path:
    return cache_home() / "mlm"


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> SupervisedOutput:
    """The masked-LM loss as per-example terms whose mean over the batch is the mean cross-entropy over
    the batch's masked tokens (what ``AutoModelForMaskedLM`` computes): example i's term is the sum of
    its tokens' cross-entropies times B / (masked tokens in the batch). A batch with no masked token
    gives 0. Also each example's gold probability (exp of its mean token cross-entropy) and the share
    of its masked tokens predicted right.

    logits: (B, T, V); labels: (B, T), -100 except at the masked tokens."""
    masked = labels >= 0  # (B, T)
    ce = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), reduction="none").view_as(labels)  # (B, T)
    per_example = ce.sum(1) * (labels.shape[0] / masked.sum().clamp(min=1))  # (B,)
    n = masked.sum(1).clamp(min=1)  # (B,)
    gold_prob = torch.exp(-ce.sum(1).detach() / n)
    correct = ((logits.argmax(-1) == labels) & masked).sum(1) / n
    return SupervisedOutput(per_example_loss=per_example, gold_prob=gold_prob, correct=correct.float())


class MLMTask(Task):
    """Masked-LM training on ``texts`` (any sequence of strings): its examples are positions in
    ``texts``, read a batch at a time and masked by the collator's own seeded generator (saved in
    checkpoints); no dev or test set."""

    name = "mlm"

    def __init__(self, texts: Sequence[str], probability: float = 0.15, trust_remote_code: bool = False) -> None:
        self.texts, self.probability, self.trust_remote_code = texts, probability, trust_remote_code
        self.tokenizer: Any = None
        self.collator: Any = None
        self.max_length = 128

    def setup(self, cfg: Any, run: RunContext) -> TaskData:
        from transformers import AutoTokenizer, DataCollatorForLanguageModeling

        path = cfg.model.name_or_path
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=self.trust_remote_code)
        if self.tokenizer.mask_token is None:
            raise ValueError(f"the tokenizer of '{path}' has no mask token: it cannot be trained as a masked LM "
                             f"(drop --model.mlm_steps)")
        self.tokenizer.truncation_side = cfg.model.truncation_side
        self.max_length = cfg.model.max_length
        self.collator = DataCollatorForLanguageModeling(self.tokenizer, mlm_probability=self.probability,
                                                        seed=cfg.seed)
        self.collator.create_rng("pt")  # now, so that a resumed run can restore its state before the first batch
        return TaskData(train=range(len(self.texts)), dev=[], test=[], unlabeled=[], info={"texts": len(self.texts)})

    def build_model(self, cfg: Any) -> torch.nn.Module:
        """The encoder with a masked-LM head. A checkpoint saved without one (a sentence encoder such as
        all-MiniLM-L6-v2, or a BertModel) gets a freshly initialised transform + bias; the decoder matrix
        is not new: it is tied to the input word embeddings (tie_word_embeddings), as in BERT."""
        from tqdm.auto import tqdm
        from transformers import AutoModelForMaskedLM

        path = cfg.model.name_or_path
        model = AutoModelForMaskedLM.from_pretrained(path, trust_remote_code=self.trust_remote_code,
                                                     local_files_only=Path(path).is_dir())
        out_emb, in_emb = model.get_output_embeddings(), model.get_input_embeddings()
        if out_emb is not None and out_emb.weight is not in_emb.weight:
            tqdm.write(f"MLM stage: the decoder of '{path}' is not tied to its word embeddings; a fresh one would "
                       f"start untrained")
        return model

    def collate_labeled(self, examples: list) -> dict:
        """Positions in the texts -> tokens cut to ``max_length`` on the tokenizer's truncation side,
        padded and masked (``labels``: -100 except at the masked tokens)."""
        texts = [self.texts[i] for i in examples]
        enc = self.tokenizer(texts, truncation=True, max_length=self.max_length, return_special_tokens_mask=True)
        return self.collator([{k: enc[k][i] for k in enc} for i in range(len(texts))])

    def supervised(self, model: torch.nn.Module, batch: dict) -> SupervisedOutput:
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits  # (B, T, V)
        return masked_lm_loss(logits, batch["labels"])

    def save(self, model: torch.nn.Module, out_dir: Any) -> None:
        """The masked-LM model (what a checkpoint resumes) and the tokenizer; :func:`export_encoder` takes
        the encoder out of it."""
        model.save_pretrained(Path(out_dir))
        self.tokenizer.save_pretrained(Path(out_dir))

    def state_dict(self) -> dict:
        return {"masks": self.collator.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.collator.generator.set_state(state["masks"])


def stage_config(run_dir: Path, model_path: str, *, seed: int, max_length: int, truncation_side: str, steps: int,
                 batch_size: int, lr: float, mixed_precision: str, trust_remote_code: bool) -> Any:
    """The training loop's config of the stage: supervised only, no TSA, the stage's fixed schedule,
    one log line a step, a checkpoint at the end only, no TensorBoard."""
    from uda.config import Config, EvalConfig, ModelConfig, TrainConfig, UDAConfig, validate

    cfg = Config(task="mlm", seed=seed, output_dir=str(run_dir), report_to="none",
                 model=ModelConfig(name_or_path=model_path, max_length=max_length, truncation_side=truncation_side,
                                   trust_remote_code=trust_remote_code),
                 train=TrainConfig(lr=lr, weight_decay=WEIGHT_DECAY, batch_size=batch_size, max_steps=steps,
                                   warmup_steps=int(WARMUP_SHARE * steps), max_grad_norm=MAX_GRAD_NORM,
                                   mixed_precision=mixed_precision, eval_every=steps, log_every=1,
                                   # the run's own precision, which the run already chose for this device
                                   allow_emulated_bf16=True),
                 uda=UDAConfig(lambda_u=0.0, tsa=None), eval=EvalConfig(test=False))
    validate(cfg)
    return cfg


def run_stage(settings: dict, texts: Sequence[str], run_dir: Path, trust_remote_code: bool) -> list[float]:
    """Train the stage ``settings`` asks for in ``run_dir`` (its masked-LM model is then in run_dir/model);
    returns the loss of every step (none in a process other than the main one). The caller's RNG states
    are as they were before."""
    import signal

    from uda.checkpoint import rng_state, set_rng_state
    from uda.train import RunStopped, train

    cfg = stage_config(run_dir, settings["model"], seed=settings["seed"], max_length=settings["max_length"],
                       truncation_side=settings["truncation_side"], steps=settings["steps"],
                       batch_size=settings["batch_size"], lr=settings["lr"],
                       mixed_precision=settings["mixed_precision"], trust_remote_code=trust_remote_code)
    kept = rng_state()
    try:
        train(cfg, MLMTask(texts, settings["probability"], trust_remote_code))
    except RunStopped as e:
        raise RunStopped(f"the MLM stage (--model.mlm_steps) was stopped by {signal.Signals(e.signum).name} before it "
                         f"finished; it is not continued: the same command trains it again", e.signum) from None
    finally:
        set_rng_state(kept)
    log = run_dir / "metrics.jsonl"  # written by the main process only
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.is_file() else []
    return [line["train/loss"] for line in lines if "train/loss" in line]


def export_encoder(mlm_dir: Path, model_path: str, out: Path, trust_remote_code: bool) -> None:
    """Save into ``out`` the encoder of the masked-LM model in ``mlm_dir``, with its tokenizer.

    The masked-LM class builds its base model without the pooler (BERT: add_pooling_layer=False); the
    encoder saved is the original base model, pooler included, with the trained weights laid over it,
    so that --model.pooling cls reads the pretrained pooler and not a fresh one. A local encoder's
    sentence-transformers files are copied beside it."""
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

    local = Path(model_path).is_dir()
    trained = AutoModelForMaskedLM.from_pretrained(mlm_dir, trust_remote_code=trust_remote_code, local_files_only=True)
    encoder = AutoModel.from_pretrained(model_path, trust_remote_code=trust_remote_code, local_files_only=local)
    missing, unexpected = encoder.load_state_dict(trained.base_model.state_dict(), strict=False)
    if unexpected or any(not k.startswith("pooler.") for k in missing):
        raise RuntimeError(f"the masked-LM model of '{model_path}' does not match its base model "
                           f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
    encoder.save_pretrained(out)
    AutoTokenizer.from_pretrained(mlm_dir, trust_remote_code=trust_remote_code).save_pretrained(out)
    if local:
        for name in os.listdir(model_path):
            src = Path(model_path) / name
            if name in _SENTENCE_FILES and src.is_file():
                shutil.copy(src, out / name)
            elif _SENTENCE_MODULE_DIR.match(name) and src.is_dir():
                shutil.copytree(src, out / name)


def mlm_cache_folder(settings: dict, texts: Sequence[str], text_hashes: Optional[Sequence[bytes]] = None,
                     cache_dir: Optional[Path] = None) -> Path:
    """The cache entry of the stage: a key of the settings and of the texts in order (``text_hashes``,
    one 16-byte key per text, or else each text hashed as the texts are streamed once)."""
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
    return (Path(cache_dir) if cache_dir is not None else cache_root()) / h.hexdigest()[:32]


def mlm_encoder(model_path: str, texts: Sequence[str], *, seed: int, max_length: int, truncation_side: str = "right",
                steps: int, batch_size: int = 32, lr: float = 5e-5, probability: float = 0.15,
                mixed_precision: str = "no", text_hashes: Optional[Sequence[bytes]] = None,
                trust_remote_code: bool = False, cache_dir: Optional[Path] = None) -> Path:
    """Continue the masked-LM pretraining of the encoder at ``model_path`` on ``texts`` for ``steps``
    steps; returns the folder of the trained encoder (loadable with transformers' Auto classes).

    ``texts`` is any sequence of strings (the unlabelled pool's view reads each batch from disk).
    ``text_hashes``: one key per text that identifies it (the pool's 16-byte ``text_hashes()``), for the
    cache key. ``mixed_precision``: the run's own as the run resolved it (no, bf16 or fp16, never auto:
    ``uda.devices.used_precision``; the stage trains inside the run, in the same accelerate state). In a
    run of several processes, all of them train the stage together (``batch_size`` texts each, a step)
    and the main one writes the cache entry."""
    from tqdm.auto import tqdm

    settings = {"model": str(Path(model_path).resolve()) if Path(model_path).exists() else model_path,
                "seed": seed, "max_length": max_length, "truncation_side": truncation_side, "steps": steps,
                "batch_size": batch_size, "lr": lr, "probability": probability, "mixed_precision": mixed_precision,
                "processes": int(os.environ.get("WORLD_SIZE", "1")), "texts": len(texts), "format": FORMAT}
    folder = mlm_cache_folder(settings, texts, text_hashes, cache_dir)
    if (folder / "DONE").is_file():
        tqdm.write(f"MLM stage: reusing the encoder cached at {folder / 'encoder'}")
        return folder / "encoder"
    if not len(texts):
        raise ValueError("the MLM stage needs at least one text")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{folder.name}-run-", dir=folder.parent) as tmp:
        run_dir = Path(tmp) / "run"
        losses = run_stage(settings, texts, run_dir, trust_remote_code)
        if _main_process():
            window = max(1, min(10, len(losses) // 2))
            first, last = sum(losses[:window]) / window, sum(losses[-window:]) / window
            record = {**settings, "losses": [round(x, 5) for x in losses], "loss_first": first, "loss_last": last}
            with staged_cache_folder(folder, record) as staged:
                export_encoder(run_dir / "model", model_path, staged / "encoder", trust_remote_code)
                shutil.copy(run_dir / "metrics.jsonl", staged / "metrics.jsonl")
            tqdm.write(f"MLM stage: trained {steps} steps on {len(texts)} texts, loss {first:.3f} -> {last:.3f} "
                       f"(mean of the first and last {window} steps); encoder cached at {folder / 'encoder'}")
    _wait_for_main()
    return folder / "encoder"


def _main_process() -> bool:
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


def _wait_for_main() -> None:
    """In a run of several processes, wait until the main one has written the cache entry."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
