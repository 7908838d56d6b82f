"""The QA model and its losses: answerability cross-entropy, span loss + TSA probability, consistency
alignment of two views that differ only in the question, and saving/loading the reader."""

import math

import pytest
import torch

from tasks.common.qa_reader import HEAD_CONFIG, QAWithAnswerability, build_qa_model, load_qa_model, model_inputs
from tasks.common.windows import align_span_logits, consistency_views
from tasks.qa.task import answerability_loss, qa_supervised_loss
from uda.losses import consistency_loss
from tests.qa_fixtures import tiny_qa_model_dir  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def tok(tiny_qa_model_dir):  # noqa: F811
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_qa_model_dir)


def test_answerability_loss_is_cross_entropy_on_logits():
    logits = torch.tensor([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]])
    labels = torch.tensor([0, 0, 1])
    expected = torch.tensor([math.log(1 + math.exp(-2.0)), math.log(1 + math.exp(3.0)), math.log(2.0)])
    assert torch.allclose(answerability_loss(logits, labels), expected, atol=1e-6)
    # softmax first and cross-entropy again (the common bug) would give a different, flattened value
    buggy = torch.nn.functional.cross_entropy(logits.softmax(-1), labels, reduction="none")
    assert not torch.allclose(buggy, expected, atol=1e-3)


def test_answerability_loss_falls_and_accuracy_rises(tiny_qa_model_dir, tok):  # noqa: F811
    """A small learnable set: a question has an answer when it asks about an animal the context names."""
    torch.manual_seed(0)
    model = build_qa_model(str(tiny_qa_model_dir))
    context = "the fox , the cat , the dog and the owl live in paris near the old river ."
    animals = ["fox", "cat", "dog", "owl", "bee", "cow", "pig", "elk"]
    questions = [f"{w} does the {a} live ?" for a in animals for w in ("where", "what")]
    y = torch.tensor([int(a in context.split()) for a in animals for _ in range(2)])
    enc = tok(questions, [context] * len(questions), padding=True, return_tensors="pt")
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def measure():
        model.eval()
        with torch.no_grad():
            logits = model(**model_inputs(enc)).answerability_logits
        model.train()
        return answerability_loss(logits, y).mean().item(), (logits.argmax(-1) == y).float().mean().item()

    loss0, acc0 = measure()
    for _ in range(80):
        loss = answerability_loss(model(**model_inputs(enc)).answerability_logits, y).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    loss1, acc1 = measure()
    assert loss1 < 0.5 * loss0, (loss0, loss1)
    assert acc1 > acc0 and acc1 >= 0.9, (acc0, acc1)


def test_span_loss_masks_non_context_tokens_and_tsa_probability_is_the_gold_span():
    start = torch.tensor([[1.0, 5.0, 0.0, 2.0, -1.0]])
    end = torch.tensor([[0.0, 5.0, 1.0, 0.0, 2.0]])
    mask = torch.tensor([[True, False, True, True, True]])  # position 1 is a question token
    ans = torch.tensor([[0.0, 1.0]])
    out = qa_supervised_loss(start, end, ans, mask, torch.tensor([3]), torch.tensor([4]), torch.tensor([1]),
                             span_weight=1.0, answerability_weight=1.0)
    ls = torch.log_softmax(torch.tensor([1.0, 0.0, 2.0, -1.0]), -1)[2]  # the question token is excluded
    le = torch.log_softmax(torch.tensor([0.0, 1.0, 0.0, 2.0]), -1)[3]
    la = torch.log_softmax(ans[0], -1)[1]
    assert out.per_example_loss.item() == pytest.approx((-(ls + le) / 2 - la).item(), abs=1e-5)
    assert out.gold_prob.item() == pytest.approx(math.exp((ls + le).item()), abs=1e-6)
    assert out.correct.item() == 1.0
    weighted = qa_supervised_loss(start, end, ans, mask, torch.tensor([3]), torch.tensor([4]), torch.tensor([1]),
                                  span_weight=0.0, answerability_weight=2.0)
    assert weighted.per_example_loss.item() == pytest.approx(-2 * la.item(), abs=1e-5)


def test_two_views_differing_in_the_question_align_with_kl_zero(tok):
    context = "the red fox lives in paris near the old river . " * 4
    questions = ["where does the fox live ?", "where ?"]
    augmented = ["where does the red fox live near the river ?", "which city ?"]
    ori, aug = consistency_views(tok, questions, augmented, [context, "the cat lives in rome ."], max_length=40,
                                 max_question_length=16)
    assert ori["align_index"].shape == aug["align_index"].shape
    assert torch.equal(ori["align_mask"], aug["align_mask"])
    # the aligned slots hold the same tokens in both views: [CLS] then identical context tokens
    tok_o = ori["input_ids"].gather(1, ori["align_index"])[ori["align_mask"]]
    tok_a = aug["input_ids"].gather(1, aug["align_index"])[aug["align_mask"]]
    assert torch.equal(tok_o, tok_a) and tok_o[0].item() == tok.cls_token_id
    assert not torch.equal(ori["input_ids"][0, :8], aug["input_ids"][0, :8])  # the questions differ
    # the long context was cut to the shorter window, and both views still end with [SEP]
    n_ctx = ori["align_mask"][0].sum().item() - 1
    for v in (ori, aug):
        row = v["input_ids"][0][v["attention_mask"][0].bool()]
        assert row[-1].item() == tok.sep_token_id and (v["token_type_ids"][0] == 1).sum().item() == n_ctx + 1

    # logits that agree on the aligned slots (and differ anywhere else) give KL 0 for every distribution
    torch.manual_seed(0)
    per_slot = torch.randn(ori["align_index"].shape)
    per_slot = torch.where(ori["align_mask"], per_slot, per_slot[:, :1])  # padding slots index position 0

    def logits_for(view):
        x = torch.randn(view["input_ids"].shape) * 10  # question and padding positions: anything
        return x.scatter(1, view["align_index"], per_slot)

    starts = [align_span_logits(logits_for(v), v["align_index"], v["align_mask"]) for v in (ori, aug)]
    assert starts[0].shape == starts[1].shape
    assert torch.isinf(starts[0][1, 1 + 6:]).all() and torch.isinf(starts[1][1, 1 + 6:]).all()  # past its context
    assert torch.isfinite(starts[0][1, :1 + 6]).all()
    loss, _ = consistency_loss(starts[0], starts[1])
    assert loss.item() == pytest.approx(0.0, abs=1e-7)
    shifted = starts[1].clone()
    shifted[:, 1] += 1.0
    assert consistency_loss(starts[0], shifted)[0].item() > 1e-4


def test_identical_views_through_the_model_give_zero_consistency(tiny_qa_model_dir, tok):  # noqa: F811
    from tasks.qa.task import QATask

    model = build_qa_model(str(tiny_qa_model_dir)).eval()
    task = QATask()
    ori, aug = consistency_views(tok, ["where does the fox live ?"] * 2, ["where does the fox live ?"] * 2,
                                 ["the fox lives in paris .", "the cat lives in rome ."], 32, 16)
    with torch.no_grad():
        lo, la = task.consistency_logits(model, ori), task.consistency_logits(model, aug)
    assert [t.shape[1] for t in lo] == [1 + 6, 1 + 6, 2]
    for o, a in zip(lo, la):
        assert consistency_loss(o, a)[0].item() == pytest.approx(0.0, abs=1e-6)


def test_save_and_load_round_trip(tiny_qa_model_dir, tok, tmp_path):  # noqa: F811
    torch.manual_seed(1)
    model = build_qa_model(str(tiny_qa_model_dir)).eval()
    # parameter names are the span model's own plus the answerability head's
    names = set(model.state_dict())
    assert "qa_outputs.weight" in names and "answerability.1.weight" in names
    assert not any(n.startswith("span_model.") for n in names)
    model.save_pretrained(tmp_path)
    assert (tmp_path / HEAD_CONFIG).is_file() and (tmp_path / "model.safetensors").is_file()
    loaded = load_qa_model(tmp_path).eval()
    assert isinstance(loaded, QAWithAnswerability)
    enc = tok(["where does the fox live ?"], ["the fox lives in paris ."], return_tensors="pt")
    with torch.no_grad():
        a, b = model(**model_inputs(enc)), loaded(**model_inputs(enc))
    for name in ("start_logits", "end_logits", "answerability_logits"):
        assert torch.allclose(getattr(a, name), getattr(b, name), atol=1e-6), name
    # the saved file loads into a fresh reader with load_state_dict (what checkpoints do), every key found
    from safetensors.torch import load_file

    fresh = build_qa_model(str(tiny_qa_model_dir))
    missing, unexpected = fresh.load_state_dict(load_file(str(tmp_path / "model.safetensors")), strict=False)
    assert not missing and not unexpected
    # the span part is a plain transformers QA model
    from transformers import AutoModelForQuestionAnswering

    span = AutoModelForQuestionAnswering.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.allclose(span(**enc).start_logits, a.start_logits, atol=1e-6)
    with pytest.raises(FileNotFoundError, match=HEAD_CONFIG):
        load_qa_model(tiny_qa_model_dir)


def test_train_and_eval_modes_reach_the_span_model(tiny_qa_model_dir):  # noqa: F811
    model = build_qa_model(str(tiny_qa_model_dir))
    model.eval()
    assert not model.span_model.training and not any(m.training for m in model.modules())
    model.train()
    assert model.span_model.training and all(m.training for m in model.modules())


def test_tsa_masks_each_head_on_its_own_gold_probability():
    from uda.step import uda_step

    # feature 0: the span head is sure of the gold span (p ~ 1) but the verifier is not (p = 0.5);
    # feature 1: an unanswerable window (gold span = the first token) whose span is confident, the
    # verifier unsure: it must still train the verifier.
    start = torch.tensor([[0.0, -9.0, 12.0, -9.0], [12.0, -9.0, 0.0, 0.0]])
    end = torch.tensor([[0.0, -9.0, -9.0, 12.0], [12.0, 0.0, -9.0, 0.0]])
    mask = torch.ones(2, 4, dtype=torch.bool)
    ans = torch.zeros(2, 2, requires_grad=True)
    out = qa_supervised_loss(start, end, ans, mask, torch.tensor([2, 0]), torch.tensor([3, 0]), torch.tensor([1, 0]),
                             span_weight=1.0, answerability_weight=1.0, span_num_classes=2)
    span, verifier = out.terms
    assert (span.name, span.num_classes, verifier.name, verifier.num_classes) == ("span", 2, "answerability", 2)
    assert span.gold_prob.min().item() > 0.99 and verifier.gold_prob.tolist() == pytest.approx([0.5, 0.5])

    class Fixed:
        tsa_num_classes = 2

        def supervised(self, model, batch):
            return out

    step = uda_step(Fixed(), None, {}, None, tsa=lambda k: 0.75, lambda_u=1.0)
    # the span head is masked on both features (p > 0.75), the verifier on neither (p = 0.5)
    assert step.stats["sup/trained_ratio_span"] == 0.0
    assert step.stats["sup/trained_ratio_answerability"] == 1.0
    assert step.stats["sup/tsa_threshold_span"] == step.stats["sup/tsa_threshold_answerability"] == 0.75
    assert step.sup_loss.item() == pytest.approx(math.log(2), abs=1e-6)  # the verifier's CE, mean over both
    step.sup_loss.backward()
    assert ans.grad[1].abs().sum() > 0  # the confident no-answer feature trains the verifier
    # one mask from the span probability (the old behaviour) would have dropped both features entirely
    from uda.losses import tsa_supervised_loss

    old, old_mask = tsa_supervised_loss(out.per_example_loss, out.gold_prob, 0.75)
    assert old_mask.tolist() == [0.0, 0.0] and old.item() == 0.0


def test_answerability_can_be_left_out_of_the_consistency_loss():
    from tasks.qa.task import QATask
    from tasks.qa.config import QAConfig

    class Out:
        start_logits = torch.zeros(1, 5)
        end_logits = torch.zeros(1, 5)
        answerability_logits = torch.zeros(1, 2)

    task = QATask()
    batch = {"input_ids": torch.zeros(1, 5, dtype=torch.long), "attention_mask": torch.ones(1, 5, dtype=torch.long),
             "align_index": torch.tensor([[0, 2, 3]]), "align_mask": torch.ones(1, 3, dtype=torch.bool)}
    for flag, n in ((True, 3), (False, 2)):
        task.qa = QAConfig(answerability_consistency=flag)
        assert len(task.consistency_logits(lambda **kw: Out(), batch)) == n
