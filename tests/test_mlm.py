"""The MLM stage (--model.mlm_steps): its options, its loss, the training loop lowering it, the encoder
folder it leaves (and its cache), and a run of the text task that starts from it."""

from __future__ import annotations

import json
import random

import pytest
import torch

from tests.conftest import NEG_WORDS, POS_WORDS
from tests.trainkit import metric_lines, model_dir, run, tiny_config, weights  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


def corpus(n: int = 24, seed: int = 0) -> list[str]:
    """A tiny, repetitive corpus: a few sentence templates over the tiny BERT's vocabulary."""
    rng = random.Random(seed)
    templates = ["the movie was {p} and the acting was {p}", "this film was {n} and the plot was {n}",
                 "i loved it , a really {p} story", "i hated it , a very {n} story"]
    return [rng.choice(templates).format(p=rng.choice(POS_WORDS), n=rng.choice(NEG_WORDS)) for _ in range(n)]


@pytest.mark.parametrize("key, value, match", [
    ("model.mlm_steps", "0", "mlm_steps must be >= 1"),
    ("model.mlm_lr", "0", "mlm_lr must be > 0"),
    ("model.mlm_batch_size", "0", "mlm_batch_size must be >= 1"),
    ("model.mlm_max_texts", "0", "mlm_max_texts must be >= 1"),
    ("model.mlm_probability", "0", r"mlm_probability must be in \(0, 1\)"),
    ("model.mlm_probability", "1", r"mlm_probability must be in \(0, 1\)"),
])
def test_options_are_checked(key, value, match):
    from uda.config import ConfigError, build_config

    with pytest.raises(ConfigError, match=match):
        build_config("text_classification", None, {key: value})


def test_option_defaults_and_flags():
    from uda.config import build_config

    m = build_config("imdb").model
    assert (m.mlm_steps, m.mlm_lr, m.mlm_batch_size, m.mlm_max_texts, m.mlm_probability) == (None, 5e-5, 32, 50000, 0.15)
    m = build_config("imdb", None, {"model.mlm_steps": "1000", "model.mlm_max_texts": "none",
                                    "model.mlm_lr": "1e-4"}).model
    assert (m.mlm_steps, m.mlm_max_texts, m.mlm_lr) == (1000, None, 1e-4)


def test_the_per_example_terms_average_to_the_masked_lm_loss(model_dir):
    from transformers import AutoModelForMaskedLM, AutoTokenizer, DataCollatorForLanguageModeling

    from tasks.common.mlm import masked_lm_loss

    tok = AutoTokenizer.from_pretrained(model_dir)
    torch.manual_seed(0)
    model = AutoModelForMaskedLM.from_pretrained(model_dir).eval()
    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.3, seed=1)
    enc = tok(corpus(6), truncation=True, max_length=16, return_special_tokens_mask=True)
    batch = collator([{k: enc[k][i] for k in enc} for i in range(6)])
    with torch.no_grad():
        out = model(**batch)
    sup = masked_lm_loss(out.logits, batch["labels"])
    # the mean over the batch is transformers' loss: the mean over the batch's masked tokens
    assert sup.per_example_loss.shape == (6,) and sup.per_example_loss.mean().item() == pytest.approx(out.loss.item())
    assert bool(((sup.gold_prob > 0) & (sup.gold_prob <= 1)).all())
    assert bool(((sup.correct >= 0) & (sup.correct <= 1)).all())
    none = torch.full_like(batch["labels"], -100)  # nothing masked: 0, not NaN
    assert masked_lm_loss(out.logits, none).per_example_loss.sum().item() == 0.0


def test_the_loop_lowers_the_masked_lm_loss(model_dir, tmp_path):
    from transformers import AutoModelForMaskedLM, AutoTokenizer, DataCollatorForLanguageModeling

    from tasks.common.mlm import MLMTask, stage_config

    texts = corpus()
    tok = AutoTokenizer.from_pretrained(model_dir)
    torch.manual_seed(0)
    before_model = AutoModelForMaskedLM.from_pretrained(model_dir)  # a classifier checkpoint: a fresh MLM head
    assert before_model.get_output_embeddings().weight is before_model.get_input_embeddings().weight  # tied
    # a fixed masked batch (its own seed), scored before and after
    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.15, seed=123)
    enc = tok(texts, truncation=True, max_length=16, return_special_tokens_mask=True)
    batch = collator([{k: enc[k][i] for k in enc} for i in range(len(texts))])

    def loss(model) -> float:
        model.eval()
        with torch.no_grad():
            return float(model(**batch).loss)

    cfg = stage_config(tmp_path / "run", str(model_dir), seed=0, max_length=16, truncation_side="right", steps=30,
                       batch_size=8, lr=2e-3, mixed_precision="no", trust_remote_code=False)
    results = run(cfg, MLMTask(texts))  # the training loop, with no dev or test set
    assert results["selected_model"] == {"step": 30, "by": "last step (no dev split)"} and results["test"] == {}
    losses = [line["train/loss"] for line in metric_lines(tmp_path / "run")]
    assert len(losses) == 30
    after = loss(AutoModelForMaskedLM.from_pretrained(tmp_path / "run" / "model"))
    assert after < 0.8 * loss(before_model), (loss(before_model), after)


def test_encoder_folder_loads_keeps_the_pooler_and_is_cached(model_dir, tmp_path, monkeypatch):
    from transformers import AutoConfig, AutoModel

    import tasks.common.mlm as mlm

    monkeypatch.setenv("UDA_CACHE", str(tmp_path / "cache"))
    texts = corpus()
    rng_before = torch.get_rng_state()
    enc = mlm.mlm_encoder(str(model_dir), texts, seed=0, max_length=16, steps=3, batch_size=4, lr=1e-3)
    assert torch.equal(torch.get_rng_state(), rng_before)  # the run's own draws are untouched
    assert enc.parent.parent == tmp_path / "cache" / "mlm" and (enc.parent / "DONE").is_file()
    assert sorted(p.name for p in enc.parent.parent.iterdir()) == [enc.parent.name]  # the stage's run folder is gone
    record = json.loads((enc.parent / "settings.json").read_text())
    assert (record["steps"], record["texts"], len(record["losses"])) == (3, len(texts), 3)
    assert len((enc.parent / "metrics.jsonl").read_text().splitlines()) == 3  # the stage's log, kept
    loaded = AutoModel.from_pretrained(enc)
    assert loaded.config.hidden_size == AutoConfig.from_pretrained(model_dir).hidden_size
    before, after = weights(model_dir), weights(enc)
    assert not any(k.startswith("cls.") for k in after)  # the encoder only, not the MLM head
    assert torch.equal(after["pooler.dense.weight"], before["bert.pooler.dense.weight"])  # kept, not fresh
    assert not torch.equal(after["encoder.layer.0.attention.self.query.weight"],
                           before["bert.encoder.layer.0.attention.self.query.weight"])  # trained
    # same inputs: the cached folder, without training again
    monkeypatch.setattr(mlm, "run_stage", lambda *a, **k: pytest.fail("trained again instead of reusing the cache"))
    mtime = (enc / "model.safetensors").stat().st_mtime_ns
    assert mlm.mlm_encoder(str(model_dir), texts, seed=0, max_length=16, steps=3, batch_size=4, lr=1e-3) == enc
    assert (enc / "model.safetensors").stat().st_mtime_ns == mtime
    # keys given as hashes are the same texts' identity; another seed, text set or setting is another stage
    from uda.io import text_hash

    settings = json.loads((enc.parent / "settings.json").read_text())
    settings = {k: v for k, v in settings.items() if k not in ("losses", "loss_first", "loss_last")}
    assert mlm.mlm_cache_folder(settings, texts) == enc.parent
    assert mlm.mlm_cache_folder(settings, texts, [text_hash(t) for t in texts]) == enc.parent
    others = {mlm.mlm_cache_folder({**settings, "seed": 1}, texts),
              mlm.mlm_cache_folder(settings, texts[:-1] + ["the end"]),
              mlm.mlm_cache_folder(settings, texts[::-1]),  # the order is part of the training
              mlm.mlm_cache_folder({**settings, "probability": 0.2}, texts),
              mlm.mlm_cache_folder({**settings, "mixed_precision": "bf16"}, texts)}
    assert len(others) == 5 and enc.parent not in others


def test_text_run_trains_from_the_mlm_encoder_then_reuses_it(model_dir, tiny_text_data, tmp_path, monkeypatch):
    import tasks.common.mlm as mlm

    monkeypatch.setenv("UDA_CACHE", str(tmp_path / "cache"))
    opts = {"model.mlm_steps": 3, "model.mlm_batch_size": 4, "model.mlm_max_texts": 40,
            "train.max_steps": 2, "train.eval_every": 2}
    results = run(tiny_config(model_dir, tiny_text_data, tmp_path / "run", **opts))
    assert results["test"]["num_examples"] == 60
    done = list((tmp_path / "cache" / "mlm").glob("*/DONE"))
    assert len(done) == 1
    assert json.loads((done[0].parent / "settings.json").read_text())["texts"] == 40
    # supervised only, the contrastive stage after it: the same pool and seed, so the same MLM encoder
    monkeypatch.setattr(mlm, "run_stage", lambda *a, **k: pytest.fail("trained again instead of reusing the cache"))
    results = run(tiny_config(model_dir, tiny_text_data, tmp_path / "run2", **opts, **{
        "uda.lambda_u": 0, "model.pooling": "mean", "model.contrastive_iterations": 1}))
    assert results["test"]["num_examples"] == 60
    assert len(list((tmp_path / "cache" / "contrastive").glob("*/DONE"))) == 1


def test_a_run_without_an_unlabelled_pool_says_so(model_dir, tiny_text_data, tmp_path):
    from uda.data import DataError

    data = tmp_path / "data"
    data.mkdir()
    for name in ("train", "test"):
        (data / f"{name}.jsonl").write_text((tiny_text_data / f"{name}.jsonl").read_text())
    cfg = tiny_config(model_dir, data, tmp_path / "run", **{"model.mlm_steps": 2, "uda.lambda_u": 0,
                                                             "data.unlabeled_from_train": False})
    with pytest.raises(DataError, match="mlm_steps pretrains the encoder on the unlabelled pool"):
        run(cfg)
