"""Config section of the SQuAD 2.0 task (``--qa.*``): windows, loss weights, the no-answer decision
and the deterministic few-label article split."""

from __future__ import annotations

from dataclasses import dataclass

from tasks.common.squad import ArticleSplit
from uda.config import option, require


@dataclass
class QAConfig(ArticleSplit):
    """Extractive question answering (task squad_v2); ignored by other tasks."""

    doc_stride: int = option(128, "Context tokens shared by consecutive windows when a context is longer than "
                         "model.max_length (the tokenizer's stride, as in transformers' run_qa).")
    n_best: int = option(20, "Start and end candidates per window, and spans kept per question (n-best list).")
    span_loss_weight: float = option(
        1.0, "Weight of the span loss (mean of the start and end cross-entropies) in the supervised loss; TSA "
        "masks it on the gold span's probability.")
    answerability_loss_weight: float = option(
        1.0, "Weight of the answerability head's cross-entropy in the supervised loss; TSA masks it on the head's "
        "probability of the gold label (K = 2).")
    null_span_weight: float = option(0.5, "Weight of (null score - best span score) in the no-answer score.")
    null_answerability_weight: float = option(
        0.5, "Weight of the answerability head's no-answer log-odds in the no-answer score.")
    null_threshold: float = option(0.0, "Answer '' when the no-answer score is above this (used on dev, and on test "
                               "when the threshold is not fitted on dev).")
    fit_threshold_on_dev: bool = option(True, "Before the test evaluation, fit the threshold that maximises F1 on the dev "
                                    "split with the selected model and apply it to test.")
    tsa_num_classes: int = option(2, "K of the span head's TSA threshold alpha*(1-1/K)+1/K, applied to the gold span's "
                              "probability p(start)*p(end); K=2 starts the threshold at 0.5. The answerability "
                              "head has its own threshold (K=2) on its probability of the gold label.")
    answerability_consistency: bool = option(True, "Include the answerability head's distribution in the consistency "
                                         "loss (false: only the start and end distributions).")
    def validate(self) -> None:
        require(self.max_question_length >= 1 and self.max_answer_length >= 1 and self.n_best >= 1,
              "qa.max_question_length, qa.max_answer_length and qa.n_best must be >= 1")
        require(self.doc_stride >= 0, f"qa.doc_stride must be >= 0, got {self.doc_stride}")
        require(min(self.span_loss_weight, self.answerability_loss_weight, self.null_span_weight,
                  self.null_answerability_weight) >= 0,
              "qa loss and no-answer weights must be >= 0")
        require(self.span_loss_weight + self.answerability_loss_weight > 0,
              "qa.span_loss_weight + qa.answerability_loss_weight must be > 0")
        require(self.tsa_num_classes >= 2, f"qa.tsa_num_classes must be >= 2, got {self.tsa_num_classes}")
        self.validate_split("qa")


SECTIONS = {"qa": QAConfig}
