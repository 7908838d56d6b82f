"""Helpers for the tests that run the training loop in-process on the tiny BERT (not a test module)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from uda.config import Config, build_config


def tiny_config(model_dir: Path, data_dir: Path, out_dir: Path, **overrides: str) -> Config:
    """The end-to-end test's tiny run (12 steps, batch 4, unsup ratio 2) with dotted-key overrides."""
    opts = {"model.name_or_path": str(model_dir), "data.path": str(data_dir), "data.num_labeled": 20,
            "data.dev_size": 40, "model.max_length": 32, "train.max_steps": 12, "train.warmup_steps": 2,
            "train.lr": 1e-3, "train.batch_size": 4, "train.eval_every": 6, "train.log_every": 3,
            "uda.unsup_ratio": 2, "output_dir": str(out_dir), "report_to": "none"}
    opts.update({k.replace("__", "."): v for k, v in overrides.items()})
    return build_config("text_classification", None, opts)


def run(cfg: Config, task=None) -> dict:
    """train() in this process. accelerate keeps one global state per process, fixed by the first
    Accelerator; it is reset around each run so that runs may use different mixed precision."""
    from accelerate.state import AcceleratorState

    from uda.task import get_task
    from uda.train import train

    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        return train(cfg, task if task is not None else get_task(cfg.task))
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(Path(folder) / "model.safetensors"))


def metric_lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def training_lines(run_dir: Path) -> list[dict]:
    """metrics.jsonl training lines without the wall-clock scalars (which differ between runs)."""
    timing = ("train/examples_per_sec", "train/steps_per_sec")
    return [{k: v for k, v in line.items() if k not in timing} for line in metric_lines(run_dir)
            if "train/loss" in line]


@pytest.fixture(scope="session")
def model_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """A tiny BERT shaped like conftest's (same vocabulary, 2 layers, hidden 32) with two changes these
    tests need. Its tokenizer knows the vocabulary: transformers 5 ignores
    ``BertTokenizerFast(vocab_file=...)``, so the shared fixture's tokenizer maps every word to [UNK].
    Its weights are drawn with std 0.2 instead of 0.02, so that its predictions depend on the input
    and the consistency loss (with its augmentation RNG) is far from 0."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    d = tmp_path_factory.mktemp("tiny_bert_vocab")
    shutil.copy(Path(tiny_model_dir) / "vocab.txt", d / "vocab.txt")
    tok = BertTokenizerFast(vocab=str(d / "vocab.txt"), do_lower_case=True)
    assert tok("great movie")["input_ids"][1] != tok.unk_token_id
    tok.save_pretrained(d)
    config = BertConfig.from_pretrained(tiny_model_dir)
    config.initializer_range = 0.2
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(d)
    return d
