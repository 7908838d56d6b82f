"""Text classifiers: the model's own sequence-classification head, or a mean-pooling head.

Sentence encoders such as all-MiniLM-L6-v2 were trained to represent a text by the mean of its
token states, not by the first token: a linear probe on their mean-pooled features is clearly better
than one on the [CLS]/pooler output (README: 0.60-0.62 against 0.53-0.56 dev accuracy at 20 labels).
``MeanPoolClassifier`` puts the classifier there.

Its state dict uses the encoder's own key names (``embeddings.*``, ``encoder.*``) plus
``classifier.*``, and ``save_pretrained`` writes all of it into the encoder's ``model.safetensors``
with a ``text_classifier.json`` beside it, so the folder loads whole with
:func:`load_text_classifier` and as a plain encoder with ``AutoModel`` (which skips the head).

For transformers' own loaders it also writes ``modeling_uda_text.py`` (:data:`MODELING_FILE`): the
encoder's class plus the same head (``MeanPoolForSequenceClassification``), registered in config.json's
``auto_map`` for ``AutoModelForSequenceClassification``, and a text-classification pipeline that truncates
by default, registered in ``custom_pipelines``. So
``pipeline("text-classification", model=folder, trust_remote_code=True)`` gives the run's predictions,
and without ``trust_remote_code`` that call is an error rather than a model with a random head.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch
from torch import nn

from tasks.common.heads import HeadedModel

HEAD_CONFIG = "text_classifier.json"


@dataclass
class ClassifierOutput:
    logits: torch.Tensor  # (B, K)


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of the token states over the real (unpadded) tokens. (B, T, H), (B, T) -> (B, H)."""
    mask = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


class MeanPoolClassifier(HeadedModel):
    def __init__(self, encoder: nn.Module, num_labels: int, dropout: Optional[float] = None) -> None:
        if getattr(encoder, "pooler", None) is not None:
            # the first-token pooler is not used; left in, it would have no gradient, which
            # DistributedDataParallel treats as an error
            encoder.pooler = None
        super().__init__(encoder)  # parameter names are the encoder's: AutoModel reads the saved folder
        cfg = encoder.config
        p = dropout if dropout is not None else getattr(cfg, "hidden_dropout_prob", 0.1)
        self.classifier = nn.Sequential(nn.Dropout(p), nn.Linear(cfg.hidden_size, num_labels))
        nn.init.normal_(self.classifier[1].weight, std=getattr(cfg, "initializer_range", 0.02))
        nn.init.zeros_(self.classifier[1].bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: Optional[torch.Tensor] = None) -> ClassifierOutput:
        kwargs = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask, return_dict=True,
                                    **kwargs).last_hidden_state  # (B, T, H)
        return ClassifierOutput(self.classifier(mean_pool(hidden, attention_mask)))

    def save_pretrained(self, out_dir: str | Path) -> None:
        out = Path(out_dir)
        self.inner.save_pretrained(out, state_dict=self.state_dict())
        (out / HEAD_CONFIG).write_text(json.dumps({
            "pooling": "mean", "num_labels": self.classifier[1].out_features, "dropout": self.classifier[0].p,
            "id2label": {str(k): v for k, v in (self.config.id2label or {}).items()},
            "weights": "classifier.1.* in model.safetensors",
            "load": "transformers.pipeline('text-classification', model=FOLDER, trust_remote_code=True, "
                    "truncation=True), or tasks.text.model.load_text_classifier(FOLDER)"}, indent=2), encoding="utf-8")
        write_mean_pool_code(out, type(self.inner), self.classifier[0].p)


MODELING_FILE = "modeling_uda_text.py"
MODEL_CLASS = "MeanPoolForSequenceClassification"
PIPELINE_CLASS = "TruncatingTextClassificationPipeline"

# The code saved beside a mean-pooling classifier's weights (BASE_MODEL_CLASS: the encoder's class).
# It subclasses the encoder itself, so its parameter names are the saved ones (``embeddings.*``,
# ``encoder.*``, ``classifier.1.*``) and transformers loads the folder into it without renaming.
_MODELING_CODE = '''"""Written by the uda library (tasks/text/model.py) beside a mean-pooling text classifier.

``MeanPoolForSequenceClassification``: BASE_MODEL_CLASS plus a linear head on the mean of the last
hidden states over the real (unpadded) tokens, as the library trained it. Load it with
``AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)`` or
``pipeline("text-classification", model=folder, trust_remote_code=True)``.
"""

import torch
from torch import nn
from transformers import BASE_MODEL_CLASS, TextClassificationPipeline
from transformers.modeling_outputs import SequenceClassifierOutput


class MeanPoolForSequenceClassification(BASE_MODEL_CLASS):
    def __init__(self, config):
        super().__init__(config)
        if getattr(self, "pooler", None) is not None:
            self.pooler = None  # the first-token pooler is not used (nor saved)
        p = getattr(config, "classifier_dropout", None)
        if p is None:
            p = getattr(config, "hidden_dropout_prob", 0.1)
        self.num_labels = config.num_labels
        self.classifier = nn.Sequential(nn.Dropout(p), nn.Linear(config.hidden_size, config.num_labels))
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        hidden = super().forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)[0]  # (B, T, H)
        mask = attention_mask.to(hidden.dtype).unsqueeze(-1)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        logits = self.classifier(pooled)
        loss = None if labels is None else nn.functional.cross_entropy(logits.float(), labels.view(-1))
        return SequenceClassifierOutput(loss=loss, logits=logits)


class TruncatingTextClassificationPipeline(TextClassificationPipeline):
    """The text-classification pipeline, truncating by default to the saved tokenizer's ``model_max_length``
    on its ``truncation_side`` (the window the model was trained and evaluated on)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("truncation", True)
        super().__init__(*args, **kwargs)

    def check_model_type(self, supported_models):
        pass  # the model is this file's MeanPoolForSequenceClassification, which transformers' list lacks
'''


def write_mean_pool_code(out: Path, encoder_class: type, dropout: float) -> bool:
    """Save :data:`MODELING_FILE` for an encoder of ``encoder_class`` into the folder ``out`` (which its
    ``save_pretrained`` wrote) and register it in config.json. False, with a warning, when the class is
    not one of transformers' own (an encoder loaded with remote code): the folder then loads whole only
    with :func:`load_text_classifier`."""
    from tasks.common.export import ship_model_code

    return ship_model_code(out, encoder_class, MODELING_FILE,
                           _MODELING_CODE.replace("BASE_MODEL_CLASS", encoder_class.__name__),
                           "AutoModelForSequenceClassification", MODEL_CLASS, "text-classification", PIPELINE_CLASS,
                           {"classifier_dropout": dropout}, "tasks.text.model.load_text_classifier")


def build_text_classifier(name_or_path: str, label_names: list[str], pooling: str = "cls",
                          dropout: Optional[float] = None, trust_remote_code: bool = False) -> nn.Module:
    """A classifier over ``label_names`` from a pretrained encoder, or from a folder this module (or
    ``AutoModelForSequenceClassification``) saved: a warm start keeps its trained head when the labels
    agree."""
    from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

    id2label = dict(enumerate(label_names))
    kwargs: dict = {}
    if dropout is not None:
        kwargs.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    config = AutoConfig.from_pretrained(name_or_path, num_labels=len(label_names), id2label=id2label,
                                        label2id={v: k for k, v in id2label.items()},
                                        trust_remote_code=trust_remote_code, **kwargs)
    if pooling == "cls":
        if (Path(name_or_path) / HEAD_CONFIG).is_file():
            raise ValueError(f"'{name_or_path}' holds a mean-pooling classifier; use --model.pooling mean with it")
        saved = AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
        has_head = any("ForSequenceClassification" in a for a in (saved.architectures or []))
        other = has_head and saved.num_labels != len(label_names)
        if other:
            _fresh_head_warning(name_or_path, saved.num_labels, len(label_names))
        return AutoModelForSequenceClassification.from_pretrained(name_or_path, config=config,
                                                                  trust_remote_code=trust_remote_code,
                                                                  ignore_mismatched_sizes=other)
    if pooling != "mean":
        raise ValueError(f"unknown pooling {pooling!r}: use 'cls' or 'mean'")
    encoder = AutoModel.from_pretrained(name_or_path, config=config, trust_remote_code=trust_remote_code)
    model = MeanPoolClassifier(encoder, len(label_names), dropout)
    head = Path(name_or_path) / HEAD_CONFIG
    if head.is_file():
        saved_labels = json.loads(head.read_text(encoding="utf-8")).get("num_labels")
        if saved_labels == len(label_names):
            model.classifier.load_state_dict(_head_weights(Path(name_or_path)))
        else:
            _fresh_head_warning(name_or_path, saved_labels, len(label_names))
    return model


def _fresh_head_warning(name_or_path: str, saved: Any, wanted: int) -> None:
    from tqdm.auto import tqdm

    tqdm.write(f"warning: the start model '{name_or_path}' has a classifier of {saved} classes and this data has "
               f"{wanted}: its encoder is kept and the classifier starts afresh")


@torch.no_grad()
def pooled_features(model: MeanPoolClassifier, batch: dict) -> torch.Tensor:
    """The mean-pooled encoder states the head reads, in eval mode (no dropout). (B, H)"""
    was_training = model.training
    model.eval()
    try:
        hidden = model.inner(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                             return_dict=True).last_hidden_state
        return mean_pool(hidden, batch["attention_mask"]).float()
    finally:
        model.train(was_training)


def fit_scale(scores: torch.Tensor, labels: torch.Tensor, max_logit: float = 10.0) -> float:
    """The s >= 0 that maximises the likelihood of ``labels`` under softmax(s * scores) (scores (N, K)).

    The loss is convex in s, so a ternary search finds it; s is capped where the largest logit gap over
    the examples reaches ``max_logit`` (perfectly separated examples would send it to infinity)."""
    scores = scores.double()  # the loss is flat near its minimum: float32 would stop short
    gap = float((scores.max(dim=-1).values - scores.min(dim=-1).values).max())
    hi = max_logit / gap if gap > 0 else 0.0
    lo = 0.0

    def loss(s: float) -> float:
        return float(torch.nn.functional.cross_entropy(s * scores, labels))

    for _ in range(100):
        a, b = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if loss(a) <= loss(b):
            hi = b
        else:
            lo = a
    return (lo + hi) / 2


def init_head_from_descriptions(model: MeanPoolClassifier, descriptions: dict, labelled: list[dict]) -> float:
    """Start the head as a zero-shot classifier: class c's weights are s * e_c, e_c the normalised
    mean-pooled embedding of its description, bias 0, so the logits are s * (e_c . x) for a text's pooled
    features x (the same argmax as cosine similarity); s is fitted to the labelled examples
    (``fit_scale``). ``descriptions``: a tokenised batch; ``labelled``: tokenised batches with ``labels``.
    Returns s."""
    e = torch.nn.functional.normalize(pooled_features(model, descriptions), dim=-1)  # (K, H)
    scores = torch.cat([pooled_features(model, b) @ e.T for b in labelled])
    scale = fit_scale(scores, torch.cat([b["labels"] for b in labelled]))
    linear = model.classifier[1]
    linear.weight.data.copy_((scale * e).to(linear.weight.dtype))
    linear.bias.data.zero_()
    return scale


def _head_weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors import safe_open

    state = {}
    for f in sorted(folder.glob("model*.safetensors")):
        with safe_open(str(f), framework="pt") as sf:
            state.update({k[len("classifier."):]: sf.get_tensor(k) for k in sf.keys() if k.startswith("classifier.")})
    if not state:
        raise FileNotFoundError(f"no classifier.* weights in the safetensors files of '{folder}'")
    return state


def load_text_classifier(path: str | Path, trust_remote_code: bool = False) -> nn.Module:
    """Load a classifier saved by the text classification task (either pooling)."""
    from transformers import AutoModelForSequenceClassification

    p = Path(path)
    if not (p / HEAD_CONFIG).is_file():
        return AutoModelForSequenceClassification.from_pretrained(str(p), trust_remote_code=trust_remote_code)
    names = json.loads((p / "label_names.json").read_text(encoding="utf-8")) if (p / "label_names.json").is_file() \
        else [v for _, v in sorted(json.loads((p / HEAD_CONFIG).read_text())["id2label"].items(), key=lambda kv: int(kv[0]))]
    return build_text_classifier(str(p), names, "mean", trust_remote_code=trust_remote_code)
