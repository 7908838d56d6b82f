"""A DPR-style multi-passage reader with a learned no-answer option, as a Task (``--task passages``).

Data, split and samples: tasks/passages/data.py (and tasks/passages/retrieval.py for BM25 over a SQuAD file);
model: tasks/passages/model.py; prediction and metrics: tasks/passages/postprocess.py.

Supervised loss of a labelled question with M passages (:func:`passage_reader_loss`):
    selection_loss_weight * CE(softmax([n, r_1..r_M]), target) + span_loss_weight * span loss
    + answerability_loss_weight * mean over its passages of CE(answerability_i, has_answer_i)
with target the positive passage's option, or the no-answer option n when the question has no
positive (unanswerable). The span loss is on the positive passage only, marginalised over the
answer's occurrences o in it: -log sum_o p_start(s_o) p_end(e_o), with start/end distributions over
that passage's context tokens (per passage, DPR) or over the context tokens of all M passages
together (``passages.shared_normalization``, Clark and Gardner). has_answer_i is whether passage i
holds an answer of an answerable question (never for an unanswerable one). The heads are separate
SupervisedTerm's, so TSA masks each on its own gold probability: selection on p(target option)
with K = M + 1, spans on sum_o p_start(s_o) p_end(e_o) with K = ``passages.span_tsa_num_classes``,
answerability on the geometric mean over the passages of p(has_answer_i) with K = 2.
A question without a span target (unanswerable, or its answer cut off by truncation) has no gold
span: its span term's gold probability is +inf, above every TSA threshold, so TSA leaves it out of
the span term's mean instead of counting a zero loss.

Consistency training: an unlabelled question with its top ``passages.unsup_passages`` retrieved
passages (no positive inserted: its gold is never read). The augmented view changes the question
only; passages are the same. Compared distributions (:meth:`PassagesTask.consistency_logits`):
the selection distribution over [no answer, passages] (one row per question), each real passage's
answerability distribution (one row per passage), and each real passage's start and end
distributions over the same context tokens in both views (one row per passage:
tasks.common.windows.consistency_views aligns the slots, the first-token slot dropped since spans here
have no null slot; always per passage, whatever the normalisation in the supervised loss). Per
distribution, uda.temperature sharpens the original view's target (selection: a peakier choice
among no-answer and passages; spans: a peakier start or end position), and uda.confidence keeps a
row only when its unsharpened maximum probability is above the threshold (selection: the
question's top option; spans: that passage's top start or end token).

Evaluation follows the path both readers share (tasks/common/reading.py), after the weights fitted on
dev (fusion, verifier, single reader) turn the raw outputs into predictions (:meth:`PassagesTask.evaluate`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from augment.build import build_augmenter
from tasks.passages.config import PassagesConfig
from tasks.passages.data import answer_occurrences, encode_pairs, first_segment_budget, first_segments, \
    load_passage_records, occurrence_tokens, pad_passages, split_records, trainable, training_passages
from tasks.passages.model import build_passage_reader
from tasks.common.qa_reader import load_run_reader
from tasks.common.reading import (answer_metrics, evaluate_predictions, finish_metrics, read_windows,
                                  write_prediction_lines)
from tasks.common.spans import fit_null_threshold
from tasks.common.squad import require_unlabeled, start_held_out
from tasks.common.windows import align_span_logits, build_features, consistency_views
from tasks.passages.postprocess import (KS, MIX_GRID, VERIFIER_GRID, decode_question, fit_fusion_weight,
                                        mixed_no_answer, passage_spans, prediction_record, reader_metrics,
                                        retriever_scores, standardiser)
from tasks.passages.retrieval import recall_at_k
from uda.data import DataError
from uda.evaluation import length_sorted_batches, pad_right, run_inference
from uda.hub import load_tokenizer, resolve_model_path
from uda.task import RunContext, SupervisedOutput, SupervisedTerm, Task, TaskData

_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "passage_mask", "context_mask")
_MASKED = -1e9  # finite stand-in for -inf (as uda.losses): a fully masked row stays finite, in both passes
EVAL_CHUNK = 256  # questions whose features and logits are held at once in evaluation


def model_inputs(batch: dict) -> dict:
    return {k: batch[k] for k in _MODEL_INPUTS if k in batch}


# ----------------------------------------------------------------------------- loss maths

def selection_logits(no_answer: torch.Tensor, relevance: torch.Tensor, passage_mask: torch.Tensor) -> torch.Tensor:
    """(B,), (B, M), (B, M) -> (B, M + 1) logits of [no answer, passage 1..M]; padding passages -inf."""
    return torch.cat([no_answer.float()[:, None], relevance.float().masked_fill(~passage_mask, float("-inf"))], 1)


def span_log_probs(logits: torch.Tensor, span_mask: torch.Tensor, shared: bool) -> torch.Tensor:
    """(B, M, T) start or end logits -> log-probabilities over the context tokens (span_mask), per
    passage or, ``shared``, over the tokens of all M passages of a question together."""
    x = logits.float().masked_fill(~span_mask, _MASKED)
    if shared:
        B, M, T = x.shape
        return F.log_softmax(x.reshape(B, M * T), -1).reshape(B, M, T)
    return F.log_softmax(x, -1)


def passage_reader_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, relevance: torch.Tensor,
                        no_answer: torch.Tensor, span_mask: torch.Tensor, passage_mask: torch.Tensor,
                        positive: torch.Tensor, occ_start: torch.Tensor, occ_end: torch.Tensor,
                        selection_weight: float, span_weight: float, shared_normalization: bool = False,
                        span_num_classes: int = 2, answerability_logits: Optional[torch.Tensor] = None,
                        passage_has_answer: Optional[torch.Tensor] = None,
                        answerability_weight: float = 0.0) -> SupervisedOutput:
    """Per-question loss (see the module doc) as supervised terms: selection, span, answerability.

    start/end_logits (B, M, T); relevance (B, M); no_answer (B,); span_mask (B, M, T) True at
    context tokens; passage_mask (B, M); positive (B,) slot of the positive passage, -1 for none
    (target: the no-answer option); occ_start/occ_end (B, O) token positions of the answer's
    occurrences in the positive passage, -1 for none; answerability_logits (B, M, 2) and
    passage_has_answer (B, M) for the answerability term (``answerability_weight`` > 0).
    """
    B, M, _ = start_logits.shape
    rows = torch.arange(B, device=start_logits.device)
    sel = selection_logits(no_answer, relevance, passage_mask)  # (B, M + 1)
    target = positive + 1  # option 0 is "no answer"
    ce_sel = F.cross_entropy(sel, target, reduction="none")
    p_sel = torch.exp(-ce_sel).detach()

    mask = span_mask & passage_mask[..., None]
    pos = positive.clamp(min=0)
    lp_start = span_log_probs(start_logits, mask, shared_normalization)[rows, pos]  # (B, T)
    lp_end = span_log_probs(end_logits, mask, shared_normalization)[rows, pos]
    valid = (occ_start >= 0) & (positive >= 0)[:, None]  # (B, O)
    pair = lp_start.gather(1, occ_start.clamp(min=0)) + lp_end.gather(1, occ_end.clamp(min=0))
    # masked occurrences at a finite -1e9: a row without any keeps a finite gradient (times 0)
    marginal = torch.logsumexp(pair.masked_fill(~valid, _MASKED), dim=1)  # log sum_o p_s(s_o) p_e(e_o)
    has_span = valid.any(dim=1)
    span = torch.where(has_span, -marginal, torch.zeros_like(marginal))
    p_span = torch.where(has_span, marginal.exp(), torch.full_like(marginal, float("inf"))).detach()

    per_example = selection_weight * ce_sel + span_weight * span
    gold_prob = p_sel * torch.where(has_span, p_span, torch.ones_like(p_span))
    best_s, best_e = lp_start.argmax(-1), lp_end.argmax(-1)
    span_right = ((occ_start == best_s[:, None]) & (occ_end == best_e[:, None]) & valid).any(dim=1)
    correct = ((sel.argmax(-1) == target) & (span_right | ~has_span)).float()
    terms = [SupervisedTerm("selection", ce_sel, p_sel, M + 1, selection_weight),
             SupervisedTerm("span", span, p_span, span_num_classes, span_weight)]
    if answerability_weight > 0:
        if answerability_logits is None or passage_has_answer is None:
            raise ValueError("answerability_weight > 0 needs answerability_logits and passage_has_answer")
        ce = F.cross_entropy(answerability_logits.float().reshape(B * M, 2), passage_has_answer.reshape(-1).long(),
                             reduction="none").view(B, M)
        real = passage_mask.float()
        ce_ans = (ce * real).sum(1) / real.sum(1).clamp(min=1.0)
        per_example = per_example + answerability_weight * ce_ans
        terms.append(SupervisedTerm("answerability", ce_ans, torch.exp(-ce_ans).detach(), 2, answerability_weight))
    return SupervisedOutput(per_example_loss=per_example, gold_prob=gold_prob, correct=correct,
                            terms=[t for t in terms if t.weight > 0])


# ----------------------------------------------------------------------------- the task

class PassagesTask(Task):
    name = "passages"
    main_metric = "f1"  # dev F1 of the final answers at the dev-fitted no-answer threshold
    # checkpoints kept: the top-k by dev EM and the top-k by dev F1 (pointers best_em, best_f1)
    rank_metrics = ("em", "f1")
    selectable_metrics = ("em", "f1", "exact", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_exact",
                          "best_f1", "top_f1", "no_answer_auc", *(f"passage@{k}" for k in KS), *(f"em@{k}" for k in KS))

    def __init__(self) -> None:
        self.tokenizer = None
        self.augmenter = None
        self.rng = np.random.default_rng(0)  # augmentation
        self.sample_rng = np.random.default_rng(1)  # passages of the training samples
        self.max_length = 350
        self.p: Any = PassagesConfig()
        self.model_path = ""
        self.dev_records: list[dict] = []
        self._single: Optional[tuple] = None  # (config, tokenizer, reader) of passages.single_reader, loaded once

    # ------------------------------------------------------------------ setup
    def setup(self, cfg: Any, run: RunContext) -> TaskData:
        from tqdm.auto import tqdm

        self.p = cfg.passages
        self.max_length = cfg.model.max_length
        path = Path(self.p.retrieval_file) if self.p.retrieval_file else run.run_dir / "data" / "retrieval.jsonl.gz"
        if os.environ.get("RANK", "0") != "0":
            path = None  # every process retrieves the same; the main one writes the file
        records, source, retrieval = load_passage_records(cfg, path)
        split = split_records(records, cfg)
        by_id = {r["id"]: r for r in records}
        retrieval["recall_by_split"] = {name: recall_at_k([by_id[r["id"]] for r in split[name]])
                                        for name in ("test", "dev", "train", "unlabeled")}
        test_titles = set(split["info"]["articles"]["test"])  # every question of the test articles (no data.max_test)
        rt = retrieval["recall_test_articles"] = recall_at_k(
            [r for r in records if (r["article"] if r.get("article") is not None else f"question:{r['id']}")
             in test_titles])
        tqdm.write("retrieval recall on the test articles (answerable questions: {:.0f}): ".format(rt["answerable"])
                   + ", ".join(f"{k} {v:.3f}" for k, v in rt.items() if k.startswith("recall")))
        self.model_path = resolve_model_path(cfg.model.name_or_path)
        start_held_out(self.model_path, split["info"]["articles"])
        if self.p.single_reader is not None:
            single = Path(self.p.single_reader)
            for need in ("config.yaml", "model"):
                if not (single / need).exists():
                    raise DataError(f"passages.single_reader '{single}' has no {need}: pass a finished --task "
                                    f"squad_v2 run folder")
            start_held_out(single / "model", split["info"]["articles"])
        self.tokenizer = load_tokenizer(self.model_path, cfg.model.trust_remote_code, cfg.model.max_length)
        self.tokenizer.padding_side = "right"
        self.rng = np.random.default_rng(cfg.seed + 1)
        self.sample_rng = np.random.default_rng([cfg.seed, 7])
        train = [r for r in split["train"] if trainable(r, self.p.train_top_k)]
        self.dev_records = split["dev"]
        require_unlabeled(split["unlabeled"], run.wants_unlabeled, "passages")
        if run.wants_unlabeled:
            self.augmenter = build_augmenter(cfg.augment, [u["question"] for u in split["unlabeled"]])
        info = {"source": source, "retrieval": retrieval, **split["info"],
                "train_without_positive_dropped": len(split["train"]) - len(train)}
        return TaskData(train=train, dev=split["dev"], test=split["test"],
                        unlabeled=split["unlabeled"] if run.wants_unlabeled else [], info=info,
                        tsa_num_classes=self.p.span_tsa_num_classes)

    def build_model(self, cfg: Any) -> torch.nn.Module:
        return build_passage_reader(self.model_path, cfg.model.dropout, cfg.model.trust_remote_code,
                                    self.p.similarity_scale)

    # ------------------------------------------------------------------ features and batches
    def _firsts(self, questions: Sequence[str], titles: Sequence[str]) -> list[str]:
        return first_segments(self.tokenizer, questions, titles, self.p.max_question_length, self.p.max_title_length)

    def _budget(self) -> int:
        return first_segment_budget(self.p.max_question_length, self.p.max_title_length)

    def features(self, questions: Sequence[str], passage_lists: Sequence[Sequence[dict]],
                 num_passages: int) -> tuple[list[dict], list[list[dict]], torch.Tensor]:
        """Features of every (question, passage) pair, question-major, each question's passages padded
        to ``num_passages``; the padded passage lists; passage_mask (B, M)."""
        padded, masks = zip(*(pad_passages(list(ps), num_passages) for ps in passage_lists))
        firsts = self._firsts([q for q in questions for _ in range(num_passages)],
                              [c["title"] for ps in padded for c in ps])
        feats = encode_pairs(self.tokenizer, firsts, [c["text"] for ps in padded for c in ps], self.max_length,
                             self._budget())
        return feats, [list(ps) for ps in padded], torch.tensor(masks, dtype=torch.bool)

    def _inputs(self, feats: Sequence[dict], passage_mask: torch.Tensor) -> dict:
        batch = pad_right([f["input_ids"] for f in feats], self.tokenizer.pad_token_id)
        if "token_type_ids" in feats[0]:
            batch["token_type_ids"] = pad_right([f["token_type_ids"] for f in feats], 0)["input_ids"]
        batch["span_mask"] = pad_right([[int(m) for m in f["ctx_mask"]] for f in feats], 0)["input_ids"].bool()
        batch["context_mask"] = batch["span_mask"]  # (B*M, T): stays flat where span_mask is reshaped
        batch["passage_mask"] = passage_mask
        return batch

    def collate_labeled(self, examples: list) -> dict:
        M, O = self.p.train_passages, self.p.max_occurrences
        chosen, slots = zip(*(training_passages(r, M, self.p.train_top_k, self.sample_rng) for r in examples))
        feats, padded, passage_mask = self.features([r["question"] for r in examples], chosen, M)
        batch = self._inputs(feats, passage_mask)
        B, T = len(examples), batch["input_ids"].shape[1]
        batch["span_mask"] = batch["span_mask"].view(B, M, T)
        occ = torch.full((2, B, O), -1, dtype=torch.long)
        for b, (r, slot) in enumerate(zip(examples, slots)):
            if slot is None:
                continue
            spans = answer_occurrences(padded[b][slot]["text"], r["answers"], O)
            for o, (s, e) in enumerate(occurrence_tokens(feats[b * M + slot]["offsets"], spans)[:O]):
                occ[0, b, o], occ[1, b, o] = s, e
        batch["positive"] = torch.tensor([-1 if s is None else s for s in slots], dtype=torch.long)
        batch["passage_has_answer"] = torch.tensor(
            [[bool(r["answers"]) and bool(c.get("has_answer", False)) for c in ps] for r, ps in zip(examples, padded)],
            dtype=torch.bool) & passage_mask
        batch["occ_start"], batch["occ_end"] = occ[0], occ[1]
        return batch

    def collate_unlabeled(self, examples: list) -> tuple[dict, dict]:
        M = self.p.unsup_passages
        questions = [e["question"] for e in examples]
        augmented = self.augmenter(questions, self.rng)
        padded, masks = zip(*(pad_passages(list(e["ctxs"][:M]), M) for e in examples))
        titles = [c["title"] for ps in padded for c in ps]
        views = consistency_views(self.tokenizer, self._firsts([q for q in questions for _ in range(M)], titles),
                                  self._firsts([q for q in augmented for _ in range(M)], titles),
                                  [c["text"] for ps in padded for c in ps], self.max_length, self._budget())
        passage_mask = torch.tensor(masks, dtype=torch.bool)
        for v in views:
            v["passage_mask"] = passage_mask
            # spans here have no null slot: drop the first-token slot consistency_views puts first
            v["align_index"], v["align_mask"] = v["align_index"][:, 1:], v["align_mask"][:, 1:]
            # the context tokens both views keep (what the segment similarity reads)
            v["context_mask"] = torch.zeros_like(v["input_ids"], dtype=torch.bool).scatter_(
                1, v["align_index"], v["align_mask"])
        return views

    # ------------------------------------------------------------------ losses
    def supervised(self, model: torch.nn.Module, batch: dict) -> SupervisedOutput:
        out = model(**model_inputs(batch))
        return passage_reader_loss(out.start_logits, out.end_logits, out.relevance_logits, out.no_answer_logits,
                                   batch["span_mask"], batch["passage_mask"], batch["positive"], batch["occ_start"],
                                   batch["occ_end"], self.p.selection_loss_weight, self.p.span_loss_weight,
                                   self.p.shared_normalization, self.p.span_tsa_num_classes,
                                   out.answerability_logits, batch["passage_has_answer"],
                                   self.p.answerability_loss_weight)

    def consistency_logits(self, model: torch.nn.Module, batch: dict) -> list[torch.Tensor]:
        out = model(**model_inputs(batch))
        mask = batch["passage_mask"]
        logits = [selection_logits(out.no_answer_logits, out.relevance_logits, mask)]  # (B, M + 1)
        real = mask.reshape(-1)  # the same passages are real in both views
        logits.append(out.answerability_logits.reshape(real.shape[0], 2)[real])  # (passages, 2)
        if self.p.span_consistency:
            idx, amask = batch["align_index"], batch["align_mask"]
            for x in (out.start_logits, out.end_logits):
                logits.append(align_span_logits(x.reshape(real.shape[0], -1), idx, amask)[real])  # (passages, C)
        return logits

    # ------------------------------------------------------------------ evaluation
    def predict(self, model: torch.nn.Module, records: Sequence[dict], accelerator: Any,
                batch_size: int) -> list[dict]:
        """One prediction per question (tasks/passages/postprocess.py), in order. ``batch_size`` counts
        (question, passage) sequences: a batch holds batch_size // predict_passages questions."""
        M, L = self.p.predict_passages, self.max_length
        per_batch = max(1, batch_size // M)
        preds: list[dict] = []
        for c0 in range(0, len(records), EVAL_CHUNK):  # bounded memory for features and logits
            chunk = records[c0:c0 + EVAL_CHUNK]
            feats, padded, passage_mask = self.features([r["question"] for r in chunk],
                                                        [r["ctxs"][:M] for r in chunk], M)
            lengths = [max(len(feats[i * M + j]["input_ids"]) for j in range(M)) for i in range(len(chunk))]

            def collate(indices: list[int]) -> dict:
                batch = self._inputs([feats[i * M + j] for i in indices for j in range(M)], passage_mask[indices])
                return model_inputs(batch)

            def forward(batch: dict) -> dict:
                out = model(**batch)
                b, T = out.start_logits.shape[0], out.start_logits.shape[2]

                def flat(x: torch.Tensor) -> torch.Tensor:  # (b, M, T) -> (b, M * L): one width for every batch
                    return F.pad(x.float(), (0, L - T), value=float("-inf")).reshape(b, M * L)

                ans = out.answerability_logits.float()
                return {"start": flat(out.start_logits), "end": flat(out.end_logits),
                        "relevance": out.relevance_logits.float(), "no_answer": out.no_answer_logits.float()[:, None],
                        "answerability": ans[..., 1] - ans[..., 0]}  # (b, M) has-answer log-odds

            indices, outputs = run_inference(forward, length_sorted_batches(lengths, per_batch), collate, accelerator)
            rows = np.argsort(indices)
            arrays = {k: v.numpy()[rows] for k, v in outputs.items()}
            for i, r in enumerate(chunk):
                real = [j for j, m in enumerate(passage_mask[i].tolist()) if m]
                spans = passage_spans(arrays["start"][i].reshape(M, L), arrays["end"][i].reshape(M, L),
                                      [feats[i * M + j]["offsets"] for j in range(M)],
                                      [psg["text"] for psg in padded[i]], real, self.p.n_best, self.p.max_answer_length)
                preds.append({"id": r["id"], "passages": padded[i], "real": real,
                              "relevance": arrays["relevance"][i].astype(np.float64),
                              "no_answer": float(arrays["no_answer"][i, 0]), "spans": spans,
                              "answerability": arrays["answerability"][i].astype(np.float64),
                              "retrieval": retriever_scores(padded[i], real)})
        return preds

    def decode(self, raw: Sequence[dict], weight: Optional[float], verifier_weight: float = 0.0) -> list[dict]:
        """Predictions (tasks/passages/postprocess.py) of :meth:`predict`'s outputs, the passages ranked by
        the fused score with ``weight`` (None: by relevance alone), the no-answer score with the verifier
        weighed by ``verifier_weight``."""
        return [decode_question(q["id"], q["passages"], q["real"], q["relevance"], q["no_answer"], q["spans"],
                                self.p.span_passages, q["retrieval"], weight, q["answerability"], verifier_weight)
                for q in raw]

    def verifier_weight(self, dev_records: Sequence[dict], dev_raw: Sequence[dict],
                        weight: Optional[float]) -> tuple[float, dict]:
        """``passages.verifier_weight`` when set; else the value of ``VERIFIER_GRID`` whose dev-fitted
        threshold gives the best dev F1 (the smallest on a tie); 0 without dev questions or threshold
        fitting. Returns (weight, dev F1 of every weight tried)."""
        if self.p.verifier_weight is not None:
            return self.p.verifier_weight, {}
        if not dev_raw or not self.p.fit_threshold_on_dev:
            return 0.0, {}
        return self.fit_on_dev(dev_records, VERIFIER_GRID, lambda v: self.decode(dev_raw, weight, v))

    def fit_on_dev(self, dev_records: Sequence[dict], grid: Sequence[float],
                   dev_preds_for: Any) -> tuple[float, dict]:
        """The value of ``grid`` whose dev predictions (``dev_preds_for(value)``), at their dev-fitted
        threshold, give the best dev F1, the smallest on a tie. Returns (value, dev F1 of each)."""
        tried = {}
        for v in grid:
            preds = dev_preds_for(v)
            tried[float(v)] = self.score(dev_records, preds, self.fit_threshold(dev_records, preds))["f1"]
        best = max(tried.values())
        return next(v for v in tried if tried[v] == best), tried

    def fusion_weight(self, dev_raw: Sequence[dict]) -> tuple[Optional[float], dict]:
        """``passages.fusion_weight`` when set, else the weight fitted on dev (:func:`fit_fusion_weight`)."""
        if self.p.fusion_weight is not None:
            return self.p.fusion_weight, {}
        if not dev_raw:
            return None, {}
        return fit_fusion_weight([(q["relevance"][q["real"]], q["retrieval"][q["real"]],
                                   [bool(q["passages"][j].get("has_answer", False)) for j in q["real"]])
                                  for q in dev_raw])

    def single_reader_scores(self, records: Sequence[dict], raw: Sequence[dict], preds: Sequence[dict],
                             accelerator: Any, batch_size: int) -> list[float]:
        """The no-answer score of ``passages.single_reader`` reading each question's top-ranked passage
        (+inf for a question without passages), read as that squad_v2 run reads a question."""
        if self._single is None:
            cfg, tokenizer, model = load_run_reader(self.p.single_reader)
            self._single = (cfg, tokenizer, model.to(accelerator.device).eval())
        cfg, tokenizer, model = self._single
        examples, rows = [], []
        for k, (r, q, p) in enumerate(zip(records, raw, preds)):
            if p["passages"]:
                top = next(psg for psg in q["passages"] if psg["id"] == p["passages"][0]["id"])
                # an id per (question, passage): a squad_v2 example of its own
                examples.append({"id": f"{r['id']}|{top['id']}", "title": top.get("title", ""),
                                 "question": r["question"], "context": top["text"], "answers": [],
                                 "is_impossible": True})
                rows.append(k)
        scores = [math.inf] * len(preds)
        if examples:
            feats = build_features(tokenizer, examples, cfg.model.max_length, cfg.qa.doc_stride,
                                   cfg.qa.max_question_length, with_labels=False)
            singles = read_windows(model, tokenizer, examples, feats, cfg.qa, accelerator, batch_size)
            for k, single in zip(rows, singles):
                scores[k] = float(single["no_answer_score"])
        return scores

    def mix_single_reader(self, dev_records: Sequence[dict], dev_raw: Sequence[dict], dev_preds: Sequence[dict],
                          others: Sequence[tuple[Sequence[dict], Sequence[dict], list[dict]]], accelerator: Any,
                          batch_size: int) -> float:
        """Rewrite the no-answer scores of ``dev_preds`` and of each (records, raw, preds) in ``others`` with
        :func:`mixed_no_answer` (the reader's kept as ``reader_no_answer_score``, the single reader's as
        ``single_reader_score``); u is ``passages.single_reader_weight``, or the value of ``MIX_GRID``
        whose dev-fitted threshold gives the best dev F1 (the smallest on a tie). Returns u."""
        groups = [(dev_records, dev_raw, dev_preds), *others]
        for records, raw, preds in groups:
            for p, s in zip(preds, self.single_reader_scores(records, raw, preds, accelerator, batch_size)):
                p["reader_no_answer_score"], p["single_reader_score"] = p["no_answer_score"], s
        stats = (standardiser([p["reader_no_answer_score"] for p in dev_preds]),
                 standardiser([p["single_reader_score"] for p in dev_preds]))

        def apply(preds: Sequence[dict], u: float) -> Sequence[dict]:
            for p in preds:
                p["no_answer_score"] = mixed_no_answer(p["reader_no_answer_score"], p["single_reader_score"], u, *stats)
            return preds

        u = self.p.single_reader_weight
        if u is None:
            u, _ = self.fit_on_dev(dev_records, MIX_GRID, lambda v: apply(dev_preds, v))
        for _, _, preds in groups:
            apply(preds, u)
        return float(u)

    @staticmethod
    def fit_threshold(records: Sequence[dict], preds: Sequence[dict]) -> float:
        return fit_null_threshold(preds, [{"id": r["id"], "answers": [{"text": a} for a in r["answers"]]}
                                          for r in records])

    def score(self, records: Sequence[dict], preds: Sequence[dict], threshold: float) -> dict[str, float]:
        gold = {r["id"]: list(r["answers"]) for r in records}
        metrics = answer_metrics(gold, preds, threshold)
        metrics["em"] = metrics["exact"]
        metrics.update(reader_metrics(gold, preds))
        # how well the no-answer score ranks answerable above unanswerable questions, whatever the threshold
        return finish_metrics(metrics, gold, preds, threshold, "no_answer_auc",
                              [-min(p["no_answer_score"], 1e30) for p in preds])

    def evaluate(self, model: torch.nn.Module, examples: Sequence[Any], accelerator: Any,
                 batch_size: int, split: str, out_dir: Any = None) -> dict[str, float]:
        """Official SQuAD 2.0 metrics of the final answers (``em`` = ``exact``, ``f1``, HasAns/NoAns, in
        %) at the no-answer threshold fitted on dev (on dev: on these predictions, so ``f1`` is
        ``best_f1``; elsewhere: on the dev split with this model), plus passage@k, em@k and top_f1.
        Writes predictions_<split>.jsonl (and predictions_dev.jsonl) when ``out_dir`` is given."""
        raw = self.predict(model, examples, accelerator, batch_size)
        dev_raw = raw if split == "dev" else (self.predict(model, self.dev_records, accelerator, batch_size)
                                              if self.dev_records else [])
        weight, _ = self.fusion_weight(dev_raw)
        verifier, _ = self.verifier_weight(examples if split == "dev" else self.dev_records, dev_raw, weight)
        preds = self.decode(raw, weight, verifier)
        dev_preds = None if split == "dev" else self.decode(dev_raw, weight, verifier)
        mix = None
        if self.p.single_reader is not None and (dev_raw or self.p.single_reader_weight is not None):
            dev_records = examples if split == "dev" else self.dev_records
            mix = self.mix_single_reader(dev_records, dev_raw, preds if split == "dev" else dev_preds,
                                         [] if split == "dev" else [(examples, raw, preds)], accelerator, batch_size)
        metrics, _, _ = evaluate_predictions(
            self, split, examples, preds, self.dev_records, dev_preds, null_threshold=self.p.null_threshold,
            fit_on_dev=self.p.fit_threshold_on_dev, fit_dev_on_itself=True, out_dir=out_dir,
            write=accelerator.is_main_process)
        if weight is not None:
            metrics["fusion_weight"] = float(weight)
        metrics["verifier_weight"] = float(verifier)
        if mix is not None:
            metrics["single_reader_weight"] = float(mix)
        # the retriever's own order on the same questions: what the reader's passage@1 must not fall below
        metrics["retriever_passage@1"] = reader_metrics({r["id"]: list(r["answers"]) for r in examples},
                                                        self.decode(raw, 0.0), ks=(1,))["passage@1"]
        return metrics

    @staticmethod
    def write_predictions(out_dir: Path, split: str, records: Sequence[dict], preds: Sequence[dict],
                          threshold: float) -> None:
        """predictions_<split>.jsonl: per question, the gold answers, the top passages (relevance,
        selection probability, has_answer, top spans), the final answer and the no-answer score."""
        write_prediction_lines(out_dir, split, (prediction_record(r, p, threshold) for r, p in zip(records, preds)))

    # ------------------------------------------------------------------ saving
    def save(self, model: torch.nn.Module, out_dir: Any) -> None:
        out = Path(out_dir)
        model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "sample_rng": self.sample_rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.sample_rng.bit_generator.state = state["sample_rng"]
