"""Config sections of the text classification task (IMDB and any K-class text set): its data files
and columns, and how the classifier reads the encoder. They extend the generic sections, so their
flags are ``--data.text_column``, ``--model.pooling``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, Optional, Union

from uda.config import ConfigError, DataConfig, ModelConfig, option

LABEL_SLOT = "{label}"  # where a description template puts the class name


@dataclass
class TextDataConfig(DataConfig):
    """Local data: an official ``aclImdb`` folder, a folder of train/test[/dev][/unsup] files in
    json/jsonl(.gz)/csv/parquet, or one file used as the training pool."""

    hub_id: Optional[str] = option("stanfordnlp/imdb", "Hugging Face hub dataset used when no local path is given.")
    train_file: Optional[str] = option(None, "Labelled training pool file (overrides the one found in `path`).")
    test_file: Optional[str] = option(None, "Test file (overrides the one found in `path`).")
    dev_file: Optional[str] = option(None, "Dev file; when absent the dev split is carved from the training pool.")
    unlabeled_file: Optional[str] = option(None, "Unlabelled file (overrides the one found in `path`).")
    text_column: str = option("text", "Column holding the text.")
    label_column: str = option("label", "Column holding the label (int index or label name).")
    id_column: Optional[str] = option("id", "Column holding an example id (optional; row numbers are used when absent).")
    label_names: Optional[list] = option(None, "Class names in index order (default: read from the data).")
    label_name_column: Optional[str] = option(
        "label_name", "With integer labels and no data.label_names: a column of the training file holding each "
        "row's class name (TREC's label_name), read as the names of the classes; absent: the names are the "
        "indices '0', '1', ...")
    id_order_file: Optional[str] = option(
        None,
        "File with one example id per line; the labelled set is then the first num_labeled/K ids of each class in "
        "this order (the reference UDA order reproduces the paper's 20-label split).",
    )
    dev_sampling: Literal["balanced", "proportional"] = option(
        "balanced", "How the data.dev_size dev examples are drawn: balanced (as even across classes as the data "
        "allows) or proportional (in the data's class shares, at least one of each class: for unbalanced data, "
        "where the test set is unbalanced too).")
    min_unlabeled_chars: int = option(500, "Skip texts of the unlabelled file shorter than this (reference: 500).")


@dataclass
class TextModelConfig(ModelConfig):
    pooling: Literal["cls", "mean"] = option(
        "cls", "Text classification: what the classifier reads. 'cls': the model's own sequence-classification head "
        "(BERT: the pooler on the first token); 'mean': the mean of the last hidden states over the tokens, as "
        "sentence encoders such as all-MiniLM-L6-v2 were trained (the saved model ships its code: load it with "
        "transformers' pipeline or AutoModelForSequenceClassification with trust_remote_code=True, or with "
        "tasks.text.model.load_text_classifier).")
    contrastive_iterations: Optional[int] = option(
        None, "Before training, fine-tune the encoder on pairs of the labelled examples with SetFit's contrastive "
        "stage (the setfit package): this many pairs per labelled example (SetFit's num_iterations; 20 is its "
        "default). None: off. Cached by encoder, labelled set, seed and settings.")
    contrastive_lr: float = option(2e-5, "Learning rate of the contrastive stage (SetFit's body_learning_rate).")
    mlm_steps: Optional[int] = option(
        None, "Before training (and before the contrastive stage), continue the encoder's masked-LM pretraining on "
        "the unlabelled pool for this many steps (task-adaptive pretraining, as UDA's BERT on IMDB text; "
        "transformers' AutoModelForMaskedLM, BERT's 80/10/10 masking). None: off. Cached by encoder, texts, seed "
        "and settings.")
    mlm_lr: float = option(5e-5, "Peak learning rate of the MLM stage (AdamW, 10% linear warm-up, linear decay).")
    mlm_batch_size: int = option(32, "Texts per step of the MLM stage (each cut to model.max_length tokens).")
    mlm_max_texts: Optional[int] = option(
        50000, "How many unlabelled texts the MLM stage draws (seeded by the run seed) and cycles through; None: "
        "the whole pool.")
    mlm_probability: float = option(0.15, "Share of the tokens the MLM stage masks (BERT's 15%).")
    head_init: Literal["random", "descriptions"] = option(
        "random", "How the classifier head starts. 'random': random weights. 'descriptions': a zero-shot start "
        "from one short text per class (IMDB: 'This movie is terrible.', 'This movie is great.'): each class's "
        "weights are the encoder's normalised mean-pooled embedding of its text, scaled to fit the labelled "
        "examples. Needs model.pooling mean. The texts come from model.label_descriptions; when it is not "
        "given, from labels.json in the --data.path folder, else from the template 'This text is about "
        "{label}.'. data_info.json records which (label_descriptions).")
    label_descriptions: Optional[Union[str, list]] = option(
        None, "With model.head_init descriptions: the class descriptions, as a list of texts in label order; a "
        "JSON file (looked up in the --data.path folder when not found as given) holding an object that maps "
        "each label name, or integer label as a string, to its description (the layout of labels.json and "
        "configs/labels/*.json) or a list in label order; or a template containing {label}, filled with each "
        "class name (lower-cased, underscores as spaces). None: labels.json beside the data, else the "
        "template 'This text is about {label}.'.")

    def validate(self) -> None:
        if self.contrastive_iterations is not None and self.contrastive_iterations < 1:
            raise ConfigError(f"model.contrastive_iterations must be >= 1 or None, got {self.contrastive_iterations}")
        if self.contrastive_lr <= 0:
            raise ConfigError(f"model.contrastive_lr must be > 0, got {self.contrastive_lr}")
        if self.mlm_steps is not None and self.mlm_steps < 1:
            raise ConfigError(f"model.mlm_steps must be >= 1 or None, got {self.mlm_steps}")
        if not self.mlm_lr > 0:
            raise ConfigError(f"model.mlm_lr must be > 0, got {self.mlm_lr}")
        if self.mlm_batch_size < 1:
            raise ConfigError(f"model.mlm_batch_size must be >= 1, got {self.mlm_batch_size}")
        if self.mlm_max_texts is not None and self.mlm_max_texts < 1:
            raise ConfigError(f"model.mlm_max_texts must be >= 1 or None (the whole pool), got {self.mlm_max_texts}")
        self._check_head_init()
        if not 0 < self.mlm_probability < 1:
            raise ConfigError(f"model.mlm_probability must be in (0, 1), got {self.mlm_probability}")

    def _check_head_init(self) -> None:
        """What model.head_init and model.label_descriptions can say without the data. A text that reads
        as a JSON list (the command line's '["a", "b"]') becomes that list."""
        texts = self.label_descriptions
        if isinstance(texts, str) and texts.lstrip().startswith("["):
            try:
                texts = self.label_descriptions = json.loads(texts)
            except json.JSONDecodeError as e:
                raise ConfigError(f"model.label_descriptions {texts!r} is not a JSON list of texts ({e}); write "
                                  f"it as '[\"text of class 0\", \"text of class 1\", ...]'") from None
        if isinstance(texts, list) and (not texts or not all(isinstance(t, str) and t.strip() for t in texts)):
            raise ConfigError(f"model.label_descriptions must be a list of non-empty texts, one per class, got "
                              f"{texts!r}")
        if isinstance(texts, str) and not texts.strip():
            raise ConfigError("model.label_descriptions is empty: give a list of texts, a JSON file or a template "
                              "with {label} (or none)")
        if isinstance(texts, str) and ("{" in texts or "}" in texts) and LABEL_SLOT not in texts:
            raise ConfigError(f"model.label_descriptions {texts!r} is a template without {LABEL_SLOT} (where each "
                              f"class name goes): write e.g. 'This text is about {LABEL_SLOT}.'")
        if texts is not None and self.head_init != "descriptions":
            raise ConfigError("model.label_descriptions describes the classes for the head's zero-shot start, but "
                              "model.head_init is random: add --model.head_init descriptions (or drop "
                              "--model.label_descriptions)")
        if self.head_init == "descriptions" and self.pooling != "mean":
            raise ConfigError("model.head_init descriptions sets the weights of the mean-pooling head: add "
                              "--model.pooling mean")


SECTIONS = {"data": TextDataConfig, "model": TextModelConfig}
