"""Written by the uda library (tasks/qa/export.py) beside a SQuAD 2.0 reader a squad_v2 run trained.

``UdaQAWithAnswerability``: BaseForQuestionAnswering (the span model: encoder + start/end head) plus the
run's answerability head, a linear layer on the last hidden state of the first token giving logits
[no answer, has answer]; its parameter names are the saved ones (the span model's, ``answerability.1.*``).
``UdaQuestionAnsweringPipeline``: the run's own reading of a (question, context) pair: the question cut to
``max_question_length`` tokens, the context cut into windows of ``max_length`` tokens sharing ``doc_stride``,
the best span over the windows (``n_best``, ``max_answer_length``), and "" when the run's no-answer score

    no_answer_score = null_span_weight * (null score - best span score)
                      + null_answerability_weight * (- has-answer log-odds)

is above the no-answer threshold the run fitted on its dev split (the one it applied to its test split,
results.json ``test.null_threshold``). The settings are config.json's ``uda_qa``. Load with

    from transformers import pipeline
    qa = pipeline("question-answering", model=FOLDER, trust_remote_code=True)
    qa(question="...", context="...")  # {"answer": "" or the span, "start", "end", "no_answer_score", ...}

This file imports only torch, numpy and transformers (the library's span search, ``feature_candidates``,
is written out in it).
"""

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from transformers import BertForQuestionAnswering as BaseForQuestionAnswering  # uda: the span model's class
from transformers import Pipeline
from transformers.modeling_outputs import QuestionAnsweringModelOutput

EXPORT_KEY = "uda_qa"  # config.json: the run's windowing and no-answer settings


@dataclass
class QuestionAnsweringWithAnswerabilityOutput(QuestionAnsweringModelOutput):
    """The span model's output plus ``answerability_logits`` (B, 2): [no answer, has answer]."""

    answerability_logits: torch.FloatTensor | None = None


class UdaQAWithAnswerability(BaseForQuestionAnswering):
    def __init__(self, config):
        super().__init__(config)
        settings = getattr(config, EXPORT_KEY, None) or {}
        p = settings.get("answerability_dropout")
        if p is None:
            p = getattr(config, "hidden_dropout_prob", 0.1)
        self.answerability = nn.Sequential(nn.Dropout(p), nn.Linear(config.hidden_size, 2))
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, start_positions=None,
                end_positions=None, output_hidden_states=None, return_dict=None, **kwargs):
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        out = super().forward(input_ids=input_ids, attention_mask=attention_mask, start_positions=start_positions,
                              end_positions=end_positions, output_hidden_states=True, return_dict=True, **kwargs)
        answerability = self.answerability(out.hidden_states[-1][:, 0])  # the first token's final state
        return QuestionAnsweringWithAnswerabilityOutput(
            loss=out.loss, start_logits=out.start_logits, end_logits=out.end_logits,
            hidden_states=out.hidden_states if output_hidden_states else None, attentions=out.attentions,
            answerability_logits=answerability)


# ----------------------------------------------------------------------------- the run's post-processing

def clip_question(tokenizer, question: str, max_question_length: int, suffix: str) -> str:
    """The question without leading whitespace, cut to its first ``max_question_length`` tokens (less the
    suffix's) at a token boundary, then ``suffix`` appended (the run's " [QUESTION]." marker, or "")."""
    budget = max(1, max_question_length - (len(tokenizer.tokenize(suffix)) if suffix else 0))
    q = question.lstrip()
    offsets = tokenizer([q], add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"][0]
    if len(offsets) > budget:
        q = q[:offsets[budget - 1][1]]
    return q.rstrip() + suffix if suffix else q


from tasks.common.spans import feature_candidates  # noqa: E402 (uda: written out on export)


def read_question(context: str, windows: list, n_best: int, max_answer_length: int, span_weight: float,
                  answerability_weight: float) -> dict:
    """Pool one question's windows (``start_logits``, ``end_logits``, ``answerability_logits``, ``offsets``)
    into the best span, the null score (the least confident window's start[0] + end[0]), the has-answer
    log-odds (the most confident window's) and the no-answer score (+inf without any valid span)."""
    cands = []
    null, log_odds = math.inf, -math.inf
    for w in windows:
        st = np.asarray(w["start_logits"], dtype=np.float64)
        en = np.asarray(w["end_logits"], dtype=np.float64)
        null = min(null, float(st[0] + en[0]))
        a = np.asarray(w["answerability_logits"], dtype=np.float64)
        log_odds = max(log_odds, float(a[1] - a[0]))
        cands.extend(feature_candidates(st, en, w["offsets"], n_best, max_answer_length))
    cands.sort(key=lambda c: -c[0])
    best = cands[0] if cands else None
    if best is None:
        score = math.inf
    else:
        score = 0.0
        if span_weight:
            score += span_weight * (null - best[0])
        if answerability_weight:
            score += answerability_weight * -log_odds
    return {"span_text": context[best[1]:best[2]] if best else "", "span_start": best[1] if best else None,
            "span_end": best[2] if best else None, "span_score": best[0] if best else None, "null_score": null,
            "has_answer_log_odds": log_odds, "no_answer_score": score}


class UdaQuestionAnsweringPipeline(Pipeline):
    """``qa(question=..., context=...)`` (strings, or lists of equal length; or ``qa({"question", "context"})``
    or a list of such dicts) -> {"answer", "start", "end", "span_text", "span_score", "no_answer_score",
    "threshold", "has_answer_prob"} per question. "answer" is "" (start = end = 0) when the no-answer score
    is above the threshold, else the best span ``context[start:end]``. ``threshold=`` (at construction or
    per call) replaces the saved one."""

    _load_tokenizer = True

    def check_model_type(self, supported_models):
        pass  # the model is this file's UdaQAWithAnswerability, which transformers' lists lack

    def _sanitize_parameters(self, threshold=None, **kwargs):
        if kwargs:
            raise TypeError(f"unknown arguments {sorted(kwargs)}: this pipeline takes question, context and "
                            f"threshold")
        post = {} if threshold is None else {"threshold": float(threshold)}
        return {}, {}, post

    def __call__(self, inputs=None, question=None, context=None, **kwargs):
        if inputs is None:
            if question is None or context is None:
                raise ValueError("give question= and context= (or a dict with 'question' and 'context')")
            if isinstance(question, str) and isinstance(context, str):
                inputs = {"question": question, "context": context}
            else:
                questions = [question] if isinstance(question, str) else list(question)
                contexts = [context] * len(questions) if isinstance(context, str) else list(context)
                if len(questions) != len(contexts):
                    raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts")
                inputs = [{"question": q, "context": c} for q, c in zip(questions, contexts)]
        if isinstance(inputs, dict):
            return super().__call__(inputs, **kwargs)
        out = []
        for item in inputs:  # one question at a time: all its windows go through the model as one batch
            out.append(super().__call__(item, **kwargs))
        return out

    @property
    def settings(self) -> dict:
        settings = getattr(self.model.config, EXPORT_KEY, None)
        if not settings:
            raise ValueError(f"the model's config.json has no '{EXPORT_KEY}' settings: not a reader saved by a "
                             f"squad_v2 run")
        return settings

    def preprocess(self, inputs):
        if not isinstance(inputs, dict) or not {"question", "context"} <= set(inputs):
            raise ValueError("each input needs a 'question' and a 'context'")
        s = self.settings
        question = clip_question(self.tokenizer, inputs["question"], s["max_question_length"],
                                 s.get("question_suffix", ""))
        enc = self.tokenizer([question], [inputs["context"]], truncation="only_second", max_length=s["max_length"],
                             stride=s["doc_stride"], return_overflowing_tokens=True, return_offsets_mapping=True)
        rows, offsets = [], []
        for f in range(len(enc["input_ids"])):
            seq = enc.sequence_ids(f)
            offsets.append([tuple(o) if k == 1 else None for o, k in zip(enc["offset_mapping"][f], seq)])
            rows.append({k: enc[k][f] for k in ("input_ids", "token_type_ids") if k in enc})
        batch = dict(self.tokenizer.pad(rows, padding=True, return_tensors="pt", padding_side="right"))
        return {"model_inputs": batch, "offsets": offsets, "context": inputs["context"]}

    def _forward(self, inputs):
        out = self.model(**inputs["model_inputs"])
        return {"start_logits": out.start_logits.float(), "end_logits": out.end_logits.float(),
                "answerability_logits": out.answerability_logits.float(), "offsets": inputs["offsets"],
                "context": inputs["context"]}

    def postprocess(self, outputs, threshold=None):
        s = self.settings
        if threshold is None:
            threshold = s.get("null_threshold")
        if threshold is None:
            raise ValueError("this folder holds no fitted no-answer threshold (it was saved before its run's test "
                             "evaluation, e.g. a checkpoint): pass threshold= (the run's results.json "
                             "test.null_threshold)")
        arrays = {k: outputs[k].cpu().numpy() for k in ("start_logits", "end_logits", "answerability_logits")}
        windows = [{"start_logits": arrays["start_logits"][i], "end_logits": arrays["end_logits"][i],
                    "answerability_logits": arrays["answerability_logits"][i], "offsets": o}
                   for i, o in enumerate(outputs["offsets"])]
        p = read_question(outputs["context"], windows, s["n_best"], s["max_answer_length"], s["null_span_weight"],
                          s["null_answerability_weight"])
        answered = not p["no_answer_score"] > threshold
        odds = p["has_answer_log_odds"]
        prob = None if not math.isfinite(odds) else (1.0 / (1.0 + math.exp(-odds)) if odds >= 0
                                                      else math.exp(odds) / (1.0 + math.exp(odds)))
        return {"answer": p["span_text"] if answered else "",
                "start": p["span_start"] if answered else 0, "end": p["span_end"] if answered else 0,
                "span_text": p["span_text"], "span_score": p["span_score"], "no_answer_score": p["no_answer_score"],
                "threshold": float(threshold),
                "has_answer_prob": prob}
