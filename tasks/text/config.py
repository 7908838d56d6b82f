"""Config sections of the text classification task (IMDB and any K-class text set): its data files
and columns, and how the classifier reads the encoder. They extend the generic sections, so their
flags are ``--data.text_column``, ``--model.pooling``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from uda.config import ConfigError, DataConfig, ModelConfig, option


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
    label_descriptions: Optional[list] = option(
        None, "One short text per class, in label order, that describes it (IMDB: 'This movie is terrible.', 'This "
        "movie is great.'): the classifier starts from them instead of a random head, each class's weights being "
        "the encoder's normalised mean-pooled embedding of its text (a zero-shot start), scaled to fit the "
        "labelled examples. Needs model.pooling mean. None: a random head (unless model.zero_shot_start or "
        "model.label_descriptions_file asks for descriptions from elsewhere).")
    zero_shot_start: bool = option(
        False, "Start the head from one description per class (the zero-shot start of model.label_descriptions; "
        "needs model.pooling mean), taking the first of: model.label_descriptions; model.label_descriptions_file; "
        "labels.json in the --data.path folder (a JSON object mapping each label name, or integer label as a "
        "string, to its description); model.label_template filled with each label name. Which one was used is "
        "recorded in data_info.json (label_descriptions).")
    label_descriptions_file: Optional[str] = option(
        None, "A JSON file mapping each label name (or integer label as a string) to a description of the class "
        "(the layout of labels.json); given, the head starts from it (model.label_descriptions, if also given, "
        "wins). None: with model.zero_shot_start, labels.json in the --data.path folder when there is one.")
    label_template: str = option(
        "This text is about {name}.", "With model.zero_shot_start and no description given or found: each class's "
        "description is this text with {name} replaced by its label name, lower-cased, underscores as spaces "
        "(integer labels have no names: set --data.label_names, or give descriptions).")

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
        if self.label_descriptions is not None and (
                not self.label_descriptions or not all(isinstance(t, str) and t.strip() for t in self.label_descriptions)):
            raise ConfigError(f"model.label_descriptions must be a list of non-empty texts, one per class, got "
                              f"{self.label_descriptions!r}")
        if self.label_descriptions is not None and self.pooling != "mean":
            raise ConfigError("model.label_descriptions sets the weights of the mean-pooling head: add "
                              "--model.pooling mean (or drop --model.label_descriptions)")
        if (self.zero_shot_start or self.label_descriptions_file) and self.pooling != "mean":
            raise ConfigError("model.zero_shot_start and model.label_descriptions_file set the weights of the "
                              "mean-pooling head: add --model.pooling mean")
        if "{name}" not in self.label_template:
            raise ConfigError(f"model.label_template must contain {{name}} (where the label name goes), got "
                              f"{self.label_template!r}")
        if not 0 < self.mlm_probability < 1:
            raise ConfigError(f"model.mlm_probability must be in (0, 1), got {self.mlm_probability}")


SECTIONS = {"data": TextDataConfig, "model": TextModelConfig}
