"""Config section of the multi-passage reader (``--passages.*``): retrieval, passages per question,
loss weights, span normalisation, the no-answer decision and the deterministic article split."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from tasks.common.squad import ArticleSplit
from uda.config import option, require


@dataclass
class PassagesConfig(ArticleSplit):
    """DPR-style multi-passage reader with a learned no-answer option (task passages); ignored by other tasks."""

    retrieve_k: int = option(50, "SQuAD-format input: passages BM25 retrieves per question (the built file keeps this "
                         "many; recall is reported at 1, 5 and 20). DPR keeps 100: at k = 100 the built file of "
                         "dev-v2.0.json is about 400 MB gzipped, at 50 half that.")
    retrieval_corpus: Literal["split", "file"] = option(
        "split", "SQuAD-format input: the paragraphs a question is retrieved from. split: those of its own block of "
                 "the article split (test questions from the test articles, dev from the dev articles, training "
                 "questions, labelled and unlabelled, from the training articles), so no paragraph crosses blocks; "
                 "file: every paragraph of the file (then only labelled-pool paragraphs are ever positives in "
                 "training and a reader learns to pick those: see docs/passages.md).")
    retrieval_file: Optional[str] = option(None,
        "SQuAD-format input: where the built DPR-format file (jsonl.gz) is written; None: "
        "<run folder>/data/retrieval.jsonl.gz. A DPR-format file (--data.path) is read as it is.")
    train_passages: int = option(24, "M in training: passages per labelled question, the positive plus M-1 negatives "
                             "drawn from the top train_top_k (DPR: 24).")
    train_top_k: int = option(50, "Negatives (and the positive) are drawn from this many top retrieved passages (DPR: 100).")
    predict_passages: int = option(50, "Passages per question in prediction (dev and test), the top retrieved (DPR: 50).")
    unsup_passages: int = option(8, "Passages per unlabelled question in the consistency loss: its top retrieved ones.")
    max_title_length: int = option(16, "Passage titles (given after the question, behind a separator) are cut to this "
                               "many tokens; 0 leaves titles out.")
    max_occurrences: int = option(10, "Answer occurrences in the positive passage that the span loss marginalises over.")
    n_best: int = option(5, "Spans kept per passage (and start/end candidates paired) in prediction.")
    span_passages: int = option(5, "Top passages (in the final ranking) whose best spans prediction writes.")
    fusion_weight: Optional[float] = option(None,
        "Passages are ranked by standardised retriever score + this x standardised relevance logit: 0 ranks as "
        "the retriever did, a large value as the relevance head. None: the weight that ranks a passage holding "
        "the answer first for the most dev questions, the smallest on a tie (so never worse than the retriever "
        "on dev).")
    similarity_scale: Optional[float] = option(None,
        "None: the relevance logit is DPR's head on the first token. A number s: plus s * (c_i - max_j c_j), "
        "c_i the cosine between the mean final states of pair i's first segment (question, title) and of its "
        "passage tokens: for a mean-pooling sentence encoder (the CPU recipe's all-MiniLM-L6-v2, trained at "
        "scale 20), whose first token is trained for nothing (docs/passages.md).")
    selection_loss_weight: float = option(1.0, "Weight of the selection cross-entropy over [no answer, passages].")
    span_loss_weight: float = option(1.0, "Weight of the span loss on the positive passage.")
    answerability_loss_weight: float = option(1.0,
        "Weight of the answerability loss: per passage, cross-entropy of the 2-logit head against whether "
        "it holds an answer (averaged over a question's passages). 0: the head is not trained.")
    verifier_weight: Optional[float] = option(None,
        "Weight v of the answerability head in the no-answer score, (1 - v) x (no-answer logit - top relevance "
        "logit) + v x (- the top passage's has-answer log-odds). None: fitted on dev with the threshold "
        "(the value of 0, 0.25, 0.5, 0.75, 1 with the best dev F1).")
    single_reader: Optional[str] = option(None,
        "A finished --task squad_v2 run folder (the reader this one started from, say): at evaluation it "
        "re-reads each question's top-ranked passage, and the no-answer score mixes this reader's with its "
        "own, each standardised on dev (see single_reader_weight). It must hold out this run's dev and "
        "test articles. None: this reader alone.")
    single_reader_weight: Optional[float] = option(None,
        "Weight u of the single reader in the no-answer score, (1 - u) x z(this reader's) + u x z(the single "
        "reader's). None: fitted on dev with the threshold (0, 0.1, ..., 1: the best dev F1, the smallest on "
        "a tie).")
    shared_normalization: bool = option(False,
        "Normalise start/end over the tokens of all passages of a question together (Clark and Gardner; "
        "Multi-passage BERT) instead of per passage (DPR).")
    null_threshold: float = option(0.0, "Answer '' when the no-answer score (see verifier_weight) is above this, when "
                                   "the threshold is not fitted on dev.")
    fit_threshold_on_dev: bool = option(True, "Fit the no-answer threshold that maximises F1 on the dev split (dev "
                                    "metrics use the one fitted on dev itself; test the one fitted on dev with the "
                                    "selected model).")
    span_tsa_num_classes: int = option(2, "K of the span head's TSA threshold on the gold span probability; the "
                                   "selection head's K is the number of options, train_passages + 1.")
    span_consistency: bool = option(True, "Include each passage's start and end distributions in the consistency loss "
                                "(false: the selection and answerability distributions only).")
    def validate(self) -> None:
        for name in ("retrieve_k", "train_passages", "train_top_k", "predict_passages", "unsup_passages",
                     "max_question_length", "max_answer_length", "max_occurrences", "n_best", "span_passages"):
            require(getattr(self, name) >= 1, f"passages.{name} must be >= 1, got {getattr(self, name)}")
        require(self.similarity_scale is None or self.similarity_scale > 0,
                f"passages.similarity_scale must be > 0 (or none: off), got {self.similarity_scale}")
        require(self.max_title_length >= 0, f"passages.max_title_length must be >= 0, got {self.max_title_length}")
        require(self.fusion_weight is None or self.fusion_weight >= 0,
                f"passages.fusion_weight must be >= 0 (or none: fitted on dev), got {self.fusion_weight}")
        require(self.train_top_k >= self.train_passages - 1,
              f"passages.train_top_k ({self.train_top_k}) must hold the train_passages - 1 "
              f"({self.train_passages - 1}) negatives")
        require(min(self.selection_loss_weight, self.span_loss_weight, self.answerability_loss_weight) >= 0,
                "passages loss weights must be >= 0")
        require(self.verifier_weight is None or 0 <= self.verifier_weight <= 1,
                f"passages.verifier_weight must be in [0, 1] (or none: fitted on dev), got {self.verifier_weight}")
        require(self.single_reader_weight is None or 0 <= self.single_reader_weight <= 1,
                f"passages.single_reader_weight must be in [0, 1] (or none: fitted on dev), got "
                f"{self.single_reader_weight}")
        require(self.single_reader_weight is None or self.single_reader is not None,
                "passages.single_reader_weight needs passages.single_reader (a --task squad_v2 run folder)")
        require(self.selection_loss_weight + self.span_loss_weight > 0,
              "passages.selection_loss_weight + passages.span_loss_weight must be > 0")
        require(self.span_tsa_num_classes >= 2, f"passages.span_tsa_num_classes must be >= 2, got "
                                              f"{self.span_tsa_num_classes}")
        self.validate_split("passages")


SECTIONS = {"passages": PassagesConfig}
