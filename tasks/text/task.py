"""Text classification (IMDB sentiment and any K-class text set) as a Task."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence as SequenceABC
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from augment.build import build_augmenter
from uda.task import RunContext, SupervisedOutput, Task, TaskData
from tasks.text.data import UnlabeledPool, load_text_classification, require_copies
from tasks.text.descriptions import resolve_label_descriptions
from uda.data import DataError, resolve_data_path
from uda.evaluation import length_sorted_batches, pad_right, run_inference
from uda.hub import load_tokenizer, resolve_model_path

_BR_PATTERN = r"<br\s*/?>"
_BR = re.compile(_BR_PATTERN, re.IGNORECASE)


def clean_text(text: str) -> str:
    """IMDB reviews carry HTML line breaks; the model should see whitespace instead. A saved model's
    tokenizer does the same (:func:`save_tokenizer`)."""
    return _BR.sub(" ", text)


def save_tokenizer(tokenizer: Any, out: Path, max_length: int) -> None:
    """Save ``tokenizer`` into ``out`` as the run used it, so that transformers' pipeline sees the run's
    inputs: ``model_max_length`` is the run's ``max_length``, ``truncation_side`` is kept, and the
    :func:`clean_text` replacement of HTML line breaks is the first step of the tokenizer's normalizer.

    transformers 5 builds a model family's tokenizer class (BertTokenizer, ...) anew from its vocabulary,
    dropping a normalizer changed in tokenizer.json; so the folder names transformers' generic
    ``TokenizersBackend``, which reads tokenizer.json as saved (same tokens, special tokens and inputs).
    A tokenizer without a tokenizer.json (no fast backend) is saved without the cleaning step, with a
    warning: its users must apply ``clean_text`` themselves."""
    from tokenizers import Regex, Tokenizer, normalizers

    tokenizer.save_pretrained(out)
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config.update(model_max_length=int(max_length), truncation_side=tokenizer.truncation_side,
                  model_input_names=list(tokenizer.model_input_names))
    backend_path = out / "tokenizer.json"
    if backend_path.is_file():
        backend = Tokenizer.from_file(str(backend_path))
        backend.no_truncation()  # the state of the run's last call: pipeline() sets its own
        backend.no_padding()
        replace = normalizers.Replace(Regex("(?i)" + _BR_PATTERN), " ")
        backend.normalizer = replace if backend.normalizer is None else \
            normalizers.Sequence([replace, backend.normalizer])
        backend.save(str(backend_path))
        config["tokenizer_class"] = "TokenizersBackend"
    else:
        import warnings

        warnings.warn(f"{out}: the tokenizer has no tokenizer.json, so the saved one does not replace HTML line "
                      f"breaks as the run did; apply tasks.text.task.clean_text to texts before it", stacklevel=2)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def window_token_ids(tokenizer: Any, texts: Sequence[str], max_length: int,
                     chars_per_token: int = 6) -> list[list[int]]:
    """Token ids of each text cut to ``max_length`` on the tokenizer's truncation side: exactly what
    ``tokenizer(texts, truncation=True, max_length=max_length)`` gives, but without tokenising the
    part of a long text that truncation throws away (an IMDB review is often several windows long,
    and tokenising it whole was most of the library's overhead over a bare training loop).

    A text longer than ``max_length * chars_per_token`` characters is first cut at a space on the
    side truncation removes. Words on the kept side tokenise the same either way (the tokenizer
    splits at whitespace before anything else), so when the cut text still fills the window its
    window is the full text's; a cut text that does not fill it is tokenised again whole. The default
    of 6 characters per token is measured: on 2,500 IMDB reviews no cut text fell short of a 128- or
    512-token window (at 5, 36 of them did at 128), and 128-token windows read 54% of the characters.
    """
    limit = max_length * chars_per_token
    left = tokenizer.truncation_side == "left"
    cut = []
    for t in texts:
        if len(t) <= limit:
            cut.append(t)
            continue
        i = t.find(" ", len(t) - limit) if left else t.rfind(" ", 0, limit)
        cut.append(t if i <= 0 else (t[i:] if left else t[:i]))
    ids = tokenizer(cut, truncation=True, max_length=max_length)["input_ids"]
    short = [j for j, (t, c) in enumerate(zip(texts, cut)) if c is not t and len(ids[j]) < max_length]
    if short:  # the cut text did not fill the window: what was cut away is needed
        for j, full in zip(short, tokenizer([texts[j] for j in short], truncation=True,
                                            max_length=max_length)["input_ids"]):
            ids[j] = full
    return ids


def accuracy_and_macro_f1(preds: np.ndarray, labels: np.ndarray, num_classes: int) -> dict[str, float]:
    """Accuracy, and macro-F1 over classes (classes absent from both preds and labels are skipped)."""
    out = {"accuracy": float((preds == labels).mean()) if len(labels) else 0.0}
    f1s = []
    for c in range(num_classes):
        tp = int(((preds == c) & (labels == c)).sum())
        fp = int(((preds == c) & (labels != c)).sum())
        fn = int(((preds != c) & (labels == c)).sum())
        if tp + fp + fn == 0:
            continue
        f1s.append(2 * tp / (2 * tp + fp + fn))
    out["macro_f1"] = float(np.mean(f1s)) if f1s else 0.0
    return out


class PoolTexts(SequenceABC):
    """The cleaned texts of the unlabelled pool at ``positions``, read from disk when asked: a slice
    is one ``texts_at`` read (the MLM stage reads a batch at a time), so the pool stays on disk."""

    def __init__(self, pool: UnlabeledPool, positions: np.ndarray) -> None:
        self.pool, self.positions = pool, np.asarray(positions, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [clean_text(t) for t in self.pool.texts_at(self.positions[i])]
        return clean_text(self.pool.texts_at(self.positions[[i]])[0])


class TextClassificationTask(Task):
    name = "text_classification"
    main_metric = "accuracy"
    selectable_metrics = ("accuracy", "macro_f1")

    def __init__(self) -> None:
        self.tokenizer = None
        self.label_names: list[str] = []
        self.augmenter = None
        self.rng = np.random.default_rng(0)
        self.max_length = 128
        self._eval_ids: dict[str, list[list[int]]] = {}  # token ids of the evaluation sets seen last
        self.model_path = ""
        self.train_rows: list = []
        self.unlabeled: Optional[UnlabeledPool] = None  # the pool the MLM stage reads (even when supervised only)
        self.label_descriptions: Optional[list] = None  # the zero-shot start's texts, in label order (setup)

    # ------------------------------------------------------------------ setup
    def setup(self, cfg: Any, run: RunContext) -> TaskData:
        data = load_text_classification(cfg.data, cfg.seed)
        self.label_names = list(data.label_names)
        self.max_length = cfg.model.max_length
        self.model_path = resolve_model_path(cfg.model.name_or_path)
        self.tokenizer = load_tokenizer(self.model_path, cfg.model.trust_remote_code, cfg.model.max_length)
        self.tokenizer.truncation_side = cfg.model.truncation_side
        self.rng = np.random.default_rng(cfg.seed + 1)
        self.train_rows = list(data.train)
        self.unlabeled = data.unlabeled
        counts = torch.bincount(torch.tensor([e["label"] for e in data.train], dtype=torch.long),
                                minlength=len(self.label_names)).float()
        self.label_descriptions, described = resolve_label_descriptions(
            cfg.model, self.label_names, resolve_data_path(cfg.data), data.info.get("label_names_from", ""))
        info = {**data.info, "label_descriptions": described}  # None: a random head
        if run.wants_unlabeled:
            if not len(data.unlabeled):
                raise DataError("the unlabelled pool is empty (no unsup.* file, and no training-pool text left "
                                "for it after data.unlabeled_from_train, data.min_unlabeled_chars and the labelled "
                                "and dev examples), so the consistency loss has nothing to train on; add an unsup "
                                "file to the data folder, lower --data.min_unlabeled_chars, or train supervised "
                                "only with --uda.lambda_u 0")
            self.augmenter = self._build_augmenter(cfg.augment, data.unlabeled)
        # consistency_logits()[0] is a distribution over the classes; its prior is the labelled set's
        return TaskData(train=data.train, dev=data.dev, test=data.test,
                        unlabeled=data.unlabeled if run.wants_unlabeled else [], info=info,
                        tsa_num_classes=len(self.label_names), class_logits_index=0,
                        class_prior=counts / counts.sum().clamp(min=1.0))

    @staticmethod
    def _build_augmenter(cfg: Any, unlabeled: UnlabeledPool) -> Any:
        """The augmenter; a precomputed file that is missing, broken or lacks some unlabelled text is
        an error now, before training, rather than hours into it."""
        texts = unlabeled.texts()  # read from disk as consumed: only TF-IDF statistics read them all
        if cfg.method != "precomputed":
            return build_augmenter(cfg, texts)
        if not Path(cfg.file).expanduser().is_file():
            raise DataError(f"--augment.file '{cfg.file}' does not exist; give the file of precomputed augmented "
                            f"copies, or use another --augment.method")
        try:
            augmenter = build_augmenter(cfg, texts)
        except (ValueError, OSError) as e:
            raise DataError(f"--augment.file '{cfg.file}': {e}") from None
        lookup = augmenter.augmenters[0] if hasattr(augmenter, "augmenters") else augmenter  # first stage
        require_copies(unlabeled, lookup, cfg.file)  # the join, on text hashes: every pool text has copies
        return augmenter

    def build_model(self, cfg: Any) -> torch.nn.Module:
        from tasks.text.model import build_text_classifier

        path = self.model_path
        if cfg.model.mlm_steps:  # first: the contrastive stage, if any, starts from the MLM encoder
            path = str(self._mlm_encoder(cfg, path))
        if cfg.model.contrastive_iterations:
            from tasks.common.contrastive import contrastive_encoder

            path = str(contrastive_encoder(
                path, [clean_text(e["text"]) for e in self.train_rows], [e["label"] for e in self.train_rows],
                seed=cfg.seed, max_length=cfg.model.max_length, truncation_side=cfg.model.truncation_side,
                iterations=cfg.model.contrastive_iterations, lr=cfg.model.contrastive_lr))
        model = build_text_classifier(path, self.label_names, cfg.model.pooling, cfg.model.dropout,
                                      cfg.model.trust_remote_code)
        if self.label_descriptions is not None:
            self._describe_classes(model, self.label_descriptions)
        return model

    def _describe_classes(self, model: torch.nn.Module, descriptions: list) -> None:
        """The head starts from the classes' descriptions, one per class in label order
        (``--model.head_init descriptions``: :func:`tasks.text.descriptions.resolve_label_descriptions`)."""
        from tqdm.auto import tqdm

        from tasks.text.model import init_head_from_descriptions

        rows = self.train_rows
        batches = [self.collate_labeled(rows[i:i + 64]) for i in range(0, len(rows), 64)]
        scale = init_head_from_descriptions(model, self._encode(descriptions), batches)
        tqdm.write(f"classifier head started from the label descriptions (scale {scale:.3g}, fitted on the "
                   f"{len(rows)} labelled examples)")

    def _mlm_encoder(self, cfg: Any, path: str) -> Path:
        """The MLM stage (a run of the training loop inside this one's setup, in its mixed precision) on
        ``model.mlm_max_texts`` texts of the unlabelled pool, drawn with the seed."""
        from tasks.common.mlm import mlm_encoder
        from uda.devices import used_precision

        pool, m = self.unlabeled, cfg.model
        if pool is None or len(pool) == 0:
            raise DataError("--model.mlm_steps pretrains the encoder on the unlabelled pool, and this run has none: "
                            "give an unlabelled file (unsup.* in --data.path, or --data.unlabeled_file) or "
                            "--data.unlabeled_from_train true, or drop --model.mlm_steps")
        # a stream of its own: the draw moves neither the task's augmentation RNG nor torch's
        positions = np.random.default_rng([cfg.seed, 0x6D6C6D]).permutation(len(pool))[:m.mlm_max_texts]
        return mlm_encoder(path, PoolTexts(pool, positions), text_hashes=pool.text_hashes()[positions],
                           seed=cfg.seed, max_length=m.max_length, truncation_side=m.truncation_side,
                           steps=m.mlm_steps, batch_size=m.mlm_batch_size, lr=m.mlm_lr,
                           probability=m.mlm_probability, mixed_precision=used_precision(cfg),
                           trust_remote_code=m.trust_remote_code)

    # ------------------------------------------------------------------ batches
    def _token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return window_token_ids(self.tokenizer, [clean_text(t) for t in texts], self.max_length)

    def _eval_token_ids(self, examples: Sequence[Any]) -> list[list[int]]:
        """Token ids of an evaluation set, kept for its next evaluation (dev is evaluated every
        train.eval_every steps, test twice with eval.test_last_step); the last two sets are kept."""
        h = hashlib.sha1(str(self.max_length).encode())
        for e in examples:
            h.update(f"{e.get('id')}\t{e['text']}\n".encode("utf-8", "surrogatepass"))
        key = h.hexdigest()
        if key not in self._eval_ids:
            self._eval_ids = {k: v for k, v in list(self._eval_ids.items())[-1:]}
            self._eval_ids[key] = self._token_ids([e["text"] for e in examples])
        return self._eval_ids[key]

    def _encode(self, texts: Sequence[str]) -> dict:
        return pad_right(self._token_ids(texts), self.tokenizer.pad_token_id)

    def collate_labeled(self, examples: list) -> dict:
        batch = self._encode([e["text"] for e in examples])
        batch["labels"] = torch.tensor([e["label"] for e in examples], dtype=torch.long)
        return batch

    def collate_unlabeled(self, examples: list) -> tuple[dict, dict]:
        texts = [e["text"] for e in examples]
        augmented = self.augmenter(texts, self.rng)
        return self._encode(texts), self._encode(augmented)

    # ------------------------------------------------------------------ losses
    def supervised(self, model: torch.nn.Module, batch: dict) -> SupervisedOutput:
        labels = batch["labels"]
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits.float()  # (B, K)
        per_example = F.cross_entropy(logits, labels, reduction="none")
        probs = logits.softmax(-1)
        gold_prob = probs.gather(1, labels[:, None]).squeeze(1)
        correct = (logits.argmax(-1) == labels).float()
        return SupervisedOutput(per_example_loss=per_example, gold_prob=gold_prob, correct=correct,
                                class_probs=probs.detach())

    def consistency_logits(self, model: torch.nn.Module, batch: dict) -> list[torch.Tensor]:
        return [model(**batch).logits.float()]  # [(B, K)]; float32 whatever the compute dtype

    def augment_pool(self, cfg: Any) -> tuple[Any, dict]:
        """The unlabelled pool (:class:`tasks.text.data.UnlabeledPool`, on disk; ``augment_file(rows=...)``
        reads it as it goes)."""
        data = load_text_classification(cfg.data, cfg.seed)
        return data.unlabeled, {"task": cfg.task, **data.info}

    @staticmethod
    def hidden_labels(examples: list) -> Optional[torch.Tensor]:
        """Labels that unlabelled examples carry but training never reads (IMDB's training pool has
        them), -1 where unknown; None when no example has one. For diagnostics only."""
        labels = [e.get("hidden_label", -1) for e in examples]
        return torch.tensor(labels, dtype=torch.long) if any(y >= 0 for y in labels) else None

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, model: torch.nn.Module, examples: Sequence[Any], accelerator: Any,
                 batch_size: int, split: str, out_dir: Any = None) -> dict[str, float]:
        encoded = self._eval_token_ids(examples)
        batches = length_sorted_batches([len(ids) for ids in encoded], batch_size)

        def collate(indices: list[int]) -> dict:
            batch = pad_right([encoded[i] for i in indices], self.tokenizer.pad_token_id)
            batch["index"] = torch.tensor(indices, dtype=torch.long)
            return batch

        def forward(batch: dict) -> torch.Tensor:
            return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()

        indices, logits = run_inference(forward, batches, collate, accelerator)
        preds = np.empty(len(examples), dtype=np.int64)
        preds[indices] = logits.argmax(-1).numpy()
        labels = np.array([e["label"] for e in examples], dtype=np.int64)
        metrics = accuracy_and_macro_f1(preds, labels, len(self.label_names))
        metrics["num_examples"] = int(len(indices))
        if split == "dev" and accelerator.is_main_process and metrics["accuracy"] - metrics["macro_f1"] > 0.1:
            from tqdm.auto import tqdm

            tqdm.write(f"warning: dev macro-F1 {metrics['macro_f1']:.3f} is far below accuracy "
                       f"{metrics['accuracy']:.3f}: the model predicts some classes for almost every example "
                       f"(see unsup/max_class_share)")
        if out_dir is not None and accelerator.is_main_process:
            path = Path(out_dir) / f"predictions_{split}.jsonl"
            probs = torch.softmax(logits, -1).numpy()
            order = np.argsort(indices)
            with path.open("w", encoding="utf-8") as f:
                for j in order:
                    i = int(indices[j])
                    f.write(json.dumps({"id": examples[i].get("id"), "label": int(labels[i]),
                                        "pred": int(preds[i]), "probs": [round(float(x), 6) for x in probs[j]]}) + "\n")
        return metrics

    def save(self, model: torch.nn.Module, out_dir: Any) -> None:
        out = Path(out_dir)
        model.save_pretrained(out)
        save_tokenizer(self.tokenizer, out, self.max_length)
        (out / "label_names.json").write_text(json.dumps(self.label_names), encoding="utf-8")

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state}  # plain dict of ints: torch.load(weights_only=True) reads it

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
