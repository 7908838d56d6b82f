"""Config section of the QA-shaped start (``--task qa_start``, ``uda-qa-start``): ``--qa_start.*``, the
options that are the start's own (its text sources, the synthetic questions, their windows). The
training options (learning rates, steps, batch size, window length, precision, seed) are the common
``train.*`` / ``model.*`` ones; ``configs/qa_start.yaml`` holds the defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from uda.config import option, require


@dataclass
class QAStartConfig:
    """Synthetic SQuAD 2.0 questions from unlabelled text (task qa_start); ignored by other tasks."""

    squad: Optional[str] = option(
        None, "A SQuAD-format json file: the paragraphs of its articles that are neither test nor dev in the squad_v2 "
        "task's split are used (see qa_start.squad_paragraphs), and qa_start.texts are checked against its test and "
        "dev articles.")
    squad_paragraphs: bool = option(True, "Build questions from qa_start.squad's non-test, non-dev paragraphs (true) "
                                    "or only hold its test/dev articles out (false).")
    test_articles: int = option(10, "Test articles of the split (as qa.test_articles of the squad_v2 runs the start "
                                "is for).")
    dev_articles: int = option(3, "Dev articles of the split (as qa.dev_articles).")
    texts: list = option([], "More text: .txt (paragraphs separated by blank lines), .json or .jsonl(.gz) files, or "
                         "folders of them (a list; on the command line comma-separated). Long texts are cut into "
                         "paragraphs.")
    text_column: str = option("text", "Field of a json record that holds the text.")
    max_texts: Optional[int] = option(None, "Read at most this many texts from each qa_start.texts source (None: all).")
    chunk_words: int = option(150, "Longest paragraph cut from a qa_start.texts text, in words.")
    per_paragraph: int = option(16, "Synthetic questions per paragraph, at most.")
    recurring: float = option(0.5, "Weight of recurring-span questions.")
    cloze: float = option(0.5, "Weight of cloze questions.")
    unanswerable: float = option(0.33, "Share of unanswerable questions (SQuAD 2.0's training set: 0.33).")
    doc_stride: int = option(128, "Context tokens shared by consecutive windows.")
    max_question_length: int = option(64, "Questions are cut to this many tokens.")
    held_out: Optional[int] = option(
        400, "Held-out synthetic features evaluated as the dev set (from every 25th paragraph, kept out of "
        "training; None: all of them).")

    def validate(self) -> None:
        for name in ("per_paragraph", "chunk_words", "max_question_length", "test_articles"):
            require(getattr(self, name) >= 1, f"qa_start.{name} must be >= 1, got {getattr(self, name)}")
        require(self.dev_articles >= 0 and self.doc_stride >= 0,
                "qa_start.dev_articles and qa_start.doc_stride must be >= 0")
        require(0 <= self.unanswerable < 1, f"qa_start.unanswerable must be in [0, 1), got {self.unanswerable}")
        require(min(self.recurring, self.cloze) >= 0 and self.recurring + self.cloze > 0,
                "qa_start.recurring and qa_start.cloze must be >= 0 and not both 0")
        require(self.max_texts is None or self.max_texts >= 1, f"qa_start.max_texts must be >= 1 or None, got "
                f"{self.max_texts}")
        require(self.held_out is None or self.held_out >= 1, f"qa_start.held_out must be >= 1 or None, got "
                f"{self.held_out}")


SECTIONS = {"qa_start": QAStartConfig}
