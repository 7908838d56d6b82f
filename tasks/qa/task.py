"""Extractive question answering with unanswerable questions (SQuAD 2.0) as a Task.

Supervised loss of a feature (one window of a question's context):
    span_loss_weight * (CE(start) + CE(end)) / 2 + answerability_loss_weight * CE(answerability)
where the start/end distributions run over the no-answer slot (the first token) and the context
tokens only (question, separator and padding tokens are -inf), and the answerability head's two
logits [no answer, has answer] get a cross-entropy against the integer label.

TSA for spans: the probability of the gold answer is that of the gold span,
p_start(gold start) * p_end(gold end) (for a no-answer feature, of the first token twice); a feature
is left out of the supervised loss while that probability is above the TSA threshold with
K = ``qa.tsa_num_classes``.

Consistency training: the augmented view changes the question only. Each unlabelled
(question, context) pair gives its first window in both views, cut to the same context tokens; the
start and end logits are gathered at [first token, context tokens...] so both views give
distributions of equal length over the same slots (padding slots -inf), and the consistency loss
compares the start, end and answerability distributions (:func:`tasks.common.windows.consistency_views`).

Evaluation follows the path both readers share (tasks/common/reading.py): predictions of the split
(and of dev, to fit the no-answer threshold), the scores at that threshold, the prediction files.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from augment.build import build_augmenter
from tasks.common.qa_reader import build_qa_model, load_run_reader, model_inputs
from tasks.common.reading import (answer_metrics, evaluate_predictions, finish_metrics, read_windows,
                                  write_prediction_lines)
from tasks.common.spans import decide, fit_null_threshold
from tasks.common.squad import require_unlabeled, start_held_out
from tasks.common.squad_metric import raw_scores
from tasks.common.windows import (align_span_logits, build_features, collate_features, consistency_views,
                                  question_suffix)
from tasks.qa.config import QAConfig
from tasks.qa.data import describe_features, split_for_config
from tasks.qa.export import write_qa_export
from uda.config import ConfigError
from uda.hub import load_tokenizer, resolve_model_path
from uda.task import RunContext, SupervisedOutput, SupervisedTerm, Task, TaskData


# ----------------------------------------------------------------------------- loss maths

def answerability_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(B, 2) logits, (B,) integer labels (1 = has answer) -> (B,) cross-entropy on the logits (not
    on probabilities: softmax first and a second cross-entropy on top would flatten the gradient)."""
    return F.cross_entropy(logits.float(), labels, reduction="none")


def qa_supervised_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, answerability_logits: torch.Tensor,
                       span_mask: torch.Tensor, start_positions: torch.Tensor, end_positions: torch.Tensor,
                       answerable: torch.Tensor, span_weight: float, answerability_weight: float,
                       span_num_classes: int = 2) -> SupervisedOutput:
    """Per-feature loss, gold span probability and span correctness, and the two heads as separate
    supervised terms, so that TSA masks each on its own gold probability: the span head on
    p_start(gold) * p_end(gold) with K = ``span_num_classes``, the answerability head on its
    probability of the gold label with K = 2. (One mask for both would drop the no-answer features
    from the verifier as soon as their span, the first token, is confident.)

    start/end_logits: (B, T); span_mask: (B, T) True at the first token and the context tokens;
    start/end_positions: (B,) gold token indices (0 = no answer); answerable: (B,) 0/1.
    """
    start = start_logits.float().masked_fill(~span_mask, float("-inf"))
    end = end_logits.float().masked_fill(~span_mask, float("-inf"))
    ce_start = F.cross_entropy(start, start_positions, reduction="none")
    ce_end = F.cross_entropy(end, end_positions, reduction="none")
    span = (ce_start + ce_end) / 2
    ce_answerability = answerability_loss(answerability_logits, answerable)
    per_example = span_weight * span + answerability_weight * ce_answerability
    gold_prob = torch.exp(-(ce_start + ce_end)).detach()  # p_start(gold) * p_end(gold)
    gold_answerability = torch.exp(-ce_answerability).detach()
    correct = ((start.argmax(-1) == start_positions) & (end.argmax(-1) == end_positions)).float()
    terms = [SupervisedTerm("span", span, gold_prob, span_num_classes, span_weight),
             SupervisedTerm("answerability", ce_answerability, gold_answerability, 2, answerability_weight)]
    return SupervisedOutput(per_example_loss=per_example, gold_prob=gold_prob, correct=correct,
                            terms=[t for t in terms if t.weight > 0],
                            class_probs=answerability_logits.detach().float().softmax(-1))


def prediction_records(examples: Sequence[dict], preds: Sequence[dict], threshold: float) -> list[dict]:
    """The per-question lines of a predictions file (for error analysis)."""

    def r(x: Any) -> Any:
        return None if x is None or not math.isfinite(x) else round(float(x), 4)

    out = []
    for e, p in zip(examples, preds):
        out.append({
            "id": e["id"], "question": e["question"], "gold_answers": [a["text"] for a in e["answers"]],
            "is_impossible": bool(e["is_impossible"]), "prediction": decide(p, threshold),
            "span_text": p["span_text"], "score": r(p["span_score"]), "null_score": r(p["null_score"]),
            "no_answer_score": r(p["no_answer_score"]), "threshold": r(threshold),
            "answerability_prob": r(1.0 / (1.0 + math.exp(-p["has_answer_log_odds"])))
            if math.isfinite(p["has_answer_log_odds"]) else None,
            "n_best": [{"text": c["text"], "score": r(c["score"]), "start": c["start"], "end": c["end"]}
                       for c in p["n_best"]],
        })
    return out


# ----------------------------------------------------------------------------- the task

class QATask(Task):
    name = "squad_v2"
    selectable_metrics = ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_exact",
                          "best_f1", "HasAns_span_exact", "HasAns_span_f1", "answerability_accuracy",
                          "answerability_auc")
    main_metric = "best_f1"  # dev F1 at the dev-fitted no-answer threshold: the threshold test will use

    def __init__(self) -> None:
        self.tokenizer = None
        self.augmenter = None
        self.rng = np.random.default_rng(0)
        self.max_length = 384
        self.qa: Any = QAConfig()  # replaced by the run's section in setup
        self.model_path = ""
        self.trust_remote_code = False
        self.dropout = None
        self.dev_examples: list[dict] = []
        self._features: dict[str, list[dict]] = {}
        self.test_threshold: float | None = None  # the no-answer threshold the last test evaluation applied

    @classmethod
    def from_run(cls, run: str | Path) -> tuple["QATask", torch.nn.Module]:
        """The task and the trained reader of a finished ``--task squad_v2`` run folder (its
        ``config.yaml`` and ``model/``), ready to :meth:`predict` or :meth:`evaluate` other examples
        with the run's windowing and no-answer settings; no data is read. Set ``dev_examples`` to fit
        the no-answer threshold on them in ``evaluate``."""
        cfg, tokenizer, model = load_run_reader(run)
        task = cls()
        task.qa, task.max_length = cfg.qa, cfg.model.max_length
        task.trust_remote_code, task.dropout = cfg.model.trust_remote_code, cfg.model.dropout
        task.model_path = str(Path(run) / "model")
        task.tokenizer = tokenizer
        return task, model

    # ------------------------------------------------------------------ setup
    def setup(self, cfg: Any, run: RunContext) -> TaskData:
        self.qa = cfg.qa
        self.max_length = cfg.model.max_length
        if cfg.qa.doc_stride >= self.max_length - cfg.qa.max_question_length - 3:
            raise ConfigError(f"qa.doc_stride ({cfg.qa.doc_stride}) must be below model.max_length - "
                              f"qa.max_question_length - 3 ({self.max_length - cfg.qa.max_question_length - 3}) so "
                              f"that consecutive windows advance")
        split, source = split_for_config(cfg)
        self.model_path = resolve_model_path(cfg.model.name_or_path)
        start_held_out(self.model_path, split["info"]["articles"])
        self.trust_remote_code = cfg.model.trust_remote_code
        self.dropout = cfg.model.dropout
        self.tokenizer = load_tokenizer(self.model_path, self.trust_remote_code, cfg.model.max_length)
        self.tokenizer.padding_side = "right"
        self.rng = np.random.default_rng(cfg.seed + 1)
        has = sum(not e["is_impossible"] for e in split["train"])
        train_features = self._build(split["train"], with_labels=True)
        self.dev_examples = split["dev"]
        require_unlabeled(split["unlabeled"], run.wants_unlabeled, "qa")
        if run.wants_unlabeled:
            self.augmenter = build_augmenter(cfg.augment, [u["question"] for u in split["unlabeled"]])
        info = {"source": source, **split["info"], "train_features": describe_features(train_features)}
        # distribution alignment (--uda.distribution_alignment) acts on the answerability head's
        # [no answer, has answer] distribution, the third of consistency_logits(), towards the labelled share
        return TaskData(train=train_features, dev=split["dev"], test=split["test"],
                        unlabeled=split["unlabeled"] if run.wants_unlabeled else [], info=info,
                        tsa_num_classes=cfg.qa.tsa_num_classes,
                        class_logits_index=2 if cfg.qa.answerability_consistency else None,
                        class_prior=torch.tensor([len(split["train"]) - has, has], dtype=torch.float32)
                        / max(1, len(split["train"])))

    def augment_pool(self, cfg: Any) -> tuple[Any, dict]:
        """The unlabelled questions of the article split as (id, question) pairs: the consistency loss
        augments the question only."""
        split, source = split_for_config(cfg)
        rows = [(str(u["id"]), u["question"]) for u in split["unlabeled"]]
        return rows, {"task": cfg.task, "source": source, **split["info"]}

    def _build(self, examples: Sequence[dict], with_labels: bool) -> list[dict]:
        return build_features(self.tokenizer, examples, self.max_length, self.qa.doc_stride,
                              self.qa.max_question_length, with_labels)

    def build_model(self, cfg: Any) -> torch.nn.Module:
        return build_qa_model(self.model_path, cfg.model.dropout, cfg.model.trust_remote_code)

    # ------------------------------------------------------------------ batches
    def collate_labeled(self, examples: list) -> dict:
        return collate_features(self.tokenizer, examples, with_labels=True)

    def collate_unlabeled(self, examples: list) -> tuple[dict, dict]:
        questions = [e["question"] for e in examples]
        augmented = self.augmenter(questions, self.rng)
        return consistency_views(self.tokenizer, questions, augmented, [e["context"] for e in examples],
                                 self.max_length, self.qa.max_question_length)

    # ------------------------------------------------------------------ losses
    def supervised(self, model: torch.nn.Module, batch: dict) -> SupervisedOutput:
        out = model(**model_inputs(batch))
        return qa_supervised_loss(out.start_logits, out.end_logits, out.answerability_logits, batch["span_mask"],
                                  batch["start_position"], batch["end_position"], batch["answerable"],
                                  self.qa.span_loss_weight, self.qa.answerability_loss_weight,
                                  self.qa.tsa_num_classes)

    def consistency_logits(self, model: torch.nn.Module, batch: dict) -> list[torch.Tensor]:
        out = model(**model_inputs(batch))
        idx, mask = batch["align_index"], batch["align_mask"]
        logits = [align_span_logits(out.start_logits, idx, mask),  # (B, C)
                  align_span_logits(out.end_logits, idx, mask)]  # (B, C)
        if self.qa.answerability_consistency:
            logits.append(out.answerability_logits.float())  # (B, 2)
        return logits

    # ------------------------------------------------------------------ evaluation
    def _features_for(self, examples: Sequence[dict]) -> list[dict]:
        key = hashlib.sha1("\n".join(e["id"] for e in examples).encode("utf-8")).hexdigest()
        if key not in self._features:
            self._features[key] = self._build(examples, with_labels=False)
        return self._features[key]

    def predict(self, model: torch.nn.Module, examples: Sequence[dict], accelerator: Any,
                batch_size: int) -> list[dict]:
        """Post-processed predictions (tasks/common/spans.py), one per question, in order."""
        return read_windows(model, self.tokenizer, examples, self._features_for(examples), self.qa, accelerator,
                            batch_size)

    @staticmethod
    def fit_threshold(examples: Sequence[dict], preds: Sequence[dict]) -> float:
        """The no-answer threshold that maximises F1 on these (dev) questions (:func:`fit_null_threshold`)."""
        return fit_null_threshold(preds, examples)

    def score(self, examples: Sequence[dict], preds: Sequence[dict], threshold: float) -> dict[str, float]:
        gold = {e["id"]: [a["text"] for a in e["answers"]] for e in examples}
        metrics = answer_metrics(gold, preds, threshold)
        # span quality alone: answerable questions, always answered with the best span (no null decision)
        has = [(e, p) for e, p in zip(examples, preds) if e["answers"]]
        forced_exact, forced_f1 = raw_scores({e["id"]: gold[e["id"]] for e, _ in has},
                                             {p["id"]: p["span_text"] for _, p in has})
        metrics["HasAns_span_exact"] = 100.0 * sum(forced_exact.values()) / len(has) if has else 0.0
        metrics["HasAns_span_f1"] = 100.0 * sum(forced_f1.values()) / len(has) if has else 0.0
        verifier_right = [(p["has_answer_log_odds"] > 0) == (not e["is_impossible"]) for e, p in zip(examples, preds)]
        metrics["answerability_accuracy"] = 100.0 * float(np.mean(verifier_right)) if preds else 0.0
        # the verifier's ranking of answerable above unanswerable questions
        return finish_metrics(metrics, gold, preds, threshold, "answerability_auc",
                              [p["has_answer_log_odds"] for p in preds])

    def evaluate(self, model: torch.nn.Module, examples: Sequence[Any], accelerator: Any,
                 batch_size: int, split: str, out_dir: Any = None) -> dict[str, float]:
        """SQuAD 2.0 metrics (official definitions, in %). On dev the configured threshold is applied
        and ``best_f1`` is F1 at the best threshold; on any other split the threshold is first
        fitted on the dev split with this model (qa.fit_threshold_on_dev) and then applied.
        Also: ``HasAns_span_exact/f1`` (answerable questions always answered with the best span: the
        span head's quality without the no-answer decision), ``answerability_accuracy`` (the
        verifier's has-answer log-odds > 0 against the gold), ``answerability_auc`` (ROC AUC of those
        log-odds for answerable against unanswerable, in %; 50 = chance), ``null_threshold`` (the one
        applied)."""
        preds = self.predict(model, examples, accelerator, batch_size)
        dev_preds = None
        if split != "dev" and self.qa.fit_threshold_on_dev and self.dev_examples:
            dev_preds = self.predict(model, self.dev_examples, accelerator, batch_size)
        metrics, threshold, fitted = evaluate_predictions(
            self, split, examples, preds, self.dev_examples, dev_preds, null_threshold=self.qa.null_threshold,
            fit_on_dev=self.qa.fit_threshold_on_dev, fit_dev_on_itself=False, out_dir=out_dir,
            write=accelerator.is_main_process)
        metrics["threshold_fitted_on_dev"] = float(fitted)
        if split != "dev":
            self.test_threshold = float(threshold)  # what save() writes into the exported model's config
        return metrics

    def write_predictions(self, out_dir: Path, split: str, examples: Sequence[dict], preds: Sequence[dict],
                          threshold: float) -> None:
        """predictions_<split>.jsonl (one line per question) and, for the official script,
        predictions_<split>_official.json ({id: answer}) and na_scores_<split>.json ({id: no-answer
        score}; a question without any valid span, whose score is +inf, is written as 1e9)."""
        write_prediction_lines(out_dir, split, prediction_records(examples, preds, threshold))
        (out_dir / f"predictions_{split}_official.json").write_text(
            json.dumps({p["id"]: decide(p, threshold) for p in preds}, ensure_ascii=False), encoding="utf-8")
        (out_dir / f"na_scores_{split}.json").write_text(
            json.dumps({p["id"]: (p["no_answer_score"] if math.isfinite(p["no_answer_score"]) else 1e9)
                        for p in preds}), encoding="utf-8")

    # ------------------------------------------------------------------ saving
    def save(self, model: torch.nn.Module, out_dir: Any) -> None:
        """The reader (weights, answerability_head.json) and tokenizer, plus the code and settings that let
        ``pipeline("question-answering", model=out_dir, trust_remote_code=True)`` answer as this run does
        (tasks/qa/export.py). The no-answer threshold is the one applied to the test split, so only a save
        after the test evaluation (the run's final model/) holds it; a checkpoint's is null."""
        out = Path(out_dir)
        model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        qa = self.qa
        write_qa_export(out, type(model.span_model), {
            "max_length": self.max_length, "doc_stride": qa.doc_stride,
            "max_question_length": qa.max_question_length, "question_suffix": question_suffix(self.tokenizer),
            "max_answer_length": qa.max_answer_length, "n_best": qa.n_best,
            "null_span_weight": qa.null_span_weight, "null_answerability_weight": qa.null_answerability_weight,
            "null_threshold": self.test_threshold,
            "null_threshold_from": "none yet: saved before the run's test evaluation; pass threshold="
            if self.test_threshold is None else "the one the run applied to test (results.json test.null_threshold)",
            "answerability_dropout": model.answerability[0].p})

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
