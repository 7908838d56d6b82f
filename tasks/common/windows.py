"""(question, context) pairs as token windows, what both extractive readers feed their encoder.

A window (:func:`build_features`) is the question, cut to its token budget (:func:`clip_questions`), and
a stretch of the context; a long context becomes several windows sharing ``doc_stride`` tokens
(transformers' run_qa). With a tokenizer that knows the ``[QUESTION]`` token (a start built by
``uda-qa-start``, whose synthetic questions point at their answer from it), a real question ends in
that token too (:data:`QUESTION_SUFFIX`, Splinter's format). The multi-passage reader reads the first
window of each (question and title, passage) pair.

Consistency training changes the question only: :func:`consistency_views` gives the two views of a
pair cut to the same context tokens and the slots to compare, and :func:`align_span_logits` gathers a
view's start or end logits at those slots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence

if TYPE_CHECKING:
    import torch

QUESTION_TOKEN = "[QUESTION]"
# What fine-tuning appends to a real question when the tokenizer knows the token (Splinter's format):
# the real question then ends in the same token the synthetic ones point from.
QUESTION_SUFFIX = f" {QUESTION_TOKEN}."


def question_suffix(tokenizer: Any) -> str:
    """`` [QUESTION].`` when the tokenizer knows the ``[QUESTION]`` token (a start built by
    ``uda-qa-start``, whose synthetic questions point at their answer from that token), else ''."""
    unk = tokenizer.unk_token_id
    tid = tokenizer.convert_tokens_to_ids(QUESTION_TOKEN)
    return QUESTION_SUFFIX if tid is not None and tid != unk else ""


def clip_questions(tokenizer: Any, questions: Sequence[str], max_question_length: int,
                   mark: bool = True) -> list[str]:
    """Questions without leading whitespace (some SQuAD questions have a lot), cut to at most
    ``max_question_length`` tokens (cut at a token boundary of the original text). With ``mark`` and a
    tokenizer that knows ``[QUESTION]`` (:func:`question_suffix`), each question then ends in
    `` [QUESTION].``, inside the same token budget."""
    suffix = question_suffix(tokenizer) if mark else ""
    budget = max(1, max_question_length - (len(tokenizer.tokenize(suffix)) if suffix else 0))
    out = [q.lstrip() for q in questions]
    enc = tokenizer(out, add_special_tokens=False, return_offsets_mapping=True)
    for i, offsets in enumerate(enc["offset_mapping"]):
        if len(offsets) > budget:
            out[i] = out[i][:offsets[budget - 1][1]]
    return [q.rstrip() + suffix for q in out] if suffix else out


def build_features(tokenizer: Any, examples: Sequence[dict], max_length: int, doc_stride: int,
                   max_question_length: int, with_labels: bool, mark: bool = True) -> list[dict]:
    """Tokenise (question, context) pairs into features; a long context becomes several windows.

    ``doc_stride`` is the number of context tokens consecutive windows share (the ``stride`` of
    transformers tokenizers, as in its run_qa example). Each feature holds ``input_ids``,
    ``token_type_ids`` (when the tokenizer makes them), ``example_index``, ``id`` (the question's id,
    when the example has one: a run's ``labeled_ids.txt`` is written from it), ``offsets`` (the
    character span of each token in the context; None for question, special and padding tokens) and
    ``span_mask`` (True at position 0, the no-answer slot, and at context tokens). ``mark``: questions
    end in `` [QUESTION].`` when the tokenizer knows that token (:func:`clip_questions`). With labels:
    ``start_position``/``end_position`` of the first gold answer's tokens, both 0 (the first token)
    when the question is unanswerable or the answer is not wholly inside this window, and
    ``answerable`` (1 when this window holds the answer, else 0).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("QA features need a fast tokenizer (offset mappings)")
    if tokenizer.padding_side != "right":
        raise ValueError("QA features need a tokenizer that pads on the right (the question comes first)")
    questions = clip_questions(tokenizer, [e["question"] for e in examples], max_question_length, mark)
    enc = tokenizer(questions, [e["context"] for e in examples], truncation="only_second", max_length=max_length,
                    stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True)
    features = []
    for f, ex_idx in enumerate(enc["overflow_to_sample_mapping"]):
        seq = enc.sequence_ids(f)
        offsets = [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][f], seq)]
        feat = {"input_ids": enc["input_ids"][f], "example_index": int(ex_idx), "offsets": offsets,
                "span_mask": [i == 0 or s == 1 for i, s in enumerate(seq)]}
        if examples[ex_idx].get("id") is not None:
            feat["id"] = str(examples[ex_idx]["id"])
        if "token_type_ids" in enc:
            feat["token_type_ids"] = enc["token_type_ids"][f]
        if with_labels:
            start, end = _label_span(examples[ex_idx], offsets)
            feat.update(start_position=start, end_position=end, answerable=int(start > 0))
        features.append(feat)
    return features


def _label_span(example: dict, offsets: Sequence[Optional[tuple]]) -> tuple[int, int]:
    """Token (start, end) of the first gold answer inside this window, or (0, 0)."""
    if example["is_impossible"] or not example["answers"]:
        return 0, 0
    a = example["answers"][0]
    start_char, end_char = a["answer_start"], a["answer_start"] + len(a["text"])
    ctx = [i for i, o in enumerate(offsets) if o is not None]
    if not ctx or offsets[ctx[0]][0] > start_char or offsets[ctx[-1]][1] < end_char:
        return 0, 0
    # the token holding the first answer character, and the one holding the last
    start = next(i for i in ctx if offsets[i][1] > start_char)
    end = next(i for i in reversed(ctx) if offsets[i][0] < end_char)
    return start, end


def collate_features(tokenizer: Any, features: Sequence[dict], with_labels: bool) -> dict:
    """Pad features (right) into model inputs + ``span_mask`` (+ labels)."""
    import torch

    keys = ["input_ids"] + (["token_type_ids"] if "token_type_ids" in features[0] else [])
    batch = dict(tokenizer.pad([{k: f[k] for k in keys} for f in features], return_tensors="pt"))
    width = batch["input_ids"].shape[1]
    batch["span_mask"] = torch.tensor([f["span_mask"] + [False] * (width - len(f["span_mask"])) for f in features],
                                      dtype=torch.bool)
    if with_labels:
        for k in ("start_position", "end_position", "answerable"):
            batch[k] = torch.tensor([f[k] for f in features], dtype=torch.long)
    return batch


# ----------------------------------------------------------------------------- consistency views

def align_span_logits(logits: torch.Tensor, align_index: torch.Tensor, align_mask: torch.Tensor) -> torch.Tensor:
    """(B, T) token logits -> (B, C) logits at the aligned slots (first token, then the shared context
    tokens); slots beyond an example's context are -inf."""
    return logits.float().gather(1, align_index).masked_fill(~align_mask, float("-inf"))


def consistency_views(tokenizer: Any, questions: Sequence[str], aug_questions: Sequence[str],
                      contexts: Sequence[str], max_length: int, max_question_length: int) -> tuple[dict, dict]:
    """Model inputs of the original and augmented views of (question, context) pairs, plus
    ``align_index``/``align_mask`` (B, C) that pick the same slots in both: the first token (the
    no-answer slot) and the first L context tokens, L the shorter of the two views' context windows
    (a longer question leaves less room), the longer view being cut to those L tokens."""
    import torch

    views = []
    for qs in (questions, aug_questions):
        qs = clip_questions(tokenizer, qs, max_question_length)
        enc = tokenizer(qs, list(contexts), truncation="only_second", max_length=max_length)
        rows = []
        for i in range(len(qs)):
            seq = enc.sequence_ids(i)
            ctx = [j for j, s in enumerate(seq) if s == 1]
            row = {k: enc[k][i] for k in enc.keys() if k in ("input_ids", "token_type_ids")}
            rows.append((row, ctx[0] if ctx else len(seq) - 1, len(ctx)))
        views.append(rows)
    out_rows: tuple[list, list] = ([], [])
    slots = []
    for (r0, s0, n0), (r1, s1, n1) in zip(*views):
        n = min(n0, n1)
        cut = []
        for row, s, m in ((r0, s0, n0), (r1, s1, n1)):
            # keep the question part, the first n context tokens and the trailing special tokens
            cut.append({k: v[:s + n] + v[s + m:] for k, v in row.items()})
        if cut[0]["input_ids"][s0:s0 + n] != cut[1]["input_ids"][s1:s1 + n]:
            raise ValueError("the two views' context tokens differ: the tokenizer must tokenise the context "
                             "independently of the question")
        out_rows[0].append(cut[0])
        out_rows[1].append(cut[1])
        slots.append(([0] + list(range(s0, s0 + n)), [0] + list(range(s1, s1 + n))))
    width = max(len(a) for a, _ in slots)
    batches = []
    for v in (0, 1):
        batch = dict(tokenizer.pad(out_rows[v], return_tensors="pt"))
        index = [sl[v] + [0] * (width - len(sl[v])) for sl in slots]
        mask = [[True] * len(sl[v]) + [False] * (width - len(sl[v])) for sl in slots]
        batch["align_index"] = torch.tensor(index, dtype=torch.long)
        batch["align_mask"] = torch.tensor(mask, dtype=torch.bool)
        batches.append(batch)
    return batches[0], batches[1]
