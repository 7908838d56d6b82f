"""The single-passage SQuAD 2.0 reader (encoder + start/end span head + a 2-logit answerability head),
the loaders every span reader of this library shares, and a finished squad_v2 run's reader.

The span part is a stock ``AutoModelForQuestionAnswering`` (encoder + ``qa_outputs``). The
answerability head (the "front verifier" of the Retrospective Reader, Zhang et al.) reads the last
hidden state of the first token ([CLS]) and gives logits [no answer, has answer].

The reader's state dict uses the span model's own key names (``bert.*``, ``qa_outputs.*``) plus
``answerability.*``, and ``save_pretrained`` writes all of it into the one ``model.safetensors``. So
the folder loads three ways: into a reader with ``load_state_dict`` (what checkpoints do), whole with
:func:`load_qa_model`, and as a plain span model with ``AutoModelForQuestionAnswering`` (which skips the
``answerability.*`` keys). A squad_v2 run's saved model also loads whole in transformers' own loaders with
``trust_remote_code=True``: ``QATask.save`` ships the reader's code and a question-answering pipeline that
answers as the run did (tasks/qa/export.py; the loaders here drop what it registers, :func:`strip_export`).

Both tasks read with it: ``--task squad_v2`` trains it; ``--task passages`` starts its multi-passage
reader from one (:func:`span_model_from_pretrained`, :func:`load_heads`) and can re-read its top passage
with a squad_v2 run's (:func:`load_run_reader`, ``passages.single_reader``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch
from torch import nn

from tasks.common.heads import HeadedModel

HEAD_CONFIG = "answerability_head.json"
# what the squad_v2 export (tasks/qa/export.py) registers in a saved reader's config.json
EXPORT_KEY = "uda_qa"  # the run's windowing and no-answer settings
MODEL_CLASS = "UdaQAWithAnswerability"  # the shipped reader class (auto_map, architectures)
_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def model_inputs(batch: dict) -> dict:
    """The reader's forward arguments of a batch (which also holds masks and labels)."""
    return {k: batch[k] for k in _MODEL_INPUTS if k in batch}


@dataclass
class QAOutput:
    start_logits: torch.Tensor  # (B, T)
    end_logits: torch.Tensor  # (B, T)
    answerability_logits: torch.Tensor  # (B, 2): [no answer, has answer]


class QAWithAnswerability(HeadedModel):
    def __init__(self, qa_model: nn.Module, dropout: Optional[float] = None) -> None:
        super().__init__(qa_model)  # parameter names are the span model's
        cfg = qa_model.config
        p = dropout if dropout is not None else getattr(cfg, "hidden_dropout_prob", 0.1)
        self.answerability = nn.Sequential(nn.Dropout(p), nn.Linear(cfg.hidden_size, 2))
        std = getattr(cfg, "initializer_range", 0.02)
        nn.init.normal_(self.answerability[1].weight, std=std)
        nn.init.zeros_(self.answerability[1].bias)

    @property
    def span_model(self) -> nn.Module:
        return self.inner

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None) -> QAOutput:
        kwargs = {"attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        out = self.span_model(input_ids=input_ids, output_hidden_states=True, return_dict=True, **kwargs)
        first = out.hidden_states[-1][:, 0]  # (B, H): the first token's final hidden state
        return QAOutput(out.start_logits, out.end_logits, self.answerability(first))

    def save_pretrained(self, out_dir: str | Path) -> None:
        out = Path(out_dir)
        self.span_model.save_pretrained(out, state_dict=self.state_dict())
        (out / HEAD_CONFIG).write_text(json.dumps({
            "dropout": self.answerability[0].p, "labels": ["no_answer", "has_answer"],
            "input": "last hidden state of token 0", "weights": "answerability.1.* in model.safetensors"},
            indent=2), encoding="utf-8")


def span_model_from_pretrained(name_or_path: str, dropout: Optional[float] = None,
                               trust_remote_code: bool = False) -> nn.Module:
    """transformers' AutoModelForQuestionAnswering (encoder + start/end head) from a pretrained encoder,
    with ``dropout`` (None: the model's) on its hidden states and attention."""
    from transformers import AutoConfig, AutoModelForQuestionAnswering

    kwargs: dict = {}
    if dropout is not None:
        kwargs.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    config = AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust_remote_code, **kwargs)
    # a squad_v2 run's folder maps AutoModelForQuestionAnswering to its exported reader class: the span
    # model here is the plain one (the reader's heads are this library's own modules)
    strip_export(config)
    return AutoModelForQuestionAnswering.from_pretrained(name_or_path, config=config,
                                                         trust_remote_code=trust_remote_code)


def build_qa_model(name_or_path: str, dropout: Optional[float] = None, trust_remote_code: bool = False) \
        -> QAWithAnswerability:
    """A new reader from a pretrained encoder (the span and answerability heads start untrained), or
    from a reader this library saved (a QA start from ``uda-qa-start``, a squad_v2 run's model): then
    both heads start from its trained weights."""
    model = QAWithAnswerability(span_model_from_pretrained(name_or_path, dropout, trust_remote_code), dropout)
    if (Path(name_or_path) / HEAD_CONFIG).is_file():
        load_heads(model, Path(name_or_path), ("answerability",))
    return model


def load_qa_model(path: str | Path, trust_remote_code: bool = False) -> QAWithAnswerability:
    """Load a reader saved by :meth:`QAWithAnswerability.save_pretrained`."""
    return load_reader(path, QAWithAnswerability, HEAD_CONFIG, ("answerability",), "squad_v2", trust_remote_code)


def load_reader(path: str | Path, cls: Any, head_config: str, heads: tuple[str, ...], task: str,
                trust_remote_code: bool = False) -> Any:
    """A reader ``cls(span_model, dropout)`` saved by its save_pretrained: the span model through
    transformers, then the heads' weights, and the dropout recorded in ``head_config``."""
    p = Path(path)
    if not (p / head_config).is_file():
        raise FileNotFoundError(f"'{p}' has no {head_config}: not a reader saved by the {task} task")
    head_cfg = json.loads((p / head_config).read_text(encoding="utf-8"))
    qa = span_model_from_pretrained(str(p), trust_remote_code=trust_remote_code)
    model = cls(qa, head_cfg.get("dropout"))
    load_heads(model, p, heads)
    return model


def load_heads(model: nn.Module, folder: Path, heads: tuple[str, ...]) -> None:
    """Load the weights of ``model``'s own heads (its submodules ``heads``) from the safetensors files of
    a folder its save_pretrained wrote (transformers' loader skips them: they are not the span model's)."""
    from safetensors import safe_open

    state: dict = {}
    for f in sorted(Path(folder).glob("model*.safetensors")):
        with safe_open(str(f), framework="pt") as sf:
            state.update({k: sf.get_tensor(k) for k in sf.keys() if k.split(".")[0] in heads})
    for name in heads:
        part = {k[len(name) + 1:]: v for k, v in state.items() if k.startswith(name + ".")}
        if not part:
            raise FileNotFoundError(f"no {name}.* weights in the safetensors files of '{folder}'")
        getattr(model, name).load_state_dict(part)


def strip_export(config: Any) -> Any:
    """A loaded config without the entries the squad_v2 export (``tasks.qa.export.write_qa_export``) added
    (in place; returned), so that a model built from it is the plain span model and a folder saved from it
    claims no reader code."""
    if not hasattr(config, EXPORT_KEY):
        return config
    delattr(config, EXPORT_KEY)
    auto_map = dict(getattr(config, "auto_map", None) or {})
    if str(auto_map.get("AutoModelForQuestionAnswering", "")).endswith(f".{MODEL_CLASS}"):
        del auto_map["AutoModelForQuestionAnswering"]
    if auto_map:
        config.auto_map = auto_map
    elif hasattr(config, "auto_map"):
        delattr(config, "auto_map")
    if hasattr(config, "custom_pipelines"):
        delattr(config, "custom_pipelines")
    if getattr(config, "architectures", None) == [MODEL_CLASS]:
        config.architectures = None
    return config


def load_run_reader(run: str | Path) -> tuple[Any, Any, QAWithAnswerability]:
    """(config, tokenizer, reader) of a finished ``--task squad_v2`` run folder (its ``config.yaml`` and
    ``model/``); the config's ``model.max_length`` and ``qa`` section say how the run reads a question."""
    from transformers import AutoTokenizer

    from uda.config import build_config

    run = Path(run)
    for need in ("config.yaml", "model"):
        if not (run / need).exists():
            raise FileNotFoundError(f"'{run}' has no {need}: pass a finished --task squad_v2 run folder")
    cfg = build_config("squad_v2", str(run / "config.yaml"), {"output_dir": str(run)})
    tokenizer = AutoTokenizer.from_pretrained(str(run / "model"), trust_remote_code=cfg.model.trust_remote_code)
    tokenizer.padding_side = "right"
    return cfg, tokenizer, load_qa_model(run / "model", trust_remote_code=cfg.model.trust_remote_code)
