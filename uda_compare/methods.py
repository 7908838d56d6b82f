"""What the sweep knows of each task (its metrics, plots and defaults) and of each method (the uda-train
options it lays over a run's config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

QUICK = {"train.max_steps": "4", "train.warmup_steps": "0", "train.eval_every": "2", "train.log_every": "2",
         "data.dev_size": "16", "data.max_test": "32", "data.max_unlabeled": "64"}


@dataclass
class TaskSpec:
    """How the sweep reads and shows one task's runs."""

    title: str
    unit: str                          # what N counts, for the plot's x label
    metrics: list[tuple[str, str]]     # (key in results.json "test", column header)
    plots: list[str]                   # metrics that get a <metric>_vs_num_labeled.png
    scale: float                       # results.json value * scale = the table's percent
    default_num_labeled: list[int]
    default_methods: list[str]
    quick: dict = field(default_factory=lambda: dict(QUICK))
    plain: dict = field(default_factory=dict)  # what finetune and ceiling add to lambda_u 0: no extra stage


_TEXT = dict(metrics=[("accuracy", "accuracy"), ("macro_f1", "macro-F1")],
             plots=["accuracy", "macro_f1"], scale=100.0, default_num_labeled=[20, 100, 1000],
             default_methods=["supervised", "uda_tfidf", "uda_bt", "ceiling"],
             plain={"model.contrastive_iterations": "none", "model.mlm_steps": "none",
                    "model.head_init": "random", "model.label_descriptions": "none"})
TASKS = {
    "imdb": TaskSpec(title="IMDB", unit="labelled reviews", **_TEXT),
    "text_classification": TaskSpec(title="Text classification", unit="labelled examples", **_TEXT),
    "squad_v2": TaskSpec(
        title="SQuAD 2.0", unit="labelled questions",
        metrics=[("exact", "EM"), ("f1", "F1"), ("HasAns_exact", "HasAns EM"), ("HasAns_f1", "HasAns F1"),
                 ("NoAns_exact", "NoAns acc"), ("best_f1", "best-threshold F1 (test)"),
                 ("HasAns_span_f1", "HasAns span F1"), ("answerability_accuracy", "answerability acc"),
                 ("answerability_auc", "answerability AUC")],
        plots=["f1", "HasAns_span_f1"], scale=1.0, default_num_labeled=[64, 256, 1024],
        default_methods=["supervised", "uda"]),
}
FAMILY = ["fixmatch", "flexmatch", "freematch", "softmatch", "adamatch"]  # --uda.method, each with its own defaults
METHODS = ["zeroshot", "finetune", "supervised", "uda", "uda_tfidf", "uda_bt", *FAMILY, "ceiling", "setfit"]  # also the table's order
# within one N
ID_SOURCES = ["supervised", "finetune", "uda", "uda_tfidf", "uda_bt", *FAMILY]  # runs whose labelled ids setfit reuses,
# preferred first
# UDA's own consistency options, which a recipe may set: a method of the FixMatch family runs with its own
# defaults instead (each run's config.yaml records them; a variant may set the family's options)
_UDA_OWN = {"uda.temperature": "none", "uda.confidence": "none", "uda.target": "none",
            "uda.distribution_alignment": "false", "uda.alignment_bank": "none", "uda.alignment_target": "labeled"}
SETFIT_QUICK = ["--num_iterations", "2"]  # --quick: a smoke test of the baseline too
SWEEP_KEYS = ("seed", "output_dir", "data.num_labeled")  # set by the sweep for each run


def method_overrides(method: str, bt_file: Optional[str], plain: Optional[dict] = None,
                     variants: Optional[dict] = None) -> dict:
    """The options a method lays over the config and the pass-through options. plain: what the
    task's plain fine-tuning adds (TaskSpec.plain); variants: NAME -> (base method, its own overrides)."""
    if variants and method in variants:
        base, own = variants[method]
        return {**method_overrides(base, bt_file, plain), **own}
    if method == "zeroshot":  # the config's start (e.g. the label-description head) with no training
        return {"uda.lambda_u": "0", "train.max_steps": "0", "train.warmup_steps": "0"}
    if method == "supervised":
        return {"uda.lambda_u": "0"}
    if method == "finetune":
        return {"uda.lambda_u": "0", "uda.tsa": "none", **(plain or {})}
    if method == "uda":
        return {}
    if method == "uda_tfidf":
        return {"augment.method": "tf_idf"}
    if method == "uda_bt":
        return {"augment.method": "precomputed", "augment.file": str(bt_file)}
    if method in FAMILY:
        return {**_UDA_OWN, "uda.method": method}
    if method == "ceiling":
        return {"uda.lambda_u": "0", "uda.tsa": "none", "data.num_labeled": "0", **(plain or {})}
    raise ValueError(f"unknown method '{method}'")


def run_name(method: str, n: Optional[int], seed: int) -> str:
    """A run's folder name: ``<method>-n<N>-seed<S>`` (``-nall-`` for every labelled example)."""
    return f"{method}-n{'all' if n is None else n}-seed{seed}"
