"""Multi-passage reader maths and behaviour: the loss on hand-made logits (golden numbers), TSA terms,
post-processing and the Passage@k / EM@k metrics on hand cases, the two consistency views aligned
slot for slot (KL 0 when the logits agree), and a tiny learnable set on which the reader learns to
pick the positive passage and the no-answer option; the segment-similarity relevance term (golden
numbers, what it changes and what not, saved with the model, carried by all three input paths)."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch

from tasks.passages.task import PassagesTask, passage_reader_loss, selection_logits
from tasks.passages.config import PassagesConfig
from tasks.common.spans import decide
from tasks.passages.postprocess import question_prediction, reader_metrics
from tests.qa_fixtures import ANIMALS, CITIES, tiny_qa_model_dir  # noqa: F401 (fixture)
from uda.losses import consistency_loss, tsa_supervised_loss


def _hand_case():
    start = torch.tensor([[[0.5, 1.0, -0.5, 2.0], [1.0, 0.0, 2.0, -1.0]],
                          [[0.0, 0.3, 0.1, 0.2], [0.4, -0.2, 0.0, 0.6]]])  # (B=2, M=2, T=4)
    end = torch.tensor([[[1.0, 0.2, 0.0, -1.0], [0.0, 1.5, 0.5, 1.0]],
                        [[0.1, 0.1, 0.1, 0.1], [0.0, 0.0, 0.0, 0.0]]])
    relevance = torch.tensor([[0.2, 1.2], [0.5, -0.5]])
    no_answer = torch.tensor([0.0, 1.0])
    span_mask = torch.tensor([False, True, True, True]).expand(2, 2, 4)  # token 0 is not context
    passage_mask = torch.ones(2, 2, dtype=torch.bool)
    positive = torch.tensor([1, -1])  # question 0: passage 1; question 1: unanswerable
    occ_start = torch.tensor([[1, 2], [-1, -1]])  # question 0's answer occurs at tokens (1, 2) and (2, 3)
    occ_end = torch.tensor([[2, 3], [-1, -1]])
    return start, end, relevance, no_answer, span_mask, passage_mask, positive, occ_start, occ_end


def test_loss_golden_numbers():
    out = passage_reader_loss(*_hand_case(), selection_weight=1.0, span_weight=1.0)
    # selection: CE over [no answer, p0, p1]; q0 target p1 (logits [0, .2, 1.2]), q1 target no answer
    # ([1, .5, -.5]); span (q0 only): -log(p_s(1) p_e(2) + p_s(2) p_e(3)) on passage 1's tokens 1..3
    sel, span = out.terms
    assert (sel.name, span.name) == ("selection", "span")
    assert sel.per_example_loss.tolist() == pytest.approx([0.5122688, 0.6041306], abs=1e-6)
    assert span.per_example_loss.tolist() == pytest.approx([1.2712260, 0.0], abs=1e-6)
    assert out.per_example_loss.tolist() == pytest.approx([1.7834947, 0.6041306], abs=1e-6)
    assert sel.gold_prob.tolist() == pytest.approx([0.5991347, 0.5465494], abs=1e-6)
    assert span.gold_prob[0].item() == pytest.approx(0.2804875, abs=1e-6)
    assert span.gold_prob[1].item() == math.inf  # no span target: above every TSA threshold
    assert out.gold_prob.tolist() == pytest.approx([0.5991347 * 0.2804875, 0.5465494], abs=1e-6)
    assert (sel.num_classes, span.num_classes) == (3, 2)
    # q0: selection right (p1), but the best start/end (2, 2) is no occurrence; q1: no answer, right
    assert out.correct.tolist() == [0.0, 1.0]
    weighted = passage_reader_loss(*_hand_case(), selection_weight=0.5, span_weight=2.0)
    assert weighted.per_example_loss.tolist() == pytest.approx([2.7985863, 0.3020653], abs=1e-6)
    shared = passage_reader_loss(*_hand_case(), selection_weight=1.0, span_weight=1.0, shared_normalization=True)
    # start/end over the context tokens of both passages of q0 together
    assert shared.terms[1].per_example_loss[0].item() == pytest.approx(2.3269653, abs=1e-6)
    only_selection = passage_reader_loss(*_hand_case(), selection_weight=1.0, span_weight=0.0)
    assert [t.name for t in only_selection.terms] == ["selection"]


def test_span_tsa_leaves_questions_without_a_span_out_of_the_mean_and_gradients_stay_finite():
    case = list(_hand_case())
    case[0] = case[0].clone().requires_grad_(True)
    out = passage_reader_loss(*case, selection_weight=1.0, span_weight=1.0)
    span = out.terms[1]
    for threshold in (1.0, 0.5):  # TSA off, and on
        loss, mask = tsa_supervised_loss(span.per_example_loss, span.gold_prob, threshold)
        assert mask.tolist() == [1.0, 0.0] and loss.item() == pytest.approx(1.2712260, abs=1e-6)
    loss, mask = tsa_supervised_loss(span.per_example_loss, span.gold_prob, 0.2)  # q0's span 0.28 > 0.2: dropped
    assert mask.tolist() == [0.0, 0.0] and loss.item() == 0.0
    out.per_example_loss.sum().backward()
    assert torch.isfinite(case[0].grad).all() and case[0].grad[1].abs().sum() == 0  # no span, no start gradient


def test_padding_passages_are_never_selected():
    logits = selection_logits(torch.tensor([0.0]), torch.tensor([[3.0, 9.0]]), torch.tensor([[True, False]]))
    assert logits.tolist() == [[0.0, 3.0, float("-inf")]]
    start, end, relevance, no_answer, span_mask, _, positive, occ_s, occ_e = _hand_case()
    mask = torch.tensor([[True, True], [True, False]])
    out = passage_reader_loss(start, end, relevance, no_answer, span_mask, mask, positive, occ_s, occ_e, 1.0, 1.0)
    # q1: [1, .5] only -> CE = -1 + log(e + e^.5)
    assert out.terms[0].per_example_loss[1].item() == pytest.approx(-1 + math.log(math.e + math.exp(0.5)), abs=1e-6)


# ----------------------------------------------------------------------------- post-processing and metrics

def _prediction(relevance, no_answer, has_answer, start_at, texts=None):
    """Three passages of 6 tokens whose context tokens 1..4 are the words of "w0 w1 w2 w3"; the span
    logits peak at token ``start_at[i]`` (start and end) of passage i."""
    M, L = len(relevance), 8
    texts = texts or [f"a{i} b{i} c{i} d{i}" for i in range(M)]
    passages = [{"id": f"p{i}", "title": "t", "text": t, "has_answer": h} for i, (t, h) in enumerate(zip(texts, has_answer))]
    offsets = []
    for t in texts:
        spans, pos = [], 0
        for w in t.split():
            pos = t.index(w, pos)
            spans.append((pos, pos + len(w)))
            pos += len(w)
        offsets.append([None] + spans + [None])
    start = np.full((M, L), -5.0)
    end = np.full((M, L), -5.0)
    for i, s in enumerate(start_at):
        start[i, s], end[i, s] = 3.0 + i * 0.1, 2.0
    return question_prediction("q", passages, [True] * M, np.array(relevance), no_answer, start, end, offsets,
                               n_best=3, max_answer_length=3, span_passages=2)


def test_question_prediction_ranks_by_relevance_and_takes_the_top_passages_best_span():
    p = _prediction([0.5, 2.0, 1.0], no_answer=1.0, has_answer=[True, False, False], start_at=[1, 3, 2])
    assert [psg["id"] for psg in p["passages"]] == ["p1", "p2"]  # the top 2 by relevance
    assert p["ranked_has_answer"] == [False, False, True]
    assert p["span_text"] == "c1" and p["span_score"] == pytest.approx(5.1)
    assert p["passages"][1]["spans"][0]["text"] == "b2"
    assert p["no_answer_score"] == pytest.approx(1.0 - 2.0)  # no-answer logit - top relevance
    z = math.exp(1.0) + math.exp(0.5) + math.exp(2.0) + math.exp(1.0)
    assert p["no_answer_prob"] == pytest.approx(math.exp(1.0) / z)
    assert p["passages"][0]["selection_prob"] == pytest.approx(math.exp(2.0) / z)
    assert decide(p, 0.0) == "c1" and decide(p, -1.5) == ""


def test_passage_at_k_and_em_at_k_on_hand_cases():
    texts = ["Paris is big", "Rome is old", "in Oslo now"]
    preds = [
        # the positive (Rome) ranked 2nd; the top passage's best span is "Paris", the 2nd's "Rome"
        dict(_prediction([2.0, 1.0, 0.0], 0.0, [False, True, False], [1, 1, 1], texts), id="a"),
        # the positive ranked 1st and its best span right
        dict(_prediction([0.0, 3.0, 1.0], 0.0, [False, True, False], [1, 1, 1], texts), id="b"),
        # no positive retrieved; the best spans of the top two are "Oslo" and "Paris"
        dict(_prediction([1.0, 0.0, 2.0], 0.0, [False, False, False], [1, 1, 2], texts), id="c"),
        dict(_prediction([1.0, 0.0, 2.0], 5.0, [False, False, False], [1, 1, 2], texts), id="d"),
    ]
    gold = {"a": ["Rome"], "b": ["Rome"], "c": ["the Oslo"], "d": []}  # d unanswerable: not counted
    m = reader_metrics(gold, preds, ks=(1, 2))
    assert m["passage@1"] == pytest.approx(100 / 3) and m["passage@2"] == pytest.approx(200 / 3)
    assert m["em@1"] == pytest.approx(200 / 3)  # b ("Rome") and c ("Oslo" = "the Oslo" normalised)
    assert m["em@2"] == pytest.approx(100.0)  # a's 2nd passage has "Rome"
    assert m["top_f1"] == pytest.approx(200 / 3)


# ----------------------------------------------------------------------------- consistency views

def _task(model_dir, **opts) -> PassagesTask:
    from transformers import AutoTokenizer

    task = PassagesTask()
    task.tokenizer = AutoTokenizer.from_pretrained(model_dir)
    task.tokenizer.padding_side = "right"
    task.p = PassagesConfig(**{"train_passages": 3, "train_top_k": 5, "predict_passages": 3, "unsup_passages": 3,
                               "max_question_length": 12, "max_title_length": 4, **opts})
    task.max_length = 40
    return task


def _unlabeled(n_ctx=(3, 2)):
    rng = random.Random(1)
    out = []
    for q, n in enumerate(n_ctx):
        ctxs = [{"id": f"{q}-{i}", "title": "old town",
                 "text": " ".join(f"the {rng.choice(ANIMALS)} lives in {rng.choice(CITIES)} ." for _ in range(2 + i))}
                for i in range(n)]
        out.append({"id": f"u{q}", "question": f"where does the {ANIMALS[q]} live ?", "ctxs": ctxs})
    return out


def test_consistency_views_align_slot_for_slot_and_kl_is_zero_when_the_logits_agree(tiny_qa_model_dir):  # noqa: F811
    from tasks.passages.model import build_passage_reader

    task = _task(tiny_qa_model_dir)
    task.augmenter = lambda qs, rng: [f"which city does the {q.split()[3]} live in , the old one ?" for q in qs]
    ori, aug = task.collate_unlabeled(_unlabeled())
    assert ori["input_ids"].shape[0] == aug["input_ids"].shape[0] == 6  # 2 questions x 3 passage slots
    assert ori["input_ids"].shape[1] < aug["input_ids"].shape[1]  # the augmented question is longer
    assert torch.equal(ori["align_mask"], aug["align_mask"]) and ori["passage_mask"].tolist() == [[True] * 3,
                                                                                                    [True, True, False]]
    for row in range(6):  # the same context token in every aligned slot of both views
        m = ori["align_mask"][row]
        assert torch.equal(ori["input_ids"][row][ori["align_index"][row][m]],
                           aug["input_ids"][row][aug["align_index"][row][m]])
    torch.manual_seed(0)
    model = build_passage_reader(str(tiny_qa_model_dir)).eval()
    with torch.no_grad():
        lo, la = task.consistency_logits(model, ori), task.consistency_logits(model, aug)
    assert [tuple(x.shape) for x in lo] == [tuple(x.shape) for x in la]
    assert lo[0].shape == (2, 4) and lo[1].shape[0] == 5  # selection rows; span rows of the 5 real passages
    task.augmenter = lambda qs, rng: list(qs)  # identical views: identical logits, KL 0 for every distribution
    ori, aug = task.collate_unlabeled(_unlabeled())
    with torch.no_grad():
        lo, la = task.consistency_logits(model, ori), task.consistency_logits(model, aug)
    for o, a in zip(lo, la):
        loss, mask = consistency_loss(o, a, temperature=None, confidence=None)  # (sharpening would not be 0)
        assert loss.item() == pytest.approx(0.0, abs=1e-6) and mask.sum() == o.shape[0]


# ----------------------------------------------------------------------------- learnable

def _learnable_records(n: int, seed: int) -> list[dict]:
    """Questions "where does the <animal> live ?" with three one-sentence passages. An answerable
    question's positive says where its animal lives ("the fox lives in rome ."), its negatives
    describe other animals without a place ("the cat is red and old ."); an unanswerable question
    has only such negatives. Learnable by the heads from what the passages say: relevance from the
    first token of each pair, the no-answer option from all of a question's passages."""
    from tests.qa_fixtures import COLOURS

    rng = random.Random(seed)
    out = []
    for i in range(n):
        animals = rng.sample(ANIMALS, 3)
        answerable = i % 2 == 0
        city = rng.choice(CITIES)
        ctxs = [{"id": f"{i}-{k}", "title": "", "text": f"the {a} is {rng.choice(COLOURS)} and old .",
                 "has_answer": False} for k, a in enumerate(animals)]
        if answerable:
            ctxs[0] = {"id": f"{i}-0", "title": "", "text": f"the {animals[0]} lives in {city} .", "has_answer": True}
        rng.shuffle(ctxs)
        out.append({"id": f"q{i}", "question": f"where does the {animals[0]} live ?",
                    "answers": [city] if answerable else [], "ctxs": ctxs, "positive_ctxs": []})
    return out


def _selection_accuracy(task, model, records) -> tuple[float, float]:
    """(accuracy on answerable questions: the positive chosen, on unanswerable: no answer chosen)."""
    batch = task.collate_labeled(records)
    model.eval()
    with torch.no_grad():
        out = model(**{k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids", "passage_mask")})
    model.train()
    choice = selection_logits(out.no_answer_logits, out.relevance_logits, batch["passage_mask"]).argmax(-1)
    right = (choice == batch["positive"] + 1).float()
    has = batch["positive"] >= 0
    return right[has].mean().item(), right[~has].mean().item()


def test_tiny_reader_learns_to_select_the_positive_passage_and_the_no_answer_option(tiny_qa_model_dir):  # noqa: F811
    from tasks.passages.model import build_passage_reader

    torch.manual_seed(0)
    task = _task(tiny_qa_model_dir, train_passages=3)
    task.sample_rng = np.random.default_rng(0)
    model = build_passage_reader(str(tiny_qa_model_dir))
    train, held_out = _learnable_records(64, seed=0), _learnable_records(40, seed=1)
    before = _selection_accuracy(task, model, held_out)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for step in range(150):
        batch = task.collate_labeled([train[(step * 8 + j) % len(train)] for j in range(8)])
        out = task.supervised(model, batch)
        loss = out.per_example_loss.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    after = _selection_accuracy(task, model, held_out)
    print(f"selection accuracy (answerable, unanswerable) before {before}, after {after}; "
          f"loss {np.mean(losses[:10]):.3f} -> {np.mean(losses[-10:]):.3f}")
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    assert after[0] >= 0.8 and after[1] >= 0.8  # on questions never trained on
    assert after[0] > before[0] + 0.3 or after[1] > before[1] + 0.3


# ----------------------------------------------------------------------------- segment similarity

def test_segment_similarity_golden_numbers():
    from tasks.passages.model import segment_similarity

    # two pairs of 5 tokens: [CLS] q [SEP] | c c ; the second has one padding token and one context token
    hidden = torch.tensor([[[1.0, 0.0], [3.0, 0.0], [2.0, 3.0], [0.0, 1.0], [1.0, 1.0]],
                           [[1.0, 1.0], [1.0, -1.0], [0.0, 0.0], [2.0, 0.5], [9.0, 9.0]]])
    attention = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    context = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 1, 1]], dtype=torch.bool)  # padding token: not read
    sim = segment_similarity(hidden, attention, context)
    # pair 0: mean(first) = (2, 1), mean(context) = (0.5, 1) -> 2 / (sqrt 5 * sqrt 1.25) = 0.8
    # pair 1: mean(first) = (2/3, 0), mean(context) = (2, 0.5) -> 2 / sqrt 4.25 = 0.9701425
    assert sim.tolist() == pytest.approx([0.8, 0.9701425], abs=1e-6)
    # a pair without context tokens (a padding passage) gives 0, not NaN
    assert segment_similarity(hidden[:1], attention[:1], torch.zeros(1, 5, dtype=torch.bool)).item() == 0.0


def test_similarity_term_ranks_the_passages_and_leaves_the_top_passage_against_no_answer(tiny_qa_model_dir, tmp_path):  # noqa: F811
    from accelerate import Accelerator

    from tasks.passages.model import build_passage_reader, load_passage_reader, segment_similarity

    task = _task(tiny_qa_model_dir, train_passages=3)
    task.sample_rng = np.random.default_rng(0)
    records = _learnable_records(4, seed=3)
    records[1]["ctxs"] = records[1]["ctxs"][:2]  # a padding passage in the batch
    batch = task.collate_labeled(records)
    assert torch.equal(batch["context_mask"], batch["span_mask"].reshape(batch["context_mask"].shape))
    torch.manual_seed(0)
    model = build_passage_reader(str(tiny_qa_model_dir), similarity_scale=20.0).eval()
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids", "passage_mask", "context_mask")}
    with torch.no_grad():
        on = model(**inputs)
        model.similarity_scale = None
        off = model(**inputs)
        model.similarity_scale = 20.0
        hidden = model.span_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                  token_type_ids=batch["token_type_ids"], output_hidden_states=True).hidden_states[-1]
    c = segment_similarity(hidden, batch["attention_mask"], batch["context_mask"]).view(4, 3)
    mask = batch["passage_mask"]
    c = c.masked_fill(~mask, -2.0)
    expected = off.relevance_logits + 20.0 * (c - c.max(dim=1, keepdim=True).values)
    assert torch.allclose(on.relevance_logits[mask], expected[mask], atol=1e-4)
    top = c.argmax(dim=1)
    rows = torch.arange(4)
    assert torch.allclose(on.relevance_logits[rows, top], off.relevance_logits[rows, top])  # the top passage: head only
    assert torch.equal(on.no_answer_logits, off.no_answer_logits)
    with pytest.raises(ValueError, match="context_mask"):
        model(**{k: v for k, v in inputs.items() if k != "context_mask"})
    # prediction reads the same relevance (context_mask reaches the model there too)
    task.p.predict_passages = 3
    preds = task.decode(task.predict(model, records, Accelerator(cpu=True), 6), None)
    by_id = {p["id"]: {q["id"]: q["relevance"] for q in p["passages"]} for p in preds}
    feats, _, passage_mask = task.features([r["question"] for r in records], [r["ctxs"] for r in records], 3)
    pbatch = task._inputs(feats, passage_mask)
    with torch.no_grad():
        rel = model(**{k: pbatch[k] for k in inputs}).relevance_logits
    for i, r in enumerate(records):
        for j, ctx in enumerate(r["ctxs"]):
            if ctx["id"] in by_id[r["id"]]:
                assert by_id[r["id"]][ctx["id"]] == pytest.approx(rel[i, j].item(), abs=1e-4)
    # the scale is saved with the model and loaded back
    model.save_pretrained(tmp_path / "m")
    assert json.loads((tmp_path / "m" / "passage_reader.json").read_text())["similarity_scale"] == 20.0
    assert load_passage_reader(tmp_path / "m").similarity_scale == 20.0


def test_consistency_views_carry_the_context_tokens_for_the_similarity_term(tiny_qa_model_dir):  # noqa: F811
    from tasks.passages.model import build_passage_reader

    task = _task(tiny_qa_model_dir)
    task.augmenter = lambda qs, rng: list(qs)
    ori, aug = task.collate_unlabeled(_unlabeled())
    for v in (ori, aug):
        assert v["context_mask"].sum(1).tolist() == v["align_mask"].sum(1).tolist()
        assert not v["context_mask"][:, 0].any()
    torch.manual_seed(0)
    model = build_passage_reader(str(tiny_qa_model_dir), similarity_scale=20.0).eval()
    with torch.no_grad():
        lo, la = task.consistency_logits(model, ori), task.consistency_logits(model, aug)
    for o, a in zip(lo, la):
        assert consistency_loss(o, a, temperature=None, confidence=None)[0].item() == pytest.approx(0.0, abs=1e-6)


def test_fusion_weight_zero_ranks_as_the_retriever_and_a_large_one_as_the_head():
    from tasks.passages.postprocess import fused_scores, ranking

    relevance = np.array([0.1, 3.0, -1.0, 2.0])
    retrieval = np.array([12.0, 5.0, 9.0, 1.0])  # BM25: passage 0, then 2, 1, 3
    assert ranking(relevance, retrieval, 0.0) == [0, 2, 1, 3]
    assert ranking(relevance, retrieval, 1e6) == [1, 3, 0, 2] == ranking(relevance, None, None)
    mid = ranking(relevance, retrieval, 1.0)
    assert mid == sorted(range(4), key=lambda i: -fused_scores(relevance, retrieval, 1.0)[i])
    assert ranking(np.zeros(3), np.zeros(3), 1.0) == [0, 1, 2]  # all tied: the retriever's order


def test_fusion_weight_is_fitted_on_dev_and_prefers_the_retriever_on_a_tie():
    from tasks.passages.postprocess import fit_fusion_weight

    # the head finds the answer where the retriever does not: a large weight wins
    head_right = [(np.array([0.0, 2.0]), np.array([5.0, 1.0]), [False, True])] * 3
    w, tried = fit_fusion_weight(head_right)
    assert tried[0.0] == 0.0 and tried[w] == 100.0 and w > 0
    # the retriever is right and the head wrong: weight 0
    retriever_right = [(np.array([0.0, 2.0]), np.array([5.0, 1.0]), [True, False])] * 3
    assert fit_fusion_weight(retriever_right)[0] == 0.0
    # both right: a tie, the smallest weight (the retriever's order)
    both = [(np.array([2.0, 0.0]), np.array([5.0, 1.0]), [True, False])]
    assert fit_fusion_weight(both)[0] == 0.0
    # unanswerable questions do not count
    assert fit_fusion_weight([(np.array([1.0]), np.array([1.0]), [False])])[1][0.0] == 0.0


def test_prediction_record_shows_both_scores_of_the_top_passages():
    from tasks.passages.postprocess import decode_question, prediction_record, retriever_scores

    passages = [{"id": "a", "title": "A", "text": "alpha beta", "score": 7.0, "has_answer": False},
                {"id": "b", "title": "B", "text": "gamma delta", "score": 3.0, "has_answer": True}]
    spans = {0: [{"text": "beta", "score": 1.0, "start": 6, "end": 10}],
             1: [{"text": "gamma", "score": 2.0, "start": 0, "end": 5}]}
    retrieval = retriever_scores(passages, [0, 1])
    pred = decode_question("q", passages, [0, 1], np.array([-1.0, 1.0]), 0.0, spans, 2, retrieval, 10.0)
    rec = prediction_record({"question": "which?", "answers": ["gamma"]}, pred, threshold=5.0)
    assert rec["final_answer"] == "gamma" and rec["span_text"] == "gamma"
    assert [p["id"] for p in rec["passages"]] == ["b", "a"]
    top = rec["passages"][0]
    assert (top["retriever_score"], top["relevance"]) == (3.0, 1.0) and top["fused_score"] is not None
    assert top["spans"][0]["text"] == "gamma"
    no_scores = [{k: v for k, v in p.items() if k != "score"} for p in passages]
    assert list(retriever_scores(no_scores, [0, 1])) == [0.0, -1.0]  # the retrieval order stands in


# ----------------------------------------------------------------------------- the answerability head (verifier)

def test_answerability_term_golden_numbers_and_padding():
    logits = torch.tensor([[[0.0, 1.0], [1.0, 0.0]], [[0.0, 0.0], [2.0, 0.0]]])  # (B=2, M=2, [no, has])
    has = torch.tensor([[False, True], [False, False]])  # q0: passage 1 holds the answer; q1 unanswerable
    base = passage_reader_loss(*_hand_case(), selection_weight=1.0, span_weight=1.0)
    out = passage_reader_loss(*_hand_case(), selection_weight=1.0, span_weight=1.0, answerability_logits=logits,
                              passage_has_answer=has, answerability_weight=0.5)
    ans = out.terms[2]
    # q0: both passages log(1 + e); q1: (log 2 + log(e^2 + 1) - 2) / 2
    assert ans.name == "answerability" and ans.num_classes == 2 and ans.weight == 0.5
    assert ans.per_example_loss.tolist() == pytest.approx([1.3132617, 0.4100376], abs=1e-6)
    assert ans.gold_prob.tolist() == pytest.approx([0.2689414, 0.6636253], abs=1e-6)
    assert (out.per_example_loss - base.per_example_loss).tolist() == pytest.approx([0.6566308, 0.2050188], abs=1e-6)
    start, end, relevance, no_answer, span_mask, _, positive, occ_s, occ_e = _hand_case()
    mask = torch.tensor([[True, True], [True, False]])  # q1's second passage is padding: left out of the mean
    padded = passage_reader_loss(start, end, relevance, no_answer, span_mask, mask, positive, occ_s, occ_e, 1.0, 1.0,
                                 answerability_logits=logits, passage_has_answer=has, answerability_weight=1.0)
    assert padded.terms[2].per_example_loss[1].item() == pytest.approx(math.log(2), abs=1e-6)
    assert [t.name for t in base.terms] == ["selection", "span"]  # weight 0: no term
    with pytest.raises(ValueError, match="answerability_logits"):
        passage_reader_loss(*_hand_case(), selection_weight=1.0, span_weight=1.0, answerability_weight=1.0)


def test_verifier_weight_mixes_the_selection_and_verifier_scores():
    from tasks.passages.postprocess import decode_question, prediction_record

    passages = [{"id": "a", "title": "A", "text": "alpha beta", "has_answer": False},
                {"id": "b", "title": "B", "text": "gamma delta", "has_answer": True}]
    spans = {0: [{"text": "beta", "score": 1.0, "start": 6, "end": 10}],
             1: [{"text": "gamma", "score": 2.0, "start": 0, "end": 5}]}
    log_odds = np.array([-3.0, 2.5])

    def decode(v, answerability=log_odds):
        return decode_question("q", passages, [0, 1], np.array([-1.0, 1.0]), 0.5, spans, 2, None, None,
                               answerability, v)

    # the top passage is b (relevance 1.0): selection score 0.5 - 1.0, verifier score -2.5
    assert decode(0.0)["no_answer_score"] == -0.5 == decode(0.0)["selection_score"]
    assert decode(0.0, None)["no_answer_score"] == -0.5 and decode(0.0, None)["verifier_score"] is None
    assert decode(1.0)["no_answer_score"] == -2.5 == decode(1.0)["verifier_score"]
    assert decode(0.25)["no_answer_score"] == pytest.approx(0.75 * -0.5 + 0.25 * -2.5)
    rec = prediction_record({"question": "which?", "answers": ["gamma"]}, decode(0.5), threshold=0.0)
    assert (rec["selection_score"], rec["verifier_score"], rec["no_answer_score"]) == (-0.5, -2.5, -1.5)
    assert [p["has_answer_log_odds"] for p in rec["passages"]] == [2.5, -3.0]


def test_verifier_weight_is_fitted_on_dev_or_taken_from_the_config():
    task = PassagesTask()
    task.p = PassagesConfig(span_passages=1)

    def question(i, answerable, relevance, log_odds):
        passage = {"id": f"p{i}", "title": "", "text": "gamma", "has_answer": answerable}
        return {"id": f"q{i}", "passages": [passage], "real": [0], "relevance": np.array([relevance]),
                "no_answer": 0.0, "spans": {0: [{"text": "gamma", "score": 1.0, "start": 0, "end": 5}]},
                "retrieval": np.array([1.0]), "answerability": np.array([log_odds])}

    # the selection score (0 - relevance) ranks the questions the wrong way round, the verifier the right way
    # (selection scores +-10 against verifier scores -+1: only the verifier alone, v = 1, ranks them right)
    raw = [question(i, i % 2 == 0, -10.0 if i % 2 == 0 else 10.0, 1.0 if i % 2 == 0 else -1.0) for i in range(6)]
    records = [{"id": q["id"], "question": "?", "answers": ["gamma"] if i % 2 == 0 else []} for i, q in enumerate(raw)]
    v, tried = task.verifier_weight(records, raw, None)
    assert v == 1.0 and tried[1.0] == 100.0 and tried[0.0] < 100.0
    assert task.score(records, task.decode(raw, None, 1.0), 0.0)["no_answer_auc"] == 100.0
    assert task.score(records, task.decode(raw, None, 0.0), 0.0)["no_answer_auc"] == 0.0
    flipped = [dict(q, answerability=-q["answerability"]) for q in raw]  # now the selection is right: v = 0
    flipped = [dict(q, relevance=-q["relevance"]) for q in flipped]
    assert task.verifier_weight(records, flipped, None)[0] == 0.0
    task.p = PassagesConfig(span_passages=1, verifier_weight=0.5)
    assert task.verifier_weight(records, raw, None) == (0.5, {})
    with pytest.raises(ValueError, match="verifier_weight"):
        PassagesConfig(verifier_weight=1.5).validate()


def test_a_squad_v2_start_carries_its_answerability_head_and_the_reader_saves_it(tiny_qa_model_dir, tmp_path):  # noqa: F811
    from tasks.passages.model import build_passage_reader, load_passage_reader
    from tasks.common.qa_reader import build_qa_model

    torch.manual_seed(0)
    qa = build_qa_model(str(tiny_qa_model_dir))
    torch.nn.init.normal_(qa.answerability[1].weight, std=1.0)
    qa.save_pretrained(tmp_path / "qa")
    reader = build_passage_reader(str(tmp_path / "qa"))
    assert torch.equal(reader.answerability[1].weight, qa.answerability[1].weight)
    fresh = build_passage_reader(str(tiny_qa_model_dir))  # a plain span model: the head starts untrained
    assert not torch.equal(fresh.answerability[1].weight, qa.answerability[1].weight)
    reader.save_pretrained(tmp_path / "reader")
    back = load_passage_reader(tmp_path / "reader")
    assert torch.equal(back.answerability[1].weight, qa.answerability[1].weight)
    ids = torch.tensor([[2, 5, 6, 3], [2, 7, 8, 3]])
    out = back.eval()(input_ids=ids, attention_mask=torch.ones_like(ids), passage_mask=torch.ones(1, 2, dtype=torch.bool))
    assert out.answerability_logits.shape == (1, 2, 2)


def test_single_reader_mix_golden_numbers_and_ends():
    """mixed_no_answer: (1 - u) z(reader) + u z(single), z by dev (mean, deviation); no span stays NO_SPAN."""
    from tasks.passages.postprocess import NO_SPAN, mixed_no_answer, standardiser

    assert standardiser([1.0, 3.0, math.inf]) == (2.0, 1.0)  # +inf left out
    assert standardiser([2.0, 2.0]) == (2.0, 1.0) and standardiser([]) == (0.0, 1.0)
    r_stats, s_stats = (2.0, 1.0), (0.0, 5.0)
    assert mixed_no_answer(3.0, -5.0, 0.0, r_stats, s_stats) == 1.0
    assert mixed_no_answer(3.0, -5.0, 1.0, r_stats, s_stats) == -1.0
    assert mixed_no_answer(3.0, -5.0, 0.25, r_stats, s_stats) == pytest.approx(0.75 * 1.0 + 0.25 * -1.0)
    assert mixed_no_answer(math.inf, -5.0, 0.5, r_stats, s_stats) == NO_SPAN
    assert mixed_no_answer(3.0, math.inf, 1.0, r_stats, s_stats) == NO_SPAN
    # u = 0 keeps the reader's order, u = 1 the single reader's
    reader, single = [1.0, 3.0, 2.0], [4.0, -2.0, 0.0]
    for u, want in ((0.0, [0, 2, 1]), (1.0, [1, 2, 0])):
        scores = [mixed_no_answer(a, b, u, standardiser(reader), standardiser(single)) for a, b in zip(reader, single)]
        assert sorted(range(3), key=lambda i: scores[i]) == want


def test_single_reader_options_are_validated():
    from uda.config import ConfigError, build_config

    with pytest.raises(ConfigError, match="single_reader_weight must be in"):
        build_config("passages", None, {"passages.single_reader": "x", "passages.single_reader_weight": 2})
    with pytest.raises(ConfigError, match="needs passages.single_reader"):
        build_config("passages", None, {"passages.single_reader_weight": 0.5})
