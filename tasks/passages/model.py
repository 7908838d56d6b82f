"""A multi-passage reader (DPR's ``Reader``) with a learned no-answer option (Clark and Gardner).

Each of a question's M passages is encoded with the question as one (question [SEP] title, passage)
pair by a stock ``AutoModelForQuestionAnswering`` (encoder + ``qa_outputs``: start/end logits per
token). From the first token's final hidden state h_i of passage i:

* relevance logit r_i = w_r . h_i + b_r (DPR's ``qa_classifier``), plus, with ``similarity_scale`` s
  (None: off, DPR), a segment-similarity term s * (c_i - max_j c_j), c_i the cosine between the mean
  final state of pair i's first segment ([CLS] question [SEP] title [SEP]) and that of its passage
  tokens. The first token of a mean-pooling sentence encoder (all-MiniLM-L6-v2) is trained for
  nothing and, fine-tuned on a few hundred questions, learns to tell the training paragraphs apart
  rather than to compare question and passage; mean-pooled states are what such an encoder was
  trained to compare (with s = 20, its training scale). The term is shifted by the question's best
  passage so that it ranks the passages without moving them against the no-answer option (which
  then weighs the top passage by the heads as without it);
* the no-answer logit of the question, a small head on what all its passages say:
  n = w_n . max_i h_i + b_n (element-wise max over the question's real passages). With w_n = 0
  it is a learned scalar bias; the head lets the option depend on the passages (an unanswerable
  SQuAD 2.0 question usually has a plausible passage that lacks the answer);
* the answerability logits [no answer, has answer] of each passage, a 2-logit head on the same
  first-token state (the single-passage reader's verifier, tasks/common/qa_reader.py). Built from a SQuAD 2.0
  reader this library saved, the head starts from that reader's trained one: the no-answer decision
  can then use a verifier trained on every labelled question of the start.

The selection distribution of a question is softmax([n, r_1, ..., r_M]) (padding passages -inf):
the no-answer option competes with the passages. The state dict uses the span model's key names
plus ``relevance.*``, ``no_answer.*`` and ``answerability.*``; ``save_pretrained`` writes one
``model.safetensors``, so the folder loads whole with :func:`load_passage_reader` and as a plain
span model with ``AutoModelForQuestionAnswering`` (which skips the three heads).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from tasks.common.heads import HeadedModel
from tasks.common.qa_reader import HEAD_CONFIG as QA_HEAD_CONFIG, load_heads, load_reader, span_model_from_pretrained

HEAD_CONFIG = "passage_reader.json"


@dataclass
class ReaderOutput:
    start_logits: torch.Tensor  # (B, M, T)
    end_logits: torch.Tensor  # (B, M, T)
    relevance_logits: torch.Tensor  # (B, M)
    no_answer_logits: torch.Tensor  # (B,)
    answerability_logits: torch.Tensor  # (B, M, 2): [no answer, has answer] per passage


def _head(hidden: int, p: float, std: float) -> nn.Sequential:
    head = nn.Sequential(nn.Dropout(p), nn.Linear(hidden, 1))
    nn.init.normal_(head[1].weight, std=std)
    nn.init.zeros_(head[1].bias)
    return head


def segment_similarity(hidden: torch.Tensor, attention_mask: torch.Tensor, context_mask: torch.Tensor) -> torch.Tensor:
    """(N, T, H) final states, (N, T) attention and context masks -> (N,) cosine between the mean state
    of the first segment (the attended tokens before the first context token) and the mean state of
    the context tokens; 0 for a pair without context tokens (a padding passage)."""
    ctx = context_mask.bool() & attention_mask.bool()
    first = attention_mask.bool() & (ctx.long().cumsum(1) == 0)

    def mean(mask: torch.Tensor) -> torch.Tensor:
        m = mask[..., None].to(hidden.dtype)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)

    return F.cosine_similarity(mean(first).float(), mean(ctx).float(), dim=-1)


class PassageReader(HeadedModel):
    def __init__(self, qa_model: nn.Module, dropout: Optional[float] = None,
                 similarity_scale: Optional[float] = None) -> None:
        super().__init__(qa_model)  # parameter names are the span model's
        self.similarity_scale = similarity_scale
        cfg = qa_model.config
        p = dropout if dropout is not None else getattr(cfg, "hidden_dropout_prob", 0.1)
        std = getattr(cfg, "initializer_range", 0.02)
        self.relevance = _head(cfg.hidden_size, p, std)
        self.no_answer = _head(cfg.hidden_size, p, std)
        self.answerability = nn.Sequential(nn.Dropout(p), nn.Linear(cfg.hidden_size, 2))
        nn.init.normal_(self.answerability[1].weight, std=std)
        nn.init.zeros_(self.answerability[1].bias)

    @property
    def span_model(self) -> nn.Module:
        return self.inner

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, passage_mask: torch.Tensor,
                token_type_ids: Optional[torch.Tensor] = None,
                context_mask: Optional[torch.Tensor] = None) -> ReaderOutput:
        """input_ids etc. (B*M, T), question-major (passage j of question b is row b*M + j);
        passage_mask (B, M), False at padding passages; context_mask (B*M, T), True at the passage's
        tokens (needed with ``similarity_scale``)."""
        B, M = passage_mask.shape
        T = input_ids.shape[1]
        kwargs = {"attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        out = self.span_model(input_ids=input_ids, output_hidden_states=True, return_dict=True, **kwargs)
        first = out.hidden_states[-1][:, 0]  # (B*M, H)
        relevance = self.relevance(first).view(B, M)
        if self.similarity_scale is not None:
            if context_mask is None:
                raise ValueError("a reader with similarity_scale needs context_mask (True at passage tokens)")
            sim = segment_similarity(out.hidden_states[-1], attention_mask, context_mask).view(B, M)
            sim = sim.masked_fill(~passage_mask, -2.0)  # below every cosine: a padding passage is never the max
            relevance = relevance.float() + self.similarity_scale * (sim - sim.max(dim=1, keepdim=True).values)
        states = first.view(B, M, -1).masked_fill(~passage_mask[..., None], torch.finfo(first.dtype).min)
        no_answer = self.no_answer(states.max(dim=1).values).squeeze(-1)  # (B,)
        return ReaderOutput(out.start_logits.view(B, M, T), out.end_logits.view(B, M, T), relevance, no_answer,
                            self.answerability(first).view(B, M, 2))

    def save_pretrained(self, out_dir: str | Path) -> None:
        out = Path(out_dir)
        self.span_model.save_pretrained(out, state_dict=self.state_dict())
        (out / HEAD_CONFIG).write_text(json.dumps({
            "dropout": self.relevance[0].p,
            "relevance": "relevance.1.* on the last hidden state of token 0 of each passage",
            "similarity_scale": self.similarity_scale,
            "no_answer": "no_answer.1.* on the element-wise max over a question's passages of that state",
            "answerability": "answerability.1.* on that state of each passage: [no answer, has answer]",
            "weights": "model.safetensors"}, indent=2), encoding="utf-8")


def build_passage_reader(name_or_path: str, dropout: Optional[float] = None, trust_remote_code: bool = False,
                         similarity_scale: Optional[float] = None) -> PassageReader:
    """A new reader from a pretrained encoder (its heads start untrained), or from a SQuAD 2.0 reader this
    library saved (a squad_v2 run's model, a QA start): then the span and answerability heads start from
    that reader's trained ones (relevance and no-answer heads untrained)."""
    model = PassageReader(span_model_from_pretrained(name_or_path, dropout, trust_remote_code), dropout,
                          similarity_scale)
    if (Path(name_or_path) / QA_HEAD_CONFIG).is_file():
        load_heads(model, Path(name_or_path), ("answerability",))
    return model


def load_passage_reader(path: str | Path, trust_remote_code: bool = False) -> PassageReader:
    """Load a reader saved by :meth:`PassageReader.save_pretrained` (with its similarity scale)."""
    model = load_reader(path, PassageReader, HEAD_CONFIG, ("relevance", "no_answer"), "passages", trust_remote_code)
    head_cfg = json.loads((Path(path) / HEAD_CONFIG).read_text(encoding="utf-8"))
    if "answerability" in head_cfg:  # readers saved before the head existed have none (it stays untrained)
        load_heads(model, Path(path), ("answerability",))
    model.similarity_scale = head_cfg.get("similarity_scale")
    return model
