"""The QA-shaped start as a task (``--task qa_start``; ``uda-qa-start`` is its command): a SQuAD 2.0 reader
trained by the training loop on synthetic questions (:mod:`tasks.qa.synthetic`) made from unlabelled
paragraphs (:mod:`tasks.qa.start_texts`), saved as a normal Hugging Face checkpoint, which
``--task squad_v2`` and ``--task passages`` then take as ``--model.name_or_path``.

The reader is the squad_v2 task's own (encoder + span head + answerability head, its supervised loss
with both heads at weight 1), so fine-tuning starts with both heads trained. The tokenizer gains the
``[QUESTION]`` token, saved with it; the squad_v2 and passages tasks append `` [QUESTION].`` to every
real question when the tokenizer knows the token (``tasks.common.windows.clip_questions``), as Splinter does
at fine-tuning.

Training data: the synthetic questions of the training paragraphs; dev: those of the held-out
paragraphs (every 25th), scored by span accuracy (argmax start and end both right, on the answerable
features) and answerability accuracy; no test set and no unlabelled data (supervised only). Besides
the loop's files, the run folder holds ``data/synthetic_counts.json`` (examples and features of each
kind) and ``data/synthetic_sample.jsonl`` (the first 100 training examples, to read), and its
``data_info.json`` names the SQuAD articles whose text was used: the squad_v2 task refuses a start
that read its dev or test articles (``tasks.common.squad.start_held_out``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch

from tasks.qa.start_texts import collect_paragraphs, held_out_split
from tasks.qa.synthetic import QUESTION_TOKEN, kind_counts, synthetic_examples
from uda.config import ConfigError
from uda.data import DataError
from uda.task import RunContext, SupervisedOutput, Task, TaskData

SAMPLE_SIZE = 100  # training examples written to data/synthetic_sample.jsonl


def check_start_options(cfg: Any) -> None:
    """What the config's own checks cannot see: the windows against ``model.max_length``, and that the
    SQuAD file exists."""
    s = cfg.qa_start
    if s.doc_stride >= cfg.model.max_length - s.max_question_length - 3:
        raise ConfigError(f"qa_start.doc_stride ({s.doc_stride}) must be below model.max_length - "
                          f"qa_start.max_question_length - 3 ({cfg.model.max_length - s.max_question_length - 3}) so "
                          f"that consecutive windows advance")
    if s.squad and not Path(s.squad).expanduser().exists():
        raise ConfigError(f"qa_start.squad '{s.squad}' does not exist; give the SQuAD json file (e.g. dev-v2.0.json)")


def add_question_token(tokenizer: Any) -> bool:
    """Add ``[QUESTION]`` to the tokenizer as a special token (never split, never lower-cased); False
    when it knows the token already (a start built from a start)."""
    if QUESTION_TOKEN in tokenizer.get_vocab():
        return False
    tokenizer.add_special_tokens({"additional_special_tokens": [QUESTION_TOKEN]})
    return True


def add_question_row(tokenizer: Any, model: Any) -> None:
    """Fit the reader's word embeddings to the tokenizer that gained ``[QUESTION]``: its row starts as
    the mask token's (or the mean row)."""
    span = model.span_model
    span.resize_token_embeddings(len(tokenizer))
    emb = span.get_input_embeddings().weight
    new = tokenizer.convert_tokens_to_ids(QUESTION_TOKEN)
    with torch.no_grad():
        mask = tokenizer.mask_token_id
        emb[new] = emb[mask] if mask is not None and mask < new else emb[:new].mean(0)


def start_features(tokenizer: Any, examples: Sequence[dict], max_length: int, doc_stride: int,
                   max_question_length: int) -> list[dict]:
    """Labelled features of the synthetic examples: for an answerable example the windows that hold its
    answer, for an unanswerable one its first window (so that the kinds keep their proportions); a
    question cut to ``max_question_length`` before its ``[QUESTION]`` token is left out."""
    from tasks.common.windows import build_features

    if not examples:
        return []
    # mark=False: a synthetic question holds its [QUESTION] token already, where its answer was
    feats = build_features(tokenizer, examples, max_length, doc_stride, max_question_length, True, mark=False)
    out, first_seen = [], set()
    token_id = tokenizer.convert_tokens_to_ids(QUESTION_TOKEN)
    for f in feats:
        ex = examples[f["example_index"]]
        if token_id not in f["input_ids"]:  # the question was cut before its token: nothing to point from
            continue
        if ex["is_impossible"]:
            if f["example_index"] in first_seen:
                continue
            first_seen.add(f["example_index"])
        elif not f["answerable"]:
            continue
        f["kind"] = ex["kind"]
        out.append(f)
    return out


def held_out_sample(feats: list[dict], size: Optional[int], seed: int) -> list[dict]:
    """At most ``size`` of the held-out features (None: all), drawn with the seed, in their order."""
    if size is None or len(feats) <= size:
        return feats
    keep = np.sort(np.random.default_rng([seed, 9]).choice(len(feats), size, replace=False))
    return [feats[int(i)] for i in keep]


def write_synthetic_files(folder: Path, examples: Sequence[dict], counts: dict) -> None:
    """``synthetic_counts.json`` and ``synthetic_sample.jsonl`` (the first training examples) in ``folder``."""
    from uda.io import atomic_write_json, atomic_write_text

    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / "synthetic_counts.json", counts)
    atomic_write_text(folder / "synthetic_sample.jsonl",
                      "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in examples[:SAMPLE_SIZE]))


class QAStartTask(Task):
    name = "qa_start"
    main_metric = "span_accuracy"  # of the held-out synthetic questions, in %
    selectable_metrics = ("span_accuracy", "answerability_accuracy")

    def __init__(self) -> None:
        self.tokenizer = None
        self.model_path = ""
        self.added_token = False  # setup gave the tokenizer [QUESTION]: the model gets its row

    def setup(self, cfg: Any, run: RunContext) -> TaskData:
        from uda.hub import load_tokenizer, resolve_model_path

        check_start_options(cfg)
        if run.wants_unlabeled:
            raise ConfigError("the QA start trains on synthetic questions only, with no consistency loss: set "
                              "--uda.lambda_u 0 (configs/qa_start.yaml does)")
        s = cfg.qa_start
        paras, info = collect_paragraphs(s)
        train_paras, held_paras = held_out_split(paras)
        gen = dict(per_paragraph=s.per_paragraph, recurring_weight=s.recurring, cloze_weight=s.cloze,
                   unanswerable=s.unanswerable)
        train_ex = synthetic_examples(train_paras, seed=cfg.seed, **gen)
        held_ex = synthetic_examples(held_paras, seed=cfg.seed + 1, **gen)
        self.model_path = resolve_model_path(cfg.model.name_or_path)
        self.tokenizer = load_tokenizer(self.model_path, cfg.model.trust_remote_code, cfg.model.max_length)
        self.tokenizer.padding_side = "right"
        self.added_token = add_question_token(self.tokenizer)
        window = (cfg.model.max_length, s.doc_stride, s.max_question_length)
        feats = start_features(self.tokenizer, train_ex, *window)
        held = held_out_sample(start_features(self.tokenizer, held_ex, *window), s.held_out, cfg.seed)
        if not feats:
            raise DataError(f"the {len(train_paras)} training paragraphs gave no synthetic question that fits a "
                            f"window: give more text (qa_start.squad, qa_start.texts) or raise model.max_length")
        counts = {"examples": kind_counts(train_ex), "features": kind_counts(feats),
                  "held_out_examples": kind_counts(held_ex), "held_out_features": kind_counts(held),
                  "paragraphs": {"train": len(train_paras), "held_out": len(held_paras)},
                  "unanswerable_share": round(sum(e["is_impossible"] for e in train_ex) / max(1, len(train_ex)), 4)}
        write_synthetic_files(run.run_dir / "data", train_ex, counts)
        return TaskData(train=feats, dev=held, test=[], unlabeled=[], info={**info, "synthetic": counts})

    def build_model(self, cfg: Any) -> torch.nn.Module:
        from tasks.common.qa_reader import build_qa_model

        model = build_qa_model(self.model_path, cfg.model.dropout, cfg.model.trust_remote_code)
        if self.added_token:
            add_question_row(self.tokenizer, model)
        return model

    def collate_labeled(self, examples: list) -> dict:
        from tasks.common.windows import collate_features

        return collate_features(self.tokenizer, examples, with_labels=True)

    def supervised(self, model: torch.nn.Module, batch: dict) -> SupervisedOutput:
        from tasks.common.qa_reader import model_inputs
        from tasks.qa.task import qa_supervised_loss

        out = model(**model_inputs(batch))
        return qa_supervised_loss(out.start_logits, out.end_logits, out.answerability_logits, batch["span_mask"],
                                  batch["start_position"], batch["end_position"], batch["answerable"], 1.0, 1.0)

    def evaluate(self, model: torch.nn.Module, examples: Sequence[Any], accelerator: Any,
                 batch_size: int, split: str, out_dir: Any = None) -> dict[str, float]:
        """Span accuracy (argmax start and end both right) on the answerable features, answerability
        accuracy on all of them (both in %), and the mean loss."""
        from tasks.common.qa_reader import model_inputs
        from tasks.common.windows import collate_features
        from tasks.qa.task import qa_supervised_loss
        from uda.evaluation import length_sorted_batches, run_inference

        def collate(indices: list[int]) -> dict:
            return collate_features(self.tokenizer, [examples[i] for i in indices], with_labels=True)

        def forward(batch: dict) -> dict:
            out = model(**model_inputs(batch))
            sup = qa_supervised_loss(out.start_logits, out.end_logits, out.answerability_logits, batch["span_mask"],
                                     batch["start_position"], batch["end_position"], batch["answerable"], 1.0, 1.0)
            verdict = out.answerability_logits.float().argmax(-1) == batch["answerable"]
            return {"loss": sup.per_example_loss, "span_right": sup.correct, "answerable": batch["answerable"],
                    "answerability_right": verdict}

        batches = length_sorted_batches([len(f["input_ids"]) for f in examples], batch_size)
        _, out = run_inference(forward, batches, collate, accelerator)
        has, n = out["answerable"] > 0, len(out["loss"])
        return {"span_accuracy": 100.0 * float(out["span_right"][has].sum()) / max(1, int(has.sum())),
                "answerability_accuracy": 100.0 * float(out["answerability_right"].sum()) / n,
                "loss": float(out["loss"].double().mean()), "num_examples": n}

    def save(self, model: torch.nn.Module, out_dir: Any) -> None:
        """The reader (weights, answerability_head.json) and the tokenizer with ``[QUESTION]``."""
        model.save_pretrained(Path(out_dir))
        self.tokenizer.save_pretrained(Path(out_dir))
