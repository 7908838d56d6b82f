"""The recipe options for few-label text classification: mean pooling, warm start, hard targets with
distribution alignment and a ramped consistency weight, the id files, test texts kept out of the
unlabelled pool, and the consistency diagnostics in metrics.jsonl."""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import write_jsonl
from tests.trainkit import metric_lines, model_dir, run, tiny_config, training_lines, weights  # noqa: F401 (fixture)


# one thread makes the tiny runs fast on a busy machine, and every run of a comparison uses it
pytestmark = pytest.mark.usefixtures("one_thread")


def test_mean_pool_classifier_ignores_padding_and_round_trips(model_dir, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    from tasks.text.model import build_text_classifier, load_text_classifier

    tok = AutoTokenizer.from_pretrained(model_dir)
    torch.manual_seed(0)
    model = build_text_classifier(str(model_dir), ["neg", "pos"], "mean").eval()
    short = tok(["great movie"], return_tensors="pt")
    padded = tok(["great movie"], padding="max_length", max_length=12, return_tensors="pt")
    with torch.no_grad():
        a = model(**short).logits
        b = model(**padded).logits
    assert torch.allclose(a, b, atol=1e-5)  # padding tokens take no part in the mean
    model.save_pretrained(tmp_path / "m")
    (tmp_path / "m" / "label_names.json").write_text(json.dumps(["neg", "pos"]))
    again = load_text_classifier(tmp_path / "m").eval()
    with torch.no_grad():
        assert torch.allclose(again(**short).logits, a, atol=1e-6)
    # the folder is a plain encoder for transformers (the head is skipped)
    assert AutoModel.from_pretrained(tmp_path / "m") is not None
    # a cls-pooling model cannot be built from a mean-pooling folder by mistake
    with pytest.raises(ValueError, match="pooling mean"):
        build_text_classifier(str(tmp_path / "m"), ["neg", "pos"], "cls")


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_warm_start_from_a_run_folder_keeps_the_trained_weights(model_dir, tiny_text_data, tmp_path, pooling):
    from tasks.text.model import build_text_classifier

    first = tmp_path / "first"
    run(tiny_config(model_dir, tiny_text_data, first, **{"uda.lambda_u": 0, "model.pooling": pooling,
                                                          "train.max_steps": 4, "train.eval_every": 4}))
    trained = weights(first / "model")
    torch.manual_seed(123)  # a fresh head would come out differently; a warm start must not
    warm = build_text_classifier(str(first / "model"), ["0", "1"], pooling)
    state = warm.state_dict()
    head = [k for k in trained if k.startswith("classifier.")]
    assert head
    for k in head:
        assert torch.equal(state[k], trained[k]), k
    # and a run started from it trains (the warm-started run's config points at the folder)
    second = tmp_path / "second"
    results = run(tiny_config(model_dir, tiny_text_data, second, **{"model.name_or_path": str(first / "model"),
                                                                     "model.pooling": pooling,
                                                                     "train.max_steps": 2, "train.eval_every": 2}))
    assert results["test"]["num_examples"] == 60


def test_id_files_dedup_and_diagnostics(model_dir, tiny_text_data, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train", "test", "unsup"):
        (data / f"{name}.jsonl").write_text((tiny_text_data / f"{name}.jsonl").read_text())
    tests = [json.loads(line) for line in (data / "test.jsonl").read_text().splitlines()]
    unsup = [json.loads(line) for line in (data / "unsup.jsonl").read_text().splitlines()]
    # three test reviews also appear, verbatim, in the unlabelled file
    write_jsonl(data / "unsup.jsonl", unsup + [{"id": f"dup_{i}", "text": t["text"], "label": -1}
                                               for i, t in enumerate(tests[:3])])
    out = tmp_path / "run"
    run(tiny_config(model_dir, data, out, **{"uda.confidence": 0.5, "data.min_unlabeled_chars": 0}))
    info = json.loads((out / "data_info.json").read_text())
    assert info["counts"]["unlabeled_skipped_test_text"] == 3
    from tasks.text.data import load_text_classification
    from uda.config import build_config

    cfg = build_config("text_classification", None, {"data.path": str(data), "data.num_labeled": 20,
                                                     "data.dev_size": 40, "data.min_unlabeled_chars": 0})
    loaded = load_text_classification(cfg.data, cfg.seed)
    assert not {u["text"] for u in loaded.unlabeled} & {t["text"] for t in tests}
    # hidden labels only on the training pool's rows, never on the unlabelled file's
    assert all(("hidden_label" in u) == u["id"].startswith("train_") for u in loaded.unlabeled)
    # the id files name exactly the labelled and dev examples
    labeled = (out / "labeled_ids.txt").read_text().split()
    dev = (out / "dev_ids.txt").read_text().split()
    assert labeled == [r["id"] for r in loaded.train] and len(labeled) == 20
    assert dev == [r["id"] for r in loaded.dev] and len(dev) == 40
    assert not set(labeled) & set(dev)
    # the diagnostics are logged on every training line
    for line in training_lines(out):
        for key in ("sup/gold_prob", "unsup/pred_entropy", "unsup/max_class_share", "unsup/target_accuracy",
                    "unsup/lambda_u"):
            assert key in line, key
        assert 0 <= line["unsup/max_class_share"] <= 1 and 0 <= line["unsup/pred_entropy"] <= 1
        assert 0 <= line["unsup/target_accuracy"] <= 1
        assert not any(k.startswith("unsup/_") for k in line)


def test_target_accuracy_counts():
    from uda.step import ratios_from_counts, target_accuracy

    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0], [1.0, 0.0], [0.0, 1.0]])
    mask = torch.tensor([1.0, 1.0, 0.0, 0.0])
    counts = target_accuracy(logits, mask, torch.tensor([0, 0, 0, -1]))  # right, wrong, right, unknown
    assert counts == {"unsup/_target_right": 2.0, "unsup/_target_n": 3.0,
                      "unsup/_confident_right": 1.0, "unsup/_confident_n": 2.0}
    out = ratios_from_counts({**counts, "unsup/loss": 0.5})
    assert out == {"unsup/loss": 0.5, "unsup/target_accuracy": pytest.approx(2 / 3),
                   "unsup/confident_target_accuracy": 0.5}
    assert target_accuracy(logits, mask, None) == {}


@pytest.mark.parametrize("bank", [None, 20])
def test_hard_target_alignment_and_ramp_resume_exactly(model_dir, tiny_text_data, tmp_path, bank):
    from tests.test_resume import Interrupted, InterruptedTask

    opts = {"uda.target": "hard", "uda.confidence": 0.5, "uda.distribution_alignment": True,
            "uda.alignment_bank": bank, "uda.lambda_u_ramp_steps": 4, "train.max_steps": 8, "train.warmup_steps": 1, "train.eval_every": 4,
            "train.log_every": 1}
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    run(tiny_config(model_dir, tiny_text_data, straight, **opts))
    lines = training_lines(straight)
    assert [line["unsup/lambda_u"] for line in lines[:5]] == [0.0, 0.25, 0.5, 0.75, 1.0]
    with pytest.raises(Interrupted):
        run(tiny_config(model_dir, tiny_text_data, broken, **opts), InterruptedTask(at=6))
    run(tiny_config(model_dir, tiny_text_data, broken, **opts))
    for la, lb in zip(lines, training_lines(broken)):
        assert la == pytest.approx(lb, rel=1e-6, abs=1e-7)
    a, b = weights(straight / "model"), weights(broken / "model")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_supervised_only_run_of_a_recipe_with_alignment(model_dir, tiny_text_data, tmp_path):
    """A recipe with distribution alignment run as its own supervised baseline (--uda.lambda_u 0, what
    the sweep's supervised and finetune methods do) trains: there are no unlabelled targets to align."""
    out = tmp_path / "sup"
    run(tiny_config(model_dir, tiny_text_data, out, **{"uda.distribution_alignment": True, "uda.lambda_u": 0.0,
                                                      "train.max_steps": 3, "train.eval_every": 3}))
    assert (out / "results.json").is_file()
    assert not any(k.startswith("unsup/") for line in training_lines(out) for k in line)


def test_alignment_bank_needs_distribution_alignment(tiny_text_data, tmp_path):
    from uda.config import ConfigError

    with pytest.raises(ConfigError, match="uda.alignment_bank is set but uda.distribution_alignment is false"):
        tiny_config(tmp_path, tiny_text_data, tmp_path / "run", **{"uda.alignment_bank": 100})
    with pytest.raises(ConfigError, match="uda.alignment_bank must be >= 1"):
        tiny_config(tmp_path, tiny_text_data, tmp_path / "run", **{"uda.distribution_alignment": True,
                                                                   "uda.alignment_bank": 0})


def test_distribution_alignment_needs_a_class_distribution(tiny_text_data, tmp_path):
    from uda.config import ConfigError
    from uda.train import train

    from uda.task import Task, TaskData

    class NoClasses(Task):  # TaskData's class_logits_index stays at its default, None
        name, main_metric, selectable_metrics = "x", "accuracy", ("accuracy",)

        def setup(self, cfg, run):
            return TaskData(train=[{"id": "a"}], dev=[], test=[], unlabeled=[{"id": "b"}])

    cfg = tiny_config(tmp_path, tiny_text_data, tmp_path / "run", **{"uda.distribution_alignment": True})
    with pytest.raises(ConfigError, match="distribution_alignment"):
        from accelerate.state import AcceleratorState
        AcceleratorState._reset_state(reset_partial_state=True)
        train(cfg, NoClasses())


def test_contrastive_stage_fine_tunes_the_encoder_and_is_cached(model_dir, tiny_text_data, tmp_path, monkeypatch):
    from tasks.common.contrastive import contrastive_encoder

    monkeypatch.setenv("UDA_CACHE", str(tmp_path / "cache"))
    texts = ["great fun movie", "awful boring plot", "superb acting", "dull and poor", "loved it", "hated it"]
    labels = [1, 0, 1, 0, 1, 0]
    enc = contrastive_encoder(str(model_dir), texts, labels, seed=0, max_length=16, iterations=2, batch_size=4)
    assert (enc / "config.json").is_file() and (enc.parent / "DONE").is_file()
    before, after = weights(model_dir), weights(enc)
    shared = [k for k in after if k.replace("bert.", "") in {j.replace("bert.", "") for j in before}]
    assert shared
    changed = [k for k in after if "encoder.layer.0.attention.self.query.weight" in k]
    old = next(v for k, v in before.items() if k.endswith("encoder.layer.0.attention.self.query.weight"))
    assert changed and not torch.equal(after[changed[0]], old)  # the stage trained the encoder
    # same inputs: the cached folder, without training again
    assert contrastive_encoder(str(model_dir), texts, labels, seed=0, max_length=16, iterations=2,
                               batch_size=4) == enc
    # another seed is another stage
    assert contrastive_encoder(str(model_dir), texts, labels, seed=1, max_length=16, iterations=2,
                               batch_size=4) != enc
    # and a run trains from it
    results = run(tiny_config(model_dir, tiny_text_data, tmp_path / "run", **{
        "model.pooling": "mean", "model.contrastive_iterations": 1, "train.max_steps": 2, "train.eval_every": 2}))
    assert results["test"]["num_examples"] == 60


def test_head_lr_puts_only_the_new_heads_in_their_own_groups(model_dir, tiny_text_data, tmp_path):
    """train.head_lr: the parameters outside transformers' base model (the classifier, the QA span
    and answerability heads) get that learning rate; without it the groups are the usual two."""
    from tasks.common.qa_reader import build_qa_model
    from tasks.text.model import build_text_classifier
    from uda.optim import param_groups

    clf = build_text_classifier(str(model_dir), ["neg", "pos"], "mean")
    assert [(g["lr"], g["weight_decay"]) for g in param_groups(clf, 0.01, 1e-5)] == [(1e-5, 0.01), (1e-5, 0.0)]
    groups = param_groups(clf, 0.01, 1e-5, head_lr=1e-3)
    head = {id(p) for g in groups if g["lr"] == 1e-3 for p in g["params"]}
    assert head == {id(p) for p in clf.classifier.parameters()}
    assert sum(len(g["params"]) for g in groups) == len(list(clf.parameters()))

    from transformers import BertConfig, BertForQuestionAnswering
    qa_dir = tmp_path / "qa"
    BertForQuestionAnswering(BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=20)).save_pretrained(qa_dir)
    qa = build_qa_model(str(qa_dir))
    head = {id(p) for g in param_groups(qa, 0.01, 1e-5, head_lr=1e-3) if g["lr"] == 1e-3 for p in g["params"]}
    assert head == {id(p) for m in (qa.qa_outputs, qa.answerability) for p in m.parameters()}

    out = tmp_path / "run"
    run(tiny_config(model_dir, tiny_text_data, out, **{"train.head_lr": 1e-3, "train.max_steps": 2,
                                                      "train.eval_every": 2, "train.warmup_steps": 0}))
    assert (out / "results.json").is_file()


def test_runs_after_a_contrastive_stage_keep_their_mixed_precision(model_dir, tiny_text_data, tmp_path, monkeypatch):
    """SetFit's trainer (transformers' TrainingArguments) resets accelerate's process-wide state: the
    run after the stage must still train in bf16, and further train() calls in the same process (a
    sweep) must start as the first did, with another precision if they ask for one."""
    from accelerate.state import AcceleratorState, PartialState

    from uda.task import get_task
    from uda.train import train

    monkeypatch.setenv("UDA_CACHE", str(tmp_path / "cache"))  # empty: the stage trains
    monkeypatch.setattr("uda.devices.cpu_has_native_bf16", lambda: True)  # bf16 is allowed on any CPU here
    AcceleratorState._reset_state(reset_partial_state=True)
    seen = []
    original = torch.autocast.__init__

    def spy(self, *args, **kwargs):  # the dtypes the loop and evaluation compute in
        original(self, *args, **kwargs)
        seen.append(self.fast_dtype if self._enabled else None)

    monkeypatch.setattr(torch.autocast, "__init__", spy)
    try:
        cfg = tiny_config(model_dir, tiny_text_data, tmp_path / "bf16", **{
            "model.contrastive_iterations": 1, "train.mixed_precision": "bf16", "train.max_steps": 2,
            "train.eval_every": 2})
        assert train(cfg, get_task(cfg.task))["mixed_precision"] == "bf16"
        assert seen and set(seen) == {torch.bfloat16}
        assert PartialState._shared_state == {}  # left as it was found
        cfg = tiny_config(model_dir, tiny_text_data, tmp_path / "fp32", **{
            "model.contrastive_iterations": 1, "model.contrastive_lr": 1e-5, "train.max_steps": 2,
            "train.eval_every": 2})
        assert train(cfg, get_task(cfg.task))["mixed_precision"] == "no"
        cfg = tiny_config(model_dir, tiny_text_data, tmp_path / "bf16-again", **{
            "train.mixed_precision": "bf16", "train.max_steps": 2, "train.eval_every": 2})
        assert train(cfg, get_task(cfg.task))["mixed_precision"] == "bf16"
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def test_fit_scale_is_the_maximum_likelihood_scale():
    from tasks.text.model import fit_scale

    scores = torch.tensor([[0.1, 0.3], [0.2, 0.1], [0.0, 0.5], [0.4, 0.0]])
    labels = torch.tensor([1, 0, 1, 1])
    # scipy's bounded minimisation of the same cross-entropy
    assert fit_scale(scores, labels) == pytest.approx(1.83234660142338, abs=1e-5)
    # separable examples: the likelihood grows without bound, so s stops where the largest gap is 10
    assert fit_scale(torch.tensor([[0.0, 0.5], [0.5, 0.0]]), torch.tensor([1, 0])) == pytest.approx(20.0, rel=1e-6)
    # examples that disagree with the scores: s = 0 (uniform predictions)
    assert fit_scale(torch.tensor([[0.0, 0.5], [0.5, 0.0]]), torch.tensor([0, 1])) == pytest.approx(0.0, abs=1e-6)


def test_head_from_label_descriptions_is_the_zero_shot_classifier(model_dir, tmp_path):
    from transformers import AutoTokenizer

    from tasks.text.model import build_text_classifier, init_head_from_descriptions, pooled_features

    tok = AutoTokenizer.from_pretrained(model_dir)
    torch.manual_seed(0)
    model = build_text_classifier(str(model_dir), ["neg", "pos"], "mean")
    descriptions = tok(["a bad movie", "a great movie"], padding=True, return_tensors="pt")
    texts = ["terrible acting and a bad plot", "great fun", "great great film", "bad"]
    labelled = dict(tok(texts, padding=True, return_tensors="pt"), labels=torch.tensor([0, 1, 1, 0]))
    scale = init_head_from_descriptions(model, descriptions, [labelled])
    assert model.training  # left in the mode it was in
    e = torch.nn.functional.normalize(pooled_features(model, descriptions), dim=-1)
    assert torch.allclose(model.classifier[1].weight, scale * e, atol=1e-6)
    assert model.classifier[1].bias.abs().max() == 0
    x = pooled_features(model, {k: v for k, v in labelled.items() if k != "labels"})
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=labelled["input_ids"], attention_mask=labelled["attention_mask"]).logits
    # the same argmax as cosine similarity with the descriptions
    cosine = torch.nn.functional.normalize(x, dim=-1) @ e.T
    assert torch.equal(logits.argmax(-1), cosine.argmax(-1))


def test_label_descriptions_in_a_run_and_their_errors(model_dir, tiny_text_data, tmp_path, capsys):
    from uda.config import ConfigError

    out = tmp_path / "run"
    described = {"model.pooling": "mean", "model.head_init": "descriptions"}
    run(tiny_config(model_dir, tiny_text_data, out, **{**described, "train.max_steps": 2, "train.eval_every": 2,
                                                      "model.label_descriptions": ["bad", "good"]}))
    assert "classifier head started from the label descriptions" in capsys.readouterr().out
    assert (out / "results.json").is_file()
    with pytest.raises(ConfigError, match="has 3 texts but the data has 2 classes"):
        run(tiny_config(model_dir, tiny_text_data, tmp_path / "three", **{
            **described, "model.label_descriptions": ["bad", "so-so", "good"]}))
    with pytest.raises(ConfigError, match="--model.pooling mean"):
        tiny_config(model_dir, tiny_text_data, tmp_path / "cls", **{"model.head_init": "descriptions",
                                                                    "model.label_descriptions": ["bad", "good"]})
    with pytest.raises(ConfigError, match="non-empty texts"):
        tiny_config(model_dir, tiny_text_data, tmp_path / "empty", **{**described,
                                                                      "model.label_descriptions": ["bad", " "]})
    with pytest.raises(ConfigError, match="model.head_init is random: add --model.head_init descriptions"):
        tiny_config(model_dir, tiny_text_data, tmp_path / "random", **{"model.pooling": "mean",
                                                                       "model.label_descriptions": ["bad", "good"]})


def test_start_accuracy_benchmark_evaluates_the_untrained_start(model_dir, tiny_text_data, tmp_path, capsys):
    """benchmarks/start_accuracy.py builds each seed's split and model as a run would and scores dev once;
    a seed other than the reference one draws its own labelled set."""
    from benchmarks.start_accuracy import main

    out = tmp_path / "start"
    assert main(["--seeds", "0", "1", "--out", str(out), "--", "--task", "text_classification",
                 "--model.name_or_path", str(model_dir), "--data.path", str(tiny_text_data),
                 "--data.num_labeled", "20", "--data.dev_size", "40", "--model.max_length", "32",
                 "--model.pooling", "mean", "--model.head_init", "descriptions",
                 "--model.label_descriptions", '["bad", "good"]']) == 0
    rows = json.loads((out / "results.json").read_text())["runs"]
    assert [r["seed"] for r in rows] == [0, 1]
    assert all(r["dev"]["num_examples"] == 40 and 0 <= r["dev"]["accuracy"] <= 1 for r in rows)
    assert len(rows[0]["labeled_ids"]) == 20 and rows[0]["labeled_ids"] != rows[1]["labeled_ids"]
