"""Bad input through the command line: each kind stops the run with a clear 'error: ...' that names
the file, row or option, exit status 2, before any training step (no metrics, no checkpoint).

Kinds tested elsewhere (test_text_data, test_config, test_train_e2e, test_checkpoint,
test_precision_guard) are not repeated here; this file adds the rest. Input that is odd but usable (a
training text also in the test set, no test file, rows without a label) goes on with a warning or note
line that says what was done; those tests check the line, and that no file of the user's changed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def _script():
    spec = importlib.util.spec_from_file_location("train_uda_cli", REPO / "scripts" / "train_uda.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _named(rows: list[dict]) -> list[dict]:
    return [{**r, "label": ["neg", "pos"][r["label"]]} for r in rows]


def _snapshot(root: Path) -> dict:
    """Every file under ``root`` and a hash of its bytes."""
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


# Each case changes a copy of the tiny data folder `d` (and may write files into `tmp`) and returns
# extra command-line options.
def _missing_test_label(d, tmp):
    _write(d / "test.jsonl", _rows(d / "test.jsonl") + [{"id": "t-nolabel", "text": "a fine film"}])


def _label_set_differs(d, tmp):
    _write(d / "train.jsonl", _named(_rows(d / "train.jsonl")))
    _write(d / "test.jsonl", _named(_rows(d / "test.jsonl")) + [{"id": "t-neutral", "text": "ok", "label": "neutral"}])


def _dev_label_out_of_range(d, tmp):
    _write(d / "dev.jsonl", _rows(d / "test.jsonl")[:10] + [{"id": "d-2", "text": "so so", "label": 2}])


def _empty_train_file(d, tmp):
    (d / "train.jsonl").write_bytes(b"")


def _header_only_csv(d, tmp):
    (d / "test.jsonl").unlink()
    (d / "test.csv").write_text("id,text,label\n", encoding="utf-8")


def _latin1_csv(d, tmp):
    (d / "test.jsonl").unlink()
    (d / "test.csv").write_bytes("id,text,label\n1,caf\xe9 film,1\n".encode("latin-1"))


def _empty_test_text(d, tmp):
    _write(d / "test.jsonl", _rows(d / "test.jsonl") + [{"id": "t-empty", "text": "   ", "label": 1}])


def _too_few_labelled(d, tmp):
    return ["--data.num_labeled", "400"]


def _no_labels_at_all(d, tmp):
    _write(d / "train.jsonl", [{**r, "label": -1} for r in _rows(d / "train.jsonl")])


def _one_class(d, tmp):
    _write(d / "train.jsonl", [{**r, "label": "pos"} for r in _rows(d / "train.jsonl")])


def _mixed_label_kinds(d, tmp):
    rows = _rows(d / "train.jsonl")
    rows[0]["label"] = "pos"
    _write(d / "train.jsonl", rows)


def _label_gap_all_labelled(d, tmp):
    _write(d / "train.jsonl", [{**r, "label": 2 * r["label"]} for r in _rows(d / "train.jsonl")])
    return ["--data.num_labeled", "0"]


def _label_far_outside(d, tmp):
    rows = _rows(d / "train.jsonl")
    rows[4]["label"] = 7
    _write(d / "train.jsonl", rows)


def _more_label_names_than_labels(d, tmp):
    return ["--data.label_names", "neg,pos,neutral", "--data.num_labeled", "0"]


def _duplicate_ids(d, tmp):
    rows = _rows(d / "train.jsonl")
    rows[9]["id"] = "train_3"
    _write(d / "train.jsonl", rows)


def _duplicate_label_names(d, tmp):
    return ["--data.label_names", "neg,neg"]


def _two_train_files(d, tmp):
    shutil.copy(d / "train.jsonl", d / "train.csv")


def _missing_augment_file(d, tmp):
    return ["--augment.method", "precomputed", "--augment.file", str(tmp / "nowhere.jsonl")]


def _augment_file_lacks_texts(d, tmp):
    _write(tmp / "copies.jsonl", [{"text": "only this one", "augmented": ["just this"]}])
    return ["--augment.method", "precomputed", "--augment.file", str(tmp / "copies.jsonl")]


def _augment_file_broken(d, tmp):
    (tmp / "copies.jsonl").write_text('{"text": "a", "augmented": ["b"]}\n{"text": oops\n', encoding="utf-8")
    return ["--augment.method", "precomputed", "--augment.file", str(tmp / "copies.jsonl")]


def _model_folder_without_config(d, tmp):
    (tmp / "not_a_model").mkdir()
    return ["--model.name_or_path", str(tmp / "not_a_model")]


def _model_folder_with_another_config(d, tmp):
    (tmp / "not_a_model").mkdir()
    (tmp / "not_a_model" / "config.json").write_text('{"text_column": "review"}\n', encoding="utf-8")
    return ["--model.name_or_path", str(tmp / "not_a_model")]


def _config_value_wrong_type_in_file(d, tmp):
    (tmp / "c.yaml").write_text("train:\n  max_steps: ten\n", encoding="utf-8")
    return ["--config", str(tmp / "c.yaml")]


def _config_section_not_a_mapping(d, tmp):
    (tmp / "c.yaml").write_text("checkpoint: 5\n", encoding="utf-8")
    return ["--config", str(tmp / "c.yaml")]


def _unknown_key_in_new_section(d, tmp):
    (tmp / "c.yaml").write_text("checkpoint:\n  every: 3\n", encoding="utf-8")
    return ["--config", str(tmp / "c.yaml")]


def _yaml_key_twice(d, tmp):
    (tmp / "c.yaml").write_text("train:\n  lr: 1.0e-5\n  max_steps: 4\n  lr: 3.0e-5\n", encoding="utf-8")
    return ["--config", str(tmp / "c.yaml")]


def _yaml_section_twice(d, tmp):
    (tmp / "c.yaml").write_text("train:\n  lr: 1.0e-5\nuda:\n  tsa: exp\ntrain:\n  max_steps: 4\n",
                                encoding="utf-8")
    return ["--config", str(tmp / "c.yaml")]


def _yaml_with_python_object(d, tmp):
    (tmp / "c.yaml").write_text(f'train: !!python/object/apply:os.system ["touch {tmp}/pwned"]\n', encoding="utf-8")
    return ["--config", str(tmp / "c.yaml")]


def _missing_data_path(d, tmp):
    return ["--data.path", str(tmp / "nowhere")]


def _option_without_value(d, tmp):
    return ["--train.lr"]


def _option_without_value_before_another(d, tmp):
    return ["--train.lr", "--train.max_steps", "4"]


def _folder_in_use(d, tmp):
    (tmp / "run").mkdir()
    (tmp / "run" / "run.lock").write_text(f"{os.getpid()} {platform.node()}\n", encoding="utf-8")


def _folder_in_use_on_another_host(d, tmp):
    (tmp / "run").mkdir()
    (tmp / "run" / "run.lock").write_text("4242 gpu-box-7\n", encoding="utf-8")


def _folder_of_another_run(d, tmp):
    (tmp / "run").mkdir()
    (tmp / "run" / "metrics.jsonl").write_text('{"step": 3, "train/loss": 0.7}\n', encoding="utf-8")


def _only_broken_checkpoints(d, tmp):
    ckpt = tmp / "run" / "checkpoints" / "step-00000002"
    (ckpt / "model").mkdir(parents=True)
    (ckpt / "meta.json").write_text('{"step": 2, "metric": 0.5}', encoding="utf-8")
    (ckpt / "model" / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{")  # cut short


def _resume_without_output_dir(d, tmp):
    return ["--checkpoint.resume", "--output_dir", "none"]


def _output_dir_is_a_file(d, tmp):
    (tmp / "run").write_text("my notes\n", encoding="utf-8")


def _output_dir_is_a_file_overwrite(d, tmp):
    (tmp / "run").write_text("my notes\n", encoding="utf-8")
    return ["--overwrite", "true"]


def _label_typos(d, tmp):
    rows = _named(_rows(d / "train.jsonl"))
    rows[0]["label"], rows[1]["label"], rows[2]["label"] = "Pos", "negg", "NEG"
    _write(d / "train.jsonl", rows)
    _write(d / "test.jsonl", _named(_rows(d / "test.jsonl")))


def _text_of_kind(value, split="train", row=2):
    def change(d, tmp):
        rows = _rows(d / f"{split}.jsonl")
        rows[row]["text"] = value
        _write(d / f"{split}.jsonl", rows)
    return change


def _parquet_int_texts(d, tmp):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _rows(d / "test.jsonl")
    (d / "test.jsonl").unlink()
    pq.write_table(pa.table({"id": [r["id"] for r in rows], "text": list(range(len(rows))),
                             "label": [r["label"] for r in rows]}), d / "test.parquet")


def _config_is_a_folder(d, tmp):
    (tmp / "configs").mkdir()
    (tmp / "configs" / "mine.yaml").write_text("train:\n  lr: 1.0e-5\n", encoding="utf-8")
    return ["--config", str(tmp / "configs")]


def _eval_batch_size_0(d, tmp):
    return ["--train.eval_batch_size", "0"]


def _negative_seed(d, tmp):
    return ["--seed", "-1"]


def _max_length_above_positions(d, tmp):
    return ["--model.max_length", "100000"]


def _empty_unlabelled_pool(d, tmp):
    return ["--data.unlabeled_from_train", "false", "--data.min_unlabeled_chars", "100000"]


CASES = {
    "an empty unlabelled pool": (_empty_unlabelled_pool, r"the unlabelled pool is empty \(no unsup.\* file, and no "
                                 r"training-pool text left .*--uda.lambda_u 0"),
    "max length above the model's positions": (_max_length_above_positions, r"--model.max_length 100000 is more "
                                               r"than model '.*' has positions for \(\d+, max_position_embeddings "
                                               r"in its config.json\); use --model.max_length \d+ or less"),
    "eval batch size 0": (_eval_batch_size_0, r"train.eval_batch_size must be >= 1, got 0"),
    "a negative seed": (_negative_seed, r"seed must be >= 0 \(numpy's generators take no negative seed\), got -1"),
    "missing label in the test split": (_missing_test_label, r"test data '.*test.jsonl', row 61 \(id 't-nolabel'\): "
                                        r"missing label \(or -1\); every example of this split needs a label"),
    "label set differs between splits": (_label_set_differs, r"row 61 \(id 't-neutral'\): unknown label 'neutral'; "
                                         r"expected one of \['neg', 'pos'\] \(label set from sorted names in train\): "
                                         r"the splits' label sets differ"),
    "dev label out of range": (_dev_label_out_of_range, r"dev data '.*dev.jsonl', row 11 \(id 'd-2'\): label 2 is out "
                               r"of range for 2 classes"),
    "empty training file": (_empty_train_file, r"data file '.*train.jsonl' is empty \(no rows\)"),
    "CSV with a header and no rows": (_header_only_csv, r"data file '.*test.csv' is empty \(no rows\)"),
    "non-UTF-8 CSV": (_latin1_csv, r"data file '.*test.csv' is not valid UTF-8 \(line 2, byte 19"),
    "empty text in the test split": (_empty_test_text, r"row 61 \(id 't-empty'\): empty text in labelled data"),
    "fewer labelled examples than asked": (_too_few_labelled, r"training pool '.*train.jsonl' has only 100 labelled "
                                           r"examples of class '0' but data.num_labeled=400 asks for 200 per class"),
    "no labelled rows": (_no_labels_at_all, r"data file '.*train.jsonl' has no labelled rows"),
    "a single class": (_one_class, r"only one class \['pos'\] in '.*train.jsonl'; classification needs at least 2"),
    "integer labels mixed with names": (_mixed_label_kinds, r"data file '.*train.jsonl' mixes integer labels and "
                                        r"label names"),
    "a class with no example, all labelled examples": (_label_gap_all_labelled, r"data file '.*train.jsonl': "
                                                       r"integer labels must be 0..K-1 with every class present, "
                                                       r"but no row has label 1 while row 2 \(id 'train_1'\) has "
                                                       r"label 2; renumber the labels, or use class names"),
    "a label far outside the classes": (_label_far_outside, r"no row has label 2, 3, 4, 5, 6 while row 5 \(id "
                                        r"'train_4'\) has label 7"),
    "more label names than labels": (_more_label_names_than_labels, r"--data.label_names \['neg', 'pos', "
                                     r"'neutral'\] names 3 classes, but the training pool '.*train.jsonl' has no "
                                     r"labelled example of \['neutral'\]; give only the classes the data has"),
    "duplicate ids in a data file": (_duplicate_ids, r"train data '.*train.jsonl', row 10 \(id 'train_3'\): the "
                                     r"id 'train_3' is also the id of row 4; ids must be unique .*: fix the ids, or "
                                     r"set --data.id_column none to number the rows"),
    "duplicate label names": (_duplicate_label_names, r"--data.label_names \['neg', 'neg'\] has duplicates"),
    "two training files in the folder": (_two_train_files, r"folder '.*' has several train files \(train.csv, "
                                         r"train.jsonl\); keep one or pass --data.train_file"),
    "augmentation file missing": (_missing_augment_file, r"--augment.file '.*nowhere.jsonl' does not exist"),
    "augmentation file lacks texts": (_augment_file_lacks_texts, r"--augment.file '.*copies.jsonl' has no augmented "
                                      r"copy for \d+ of the \d+ unlabelled texts \(the first: id '"),
    "augmentation file broken": (_augment_file_broken, r"--augment.file '.*copies.jsonl': .*line 2: invalid json"),
    "model folder without config.json": (_model_folder_without_config, r"model folder '.*not_a_model' has no "
                                         r"config.json"),
    "model folder whose config.json is no model's": (_model_folder_with_another_config, r"model folder "
                                                     r"'.*not_a_model': its config.json is not a model config "
                                                     r"that transformers can read \(Unrecognized model in the "
                                                     r"folder. Should have a `model_type` key in its "
                                                     r"config.json\); give a folder written by save_pretrained"),
    "config value of the wrong type in a file": (_config_value_wrong_type_in_file, r"config key 'train.max_steps' "
                                                 r"must be an integer, got 'ten' \(in .*c.yaml\)"),
    "config section that is not a mapping": (_config_section_not_a_mapping, r"config key 'checkpoint' in .*c.yaml "
                                             r"must be a mapping of its sub-keys"),
    "unknown config key": (_unknown_key_in_new_section, r"unknown config key 'checkpoint.every' in .*c.yaml \(did you "
                           r"mean checkpoint.every_steps\?\)"),
    "a key twice in a config file": (_yaml_key_twice, r"config file '.*c.yaml', line 4: key 'lr' is given twice in "
                                     r"one mapping \(first on line 2\), and only the last would count; keep one of "
                                     r"them"),
    "a section twice in a config file": (_yaml_section_twice, r"config file '.*c.yaml', line 5: key 'train' is given "
                                         r"twice in one mapping \(first on line 1\)"),
    "YAML that would run code": (_yaml_with_python_object, r"config file '.*c.yaml' is not valid YAML: could not "
                                 r"determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply"),
    "missing data path": (_missing_data_path, r"data path '.*nowhere' \(from --data.path or UDA_DATA_PATH\) does "
                          r"not exist; pass --data.path /path/to/data: a folder with train and test files \(and "
                          r"optionally dev and unsup ones\), a single data file, or an aclImdb folder"),
    "an option without its value, last": (_option_without_value, r"option '--train.lr' needs a value \(float\), "
                                          r"e.g. --train.lr 2e-05"),
    "an option without its value, before another": (_option_without_value_before_another, r"option '--train.lr' "
                                                    r"needs a value"),
    "output folder in use by a running process": (_folder_in_use, r"output folder '.*run' is in use by a running "
                                                  r"process \(\d+, lock file '.*run/run.lock'\); wait for that run "
                                                  r"to end, or choose another --output_dir"),
    "output folder in use on another host": (_folder_in_use_on_another_host, r"output folder '.*run' is in use by "
                                             r"process 4242 on host 'gpu-box-7' \(lock file '.*run.lock'\); wait "
                                             r"for that run to end or choose another --output_dir. If no run is "
                                             r"using the folder, delete the lock file"),
    "output folder of another run": (_folder_of_another_run, r"output folder '.*run' holds another run's files "
                                     r"\(metrics.jsonl\) and no checkpoint to resume from"),
    "checkpoints that cannot be loaded": (_only_broken_checkpoints, r"output folder '.*run' holds checkpoints, but "
                                          r"none can be loaded \(the newest, '.*step-00000002': model/"
                                          r"model.safetensors: .*\); choose a new --output_dir, or pass --overwrite "
                                          r"true to start over"),
    "resume without a run folder": (_resume_without_output_dir, r"--checkpoint.resume needs --output_dir"),
    "output folder that is a file": (_output_dir_is_a_file, r"--output_dir '.*run' is a file, not a folder; "
                                     r"choose a new --output_dir"),
    "output folder that is a file, with --overwrite": (_output_dir_is_a_file_overwrite, r"--output_dir '.*run' is "
                                                       r"a file, not a folder"),
    "label typos: classes of one example": (_label_typos, r"the training pool '.*train.jsonl' has fewer than 2 "
                                            r"labelled examples of the class\(es\) 'NEG' \(1 example: row 3, id "
                                            r"'train_2'\), 'Pos' \(1 example: row 1, id 'train_0'\), 'negg' \(1 "
                                            r"example: row 2, id 'train_1'\) \(label set from sorted names in train: "
                                            r"\['NEG', 'Pos', 'neg', 'negg', 'pos'\]\); near-duplicate class names, "
                                            r"a typo in the labels\? 'NEG' ~ 'neg', 'Pos' ~ 'pos', 'negg' ~ 'neg'\. "
                                            r"A class needs at least 2 labelled examples: fix the labels, or remove "
                                            r"those rows$"),
    "a number as a text": (_text_of_kind(12345), r"data file '.*train.jsonl', row 3 \(id 'train_2'\): the text "
                           r"\(column 'text'\) is a number \(12345\), not a string; write it as a string \(in JSON, "
                           r"in quotes; in parquet, a string column\) or remove the row$"),
    "a list as a text": (_text_of_kind(["a", "fine", "film"]), r"data file '.*train.jsonl', row 3 \(id 'train_2'\): "
                         r"the text \(column 'text'\) is a list \(\['a', 'fine', 'film'\]\), not a string"),
    "an object as a text": (_text_of_kind({"body": "a fine film"}), r"row 3 \(id 'train_2'\): the text \(column "
                            r"'text'\) is an object \(\{'body': 'a fine film'\}\), not a string"),
    "a boolean as a test text": (_text_of_kind(True, "test", 6), r"data file '.*test.jsonl', row 7 \(id "
                                 r"'test_6'\): the text \(column 'text'\) is a boolean \(true\), not a string"),
    "a number as an unlabelled text": (_text_of_kind(7, "unsup", 0), r"data file '.*unsup.jsonl', row 1 \(id "
                                       r"'unsup_0'\): the text \(column 'text'\) is a number \(7\), not a string"),
    "an integer parquet text column": (_parquet_int_texts, r"data file '.*test.parquet', row 1 \(id 'test_0'\): "
                                       r"the text \(column 'text'\) is a number \(0\), not a string"),
    "--config naming a folder": (_config_is_a_folder, r"--config '.*configs' is a folder; it needs a config file "
                                 r"\(YAML\), such as .*configs/mine.yaml \(the folder holds mine.yaml\)$"),
}


def _train_stops(kind, pattern, extra, model, data, tmp_path, capsys, before):
    """uda-train on ``data`` with the ``extra`` options must end with the ``error:`` line ``pattern`` and exit
    status 2, having trained nothing and changed no file of ``before``."""
    from accelerate.state import AcceleratorState

    out = tmp_path / "run"
    args = ["--task", "text_classification", "--model.name_or_path", str(model), "--data.path", str(data),
            "--data.num_labeled", "20", "--data.dev_size", "40", "--model.max_length", "32",
            "--data.min_unlabeled_chars", "10", "--train.max_steps", "4", "--train.warmup_steps", "0",
            "--train.batch_size", "4", "--output_dir", str(out), "--report_to", "none", *extra]
    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        code = _script().main(args)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    message = next(line for line in err.splitlines() if line.startswith("error: "))
    assert __import__("re").search(pattern, message), message
    assert kind == "checkpoints that cannot be loaded" or not (out / "checkpoints").exists()  # nothing trained
    assert not (tmp_path / "pwned").exists()  # configs are read with yaml.safe_load
    assert kind == "output folder of another run" or not (out / "metrics.jsonl").exists()
    assert "in use" in kind or not (out / "run.lock").exists()  # the lock is released
    after = _snapshot(tmp_path)
    assert {p: h for p, h in after.items() if p in before} == before  # nothing the user wrote removed or changed
    print(f"\n[{kind}] {message[:230]}")


@pytest.mark.parametrize("kind", list(CASES))
def test_bad_input_stops_before_training(kind, tiny_model_dir, tiny_text_data, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("UDA_DATA_PATH", raising=False)
    change, pattern = CASES[kind]
    data = tmp_path / "data"
    shutil.copytree(tiny_text_data, data)
    extra = change(data, tmp_path) or []
    _train_stops(kind, pattern, extra, tiny_model_dir, data, tmp_path, capsys, _snapshot(tmp_path))


# Model folders that hold a model but not its tokenizer: each case makes one in `tmp` from the tiny model.
def _weights_only(model, tmp):
    folder = tmp / "no_tokenizer"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(model / name, folder / name)
    return folder


def _tokenizer_of_five_tokens(model, tmp):
    from transformers import BertTokenizerFast

    folder = tmp / "small_vocab"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(model / name, folder / name)
    BertTokenizerFast().save_pretrained(folder)  # no vocabulary: its 5 special tokens only
    return folder


MODEL_CASES = {
    "model folder without tokenizer files": (_weights_only, r"model folder '.*no_tokenizer' has no tokenizer files "
                                             r"\(none of tokenizer.json, tokenizer_config.json, vocab.txt, "
                                             r"vocab.json, ...; it holds \['config.json', 'model.safetensors'\]\): "
                                             r"its tokenizer would know only its special tokens and read every word "
                                             r"as \[UNK\]. To train this model, save the model's tokenizer into it "
                                             r"\(tokenizer.save_pretrained\('.*no_tokenizer'\)\), or copy the "
                                             r"tokenizer files of the model it was trained from"),
    "tokenizer far smaller than the model's vocabulary": (_tokenizer_of_five_tokens, r"model folder "
                                                          r"'.*small_vocab': its tokenizer has 5 tokens, but the "
                                                          r"model's config.json has vocab_size \d+: the tokenizer's "
                                                          r"vocabulary is missing or another model's \(tokenizer "
                                                          r"files found: tokenizer.json.*\). To train this model, "
                                                          r"save the model's tokenizer into it"),
}


@pytest.mark.parametrize("kind", list(MODEL_CASES))
def test_bad_input_model_without_its_tokenizer_stops(kind, tiny_model_dir, tiny_text_data, tmp_path, capsys,
                                                      monkeypatch):
    monkeypatch.delenv("UDA_DATA_PATH", raising=False)
    make, pattern = MODEL_CASES[kind]
    data = tmp_path / "data"
    shutil.copytree(tiny_text_data, data)
    model = make(tiny_model_dir, tmp_path)
    _train_stops(kind, pattern, [], model, data, tmp_path, capsys, _snapshot(tmp_path))


def test_bad_input_every_task_checks_its_tokenizer(tiny_model_dir, tmp_path):
    """The text, QA, QA-start and passages tasks load their tokenizer through the one checked loader, and
    the tiny model's own tokenizer passes the check."""
    from uda.hub import load_tokenizer
    from uda.config import ConfigError

    assert len(load_tokenizer(str(tiny_model_dir))) > 50
    with pytest.raises(ConfigError, match="has no tokenizer files"):
        load_tokenizer(str(_weights_only(tiny_model_dir, tmp_path)))
    for f in ("tasks/text/task.py", "tasks/qa/task.py", "tasks/qa/start_task.py", "tasks/passages/task.py"):
        source = (REPO / f).read_text(encoding="utf-8")
        assert "load_tokenizer(self.model_path" in source and "AutoTokenizer.from_pretrained" not in source, f


# ----------------------------------------------------------------------------- warnings: the run goes on

def _load(data, capsys, **options):
    """load_text_classification with the CLI tests' options; (its result, what it printed)."""
    from tasks.text.config import TextDataConfig
    from tasks.text.data import load_text_classification

    cfg = TextDataConfig(**{"path": str(data), "num_labeled": 20, "dev_size": 40, "min_unlabeled_chars": 10,
                            **options})
    capsys.readouterr()
    d = load_text_classification(cfg, seed=0)
    shown = capsys.readouterr()
    return d, shown.out + shown.err


def test_bad_input_labelled_texts_also_in_the_test_set_are_counted(tiny_text_data, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(tiny_text_data, data)
    train, test = _rows(data / "train.jsonl"), _rows(data / "test.jsonl")
    for i in range(5):  # five training texts that are test texts, with the test's label
        train[i].update(text=test[i]["text"], label=test[i]["label"])
    _write(data / "train.jsonl", train)
    before = _snapshot(tmp_path)
    d, shown = _load(data, capsys)
    line = next(x for x in shown.splitlines() if "also in the test set" in x)
    assert __import__("re").fullmatch(
        rf"warning: 5 of the 200 labelled examples of the training pool '{data / 'train.jsonl'}' have a text that "
        rf"is also in the test set '{data / 'test.jsonl'}' \(\d of the 20 trained on, \d of the 40 dev examples\): "
        r"test scores count them as unseen texts. Remove them from one of the files if the test set must be held "
        r"out", line), line
    assert d.info["counts"]["train_pool_labeled_in_test"] == 5
    assert not {r["text"] for r in test} & set(d.unlabeled.texts())  # still kept out of the unlabelled pool
    assert _snapshot(tmp_path) == before
    print(f"\n[labelled texts in test] {line}")


def test_bad_input_single_file_without_test_set_warns(tiny_text_data, tmp_path, capsys):
    reviews = tmp_path / "reviews.jsonl"
    shutil.copy(tiny_text_data / "train.jsonl", reviews)
    before = _snapshot(tmp_path)
    d, shown = _load(reviews, capsys)
    line = next(x for x in shown.splitlines() if x.startswith("warning: no test set"))
    assert line == (f"warning: no test set was found (--data.path '{reviews}' is a single file, read as the "
                    f"training pool): the run goes on, and its results have no test scores. To evaluate on a test "
                    f"set, pass --data.test_file FILE, or give --data.path a folder holding the train file and a "
                    f"test file (test.jsonl, test.csv, test.tsv, test.json or test.parquet, optionally gzipped)")
    assert d.test == [] and len(d.train) == 20
    assert _snapshot(tmp_path) == before
    _, with_test = _load(reviews, capsys, test_file=str(tiny_text_data / "test.jsonl"))
    assert "no test set" not in with_test
    print(f"\n[no test set] {line}")


def test_bad_input_rows_without_a_label_join_the_unlabelled_pool(tiny_text_data, tmp_path, capsys):
    """A training-pool row whose label is null, empty or -1 is an unlabelled text: it joins the unlabelled
    pool (with the unlabelled file's checks); one line says how many, and data_info counts the skipped."""
    data = tmp_path / "data"
    shutil.copytree(tiny_text_data, data)
    extra = [{"id": "null_0", "text": "an unlabelled review of a film", "label": None},
             {"id": "null_1", "text": "another unlabelled review", "label": None},
             {"id": "empty_label", "text": "a third one, label empty", "label": ""},
             {"id": "minus_one", "text": "and one labelled -1", "label": -1},
             {"id": "short", "text": "so so", "label": None},
             {"id": "blank", "text": "   ", "label": None}]
    _write(data / "train.jsonl", _rows(data / "train.jsonl") + extra)
    before = _snapshot(tmp_path)
    d, shown = _load(data, capsys)
    line = next(x for x in shown.splitlines() if "have no label" in x)
    assert line == (f"note: 6 rows of the training pool '{data / 'train.jsonl'}' have no label (null, empty or -1): "
                    f"they are read as unlabelled texts and join the unlabelled pool (4 did; 2 were skipped: empty, "
                    f"shorter than --data.min_unlabeled_chars 10, or also a dev or test text)")
    counts = d.info["counts"]
    assert counts["train_pool"] == 206 and counts["train_pool_unlabeled_rows"] == 6
    assert counts["unlabeled_from_train_unlabeled_rows"] == 4
    assert counts["unlabeled_skipped_empty"] == 1 and counts["unlabeled_skipped_short"] == 1
    ids = {u["id"] for u in d.unlabeled}
    assert {"null_0", "null_1", "empty_label", "minus_one"} <= ids and not {"short", "blank"} & ids
    assert _snapshot(tmp_path) == before
    print(f"\n[rows without a label] {line}")


def test_remote_code_is_off_unless_asked():
    from uda.config import Config, build_config

    assert Config().model.trust_remote_code is False
    assert build_config("imdb").model.trust_remote_code is False
    assert build_config("text_classification").model.trust_remote_code is False


# ----------------------------------------------------------------------------- uda-augment
# Each case returns the command's options (an input file `inp` is ready in `tmp`); the augmenter must
# never start.

def _augment_output_is_a_folder(tmp, inp):
    (tmp / "out").mkdir()
    return ["--input", str(inp), "--output", str(tmp / "out")]


def _augment_output_dir_is_a_file(tmp, inp):
    (tmp / "out").write_text("my notes\n", encoding="utf-8")
    return ["--input", str(inp), "--output_dir", str(tmp / "out")]


def _augment_output_under_a_file(tmp, inp):
    (tmp / "out").write_text("my notes\n", encoding="utf-8")
    return ["--input", str(inp), "--output", str(tmp / "out" / "aug.jsonl.gz")]


def _augment_missing_input(tmp, inp):
    return ["--input", str(tmp / "missing.jsonl")]


def _augment_missing_text_column(tmp, inp):
    return ["--input", str(inp), "--text_column", "body"]


def _augment_missing_data_path(tmp, inp):
    return ["--task", "text_classification", "--data_path", str(tmp / "nowhere")]


def _augment_pool_output_is_a_folder(tmp, inp):
    (tmp / "out").mkdir()
    return ["--task", "text_classification", "--data_path", str(tmp / "nowhere"), "--output", str(tmp / "out")]


def _augment_row_without_text(tmp, inp):
    rows = _rows(inp)
    rows[2] = {"id": "2", "body": "a fine film number 2"}
    _write(inp, rows)
    return ["--input", str(inp)]


def _augment_text_not_a_string(tmp, inp):
    rows = _rows(inp)
    rows[1]["text"] = 12345
    _write(inp, rows)
    return ["--input", str(inp)]


AUGMENT_CASES = {
    "--output naming a folder": (_augment_output_is_a_folder, r"--output '.*out' is a folder; name a file, such as "
                                 r"--output .*out/augmented.jsonl.gz, or pass the folder as --output_dir"),
    "--output_dir naming a file": (_augment_output_dir_is_a_file, r"--output_dir '.*out' is a file, not a folder; "
                                   r"choose another --output_dir or name the output with --output"),
    "--output naming a folder, before a pool is read": (_augment_pool_output_is_a_folder, r"--output '.*out' is "
                                                        r"a folder"),
    "missing --input": (_augment_missing_input, r"data file '.*missing.jsonl' does not exist; check --input$"),
    "missing text column": (_augment_missing_text_column, r"data file '.*in.jsonl' has no text column 'body' "
                            r"\(columns: \['id', 'text'\]\); set --text_column to the right one"),
    "missing --data_path": (_augment_missing_data_path, r"--data_path '.*nowhere' does not exist; give the task's "
                            r"data folder or file"),
    "--output inside a file": (_augment_output_under_a_file, r"--output '.*out/aug.jsonl.gz': '.*out' is a file, "
                               r"not a folder"),
    "a row without the text column": (_augment_row_without_text, r"data file '.*in.jsonl', row 3 \(id '2'\): no "
                                      r"text column 'text' \(the row has \['id', 'body'\]\); add its text or "
                                      r"remove the row, or pass --on_bad_line skip to skip such rows \(the report "
                                      r"lists them\)$"),
    "a text that is not a string": (_augment_text_not_a_string, r"data file '.*in.jsonl', row 2 \(id '1'\): the "
                                    r"text \(column 'text'\) is a number \(12345\), not a string; write it as a "
                                    r"string .* or remove the row, or pass --on_bad_line skip"),
}


@pytest.mark.parametrize("kind", list(AUGMENT_CASES))
def test_bad_input_stops_uda_augment_before_work(kind, tmp_path, capsys, monkeypatch):
    from augment import pipeline
    from tasks.cli import augment_main

    def no_work(*a, **k):
        raise AssertionError("the augmentation started")

    monkeypatch.setattr(pipeline._Run, "run", no_work)
    inp = tmp_path / "in.jsonl"
    _write(inp, [{"id": str(i), "text": f"a fine film number {i}"} for i in range(5)])
    change, pattern = AUGMENT_CASES[kind]
    args = change(tmp_path, inp) + ["--method", "swap", "--cache_dir", str(tmp_path / "cache"), "--no_progress"]
    before = _snapshot(tmp_path)
    code = augment_main(args)
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    message = next(line for line in err.splitlines() if line.startswith("error: "))
    assert __import__("re").search(pattern, message), message
    assert _snapshot(tmp_path) == before  # nothing written, nothing removed
    print(f"\n[{kind}] {message[:230]}")


def test_bad_input_uda_augment_limit_0_names_the_option(tmp_path, capsys):
    from tasks.cli import augment_main

    inp = tmp_path / "in.jsonl"
    _write(inp, [{"id": str(i), "text": f"a fine film number {i}"} for i in range(5)])
    before = _snapshot(tmp_path)
    for option, value in (("--limit", "0"), ("--limit", "-3"), ("--copies", "0")):
        with pytest.raises(SystemExit) as e:
            augment_main(["--input", str(inp), "--method", "swap", "--cache_dir", str(tmp_path / "cache"),
                          "--no_progress", option, value])
        assert e.value.code == 2
        message = capsys.readouterr().err.strip().splitlines()[-1]
        assert message.endswith(f"error: argument {option}: must be at least 1, got {int(value)}" + (
            " (the number of rows to augment); leave --limit out to augment every row" if option == "--limit"
            else "")), message
    assert _snapshot(tmp_path) == before
    print(f"\n[--limit 0] {message}")


def test_bad_input_uda_augment_skips_rows_without_text_only_when_asked(tmp_path, capsys):
    """With --on_bad_line skip, rows without the text column or with a text that is not a string are
    skipped and listed in the report; the others are augmented."""
    from tasks.cli import augment_main

    inp, out = tmp_path / "in.jsonl", tmp_path / "aug.jsonl.gz"
    rows = [{"id": str(i), "text": f"a fine film number {i}"} for i in range(5)]
    rows[2], rows[3]["text"] = {"id": "2", "body": "no text here"}, 12345
    _write(inp, rows)
    before = _snapshot(tmp_path)
    assert augment_main(["--input", str(inp), "--output", str(out), "--method", "swap", "--on_bad_line", "skip",
                         "--cache_dir", str(tmp_path / "cache"), "--no_progress"]) == 0, capsys.readouterr().err
    from augment.pipeline import report_path_for

    report = json.loads(report_path_for(out).read_text(encoding="utf-8"))
    assert report["rows_written"] == 3 and report["skip_reasons"] == {"missing text column": 1,
                                                                      "text not a string": 1}, report
    assert {p: h for p, h in _snapshot(tmp_path).items() if p in before} == before


def test_bad_input_stale_run_lock_is_taken_over_and_released(tmp_path, capsys):
    """A lock left by a process that no longer runs (killed with SIGKILL) is taken over with a warning;
    the folder is the run's while it runs and free after it."""
    from uda.rundir import LOCK_FILE, run_lock

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).write_text(f"{dead.stdout.strip()} {platform.node()}\n", encoding="utf-8")
    with run_lock(run):
        assert (run / LOCK_FILE).read_text().split()[0] == str(os.getpid())
    shown = capsys.readouterr()
    assert f"warning: output folder '{run}' was locked by process {dead.stdout.strip()}, which is no longer " \
           f"running; taking its lock over" in shown.out + shown.err
    assert not (run / LOCK_FILE).exists() and run.is_dir()
    with run_lock(tmp_path / "new" / "run"):  # a folder made for the lock and left empty is removed after it
        assert (tmp_path / "new" / "run" / LOCK_FILE).is_file()
    assert not (tmp_path / "new" / "run").exists()


def test_bad_input_resume_after_the_data_changed(tiny_model_dir, tiny_text_data, tmp_path, capsys, one_thread):
    """A run whose data files changed since it started is not continued on the new data unless asked."""
    from tests.test_resume import Interrupted, InterruptedTask
    from tests.trainkit import run, tiny_config
    from uda import checkpoint
    from uda.data import DataError

    data, out = tmp_path / "data", tmp_path / "run"
    shutil.copytree(tiny_text_data, data)
    options = {"train.max_steps": 4, "train.warmup_steps": 0, "checkpoint.every_steps": 2, "train.eval_every": 4}
    with pytest.raises(Interrupted):  # killed in step 3: the latest checkpoint is step 2
        run(tiny_config(tiny_model_dir, data, out, **options), InterruptedTask(at=3))
    assert checkpoint.latest(out / "checkpoints").step == 2
    rows = _rows(data / "train.jsonl")
    _write(data / "train.jsonl", rows[:150])  # the training file was cut meanwhile
    before = _snapshot(out)
    with pytest.raises(DataError) as e:
        run(tiny_config(tiny_model_dir, data, out, **options))
    print(f"\n[data changed] error: {e.value}")
    assert __import__("re").fullmatch(
        rf"the data changed since the run in '{out}' started: '{data / 'train.jsonl'}' \(size \d+ -> \d+ bytes\); "
        r"the ids in labeled_ids.txt \(the examples chosen\); the ids in dev_ids.txt \(the examples chosen\)\. Its "
        r"checkpoints were trained on the old data: restore it, start a new run \(another --output_dir, or "
        r"--overwrite true\), or pass --checkpoint.allow_data_change true to continue on the new data", str(e.value))
    assert {p: h for p, h in _snapshot(out).items() if p in before and p.name != "run.lock"} == \
        {p: h for p, h in before.items() if p.name != "run.lock"}  # nothing changed in the run folder
    capsys.readouterr()
    results = run(tiny_config(tiny_model_dir, data, out, **options, **{"checkpoint.allow_data_change": "true"}))
    assert results["resumed_at_steps"] == [2]
    shown = capsys.readouterr()
    assert "warning: the data changed since the run in" in shown.out + shown.err
    assert "continuing on the new data (--checkpoint.allow_data_change)" in shown.out + shown.err


def test_bad_input_truncated_newest_checkpoint_falls_back(tiny_model_dir, tiny_text_data, tmp_path, capsys,
                                                          one_thread):
    """A newest checkpoint whose weights were cut short (a full disk, a stopped copy) is set aside with a
    warning naming it and the checkpoint the run continues from instead."""
    from tests.test_resume import Interrupted, InterruptedTask
    from tests.trainkit import run, tiny_config
    from uda import checkpoint

    out = tmp_path / "run"
    options = {"train.max_steps": 6, "train.warmup_steps": 0, "train.eval_every": 2, "checkpoint.keep_top_k": 3}
    with pytest.raises(Interrupted):  # killed in step 5: checkpoints at steps 2 and 4
        run(tiny_config(tiny_model_dir, tiny_text_data, out, **options), InterruptedTask(at=5))
    newest, good = out / "checkpoints" / "step-00000004", out / "checkpoints" / "step-00000002"
    weights = newest / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    assert checkpoint.problem(newest).startswith("model/model.safetensors: ")
    capsys.readouterr()
    results = run(tiny_config(tiny_model_dir, tiny_text_data, out, **options))
    assert results["resumed_at_steps"] == [2]
    shown = capsys.readouterr()
    message = next(line for line in (shown.out + shown.err).splitlines() if line.startswith("warning: the newer"))
    assert message.startswith(f"warning: the newer checkpoint '{newest}' cannot be loaded (model/model.safetensors: ")
    assert message.endswith(f"resuming from the newest good one, '{good}', instead (the broken one is kept as "
                            f"'{out / 'checkpoints' / '.broken-step-00000004'}')")
    assert (out / "checkpoints" / ".broken-step-00000004" / "model" / "model.safetensors").stat().st_size == 1000
    assert checkpoint.problem(checkpoint.latest(out / "checkpoints").path) is None  # the step-4 save of this run
    print(f"\n[truncated checkpoint] {message}")


def test_bad_input_temporary_files_of_a_killed_uda_augment_are_removed(tmp_path, capsys):
    """A uda-augment killed while writing leaves hidden temporary files (of its output, of a cache unit);
    the next run removes them, and leaves alone those of writers still running or on another host."""
    from tasks.cli import augment_main
    from uda.io import _HOST

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    inp, out, cache = tmp_path / "in.jsonl", tmp_path / "aug.jsonl.gz", tmp_path / "cache"
    _write(inp, [{"id": str(i), "text": f"a fine film number {i}"} for i in range(5)])
    stale = tmp_path / f".aug.jsonl.gz.{_HOST}@{dead}.k2j4h1x_.tmp"
    running = tmp_path / f".aug.jsonl.gz.{_HOST}@{os.getppid()}.a8bc0d1e.tmp"
    elsewhere = tmp_path / f".aug.jsonl.gz.gpu-box-7@{dead}.a8bc0d1e.tmp"
    for p in (stale, running, elsewhere):
        p.write_bytes(b"half a file")
    args = ["--input", str(inp), "--output", str(out), "--method", "swap", "--cache_dir", str(cache), "--no_progress"]
    assert augment_main(args) == 0
    unit = next(p for p in cache.rglob("*.arrow"))
    stale_unit = unit.parent / f".{unit.name}.{_HOST}@{dead}.zz9x8y7w.tmp"
    stale_unit.write_bytes(b"half a unit")
    assert augment_main(args) == 0, capsys.readouterr().err
    assert out.is_file() and not stale.exists() and not stale_unit.exists()
    assert running.exists() and elsewhere.exists()


def test_bad_input_kill_during_pool_caching_leaves_nothing_behind(tmp_path, monkeypatch):
    """A run killed while converting a data file to its Arrow cache leaves a hidden temporary file and no
    table; the next run converts the file again (whole) and removes the dead writer's temporary file."""
    import pyarrow as pa

    from uda.arrow_cache import cached_table
    from uda.io import _HOST

    monkeypatch.setenv("UDA_CACHE", str(tmp_path / "cache"))
    schema = pa.schema([("text", pa.string())])
    rows = [{"text": f"review {i}"} for i in range(10)]
    table = cached_table("pool", {"file": "x"}, lambda: iter(rows), schema)
    path = next((tmp_path / "cache").rglob("pool-*.arrow"))
    del table
    path.unlink()  # as if the run had been killed before its rename
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    stale = path.parent / f".{path.name}.{_HOST}@{dead}.q1w2e3r4.tmp"
    stale.write_bytes(b"half a table")
    again = cached_table("pool", {"file": "x"}, lambda: iter(rows), schema)
    assert again["text"] == [r["text"] for r in rows]
    assert path.is_file() and not stale.exists()


@pytest.mark.parametrize("script", ["train_uda.py", "uda_augment.py"])
def test_bad_input_help_into_a_closed_pipe_exits_quietly(script, tmp_path):
    """`uda-train --help | head -5`: the reader is gone before the help is written; no traceback."""
    import subprocess
    import sys

    from tests.conftest import REPO

    cmd = f"'{sys.executable}' '{REPO / 'scripts' / script}' --help | true"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


def test_bad_input_two_uda_augment_runs_into_one_output(tmp_path, capsys):
    """A second identical uda-augment into the same output while the first runs is refused before it
    writes (it would redo the whole work beside the first); a lock left by a dead process is taken over."""
    import os
    import platform
    import subprocess
    import sys

    from tasks.cli import augment_main

    inp, out = tmp_path / "in.jsonl", tmp_path / "aug.jsonl.gz"
    _write(inp, [{"id": str(i), "text": f"a fine film number {i}"} for i in range(5)])
    lock = tmp_path / "aug.jsonl.gz.lock"
    lock.write_text(f"{os.getpid()} {platform.node()}\n")  # a running process holds it (this one)
    before = _snapshot(tmp_path)
    args = ["--input", str(inp), "--method", "swap", "--cache_dir", str(tmp_path / "cache"), "--no_progress",
            "--output", str(out)]
    assert augment_main(args) == 2
    err = capsys.readouterr().err
    assert f"output '{out}' is in use by a running process ({os.getpid()}" in err and "choose another --output" in err
    assert _snapshot(tmp_path) == before and not out.exists()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock.write_text(f"{dead.stdout.strip()} {platform.node()}\n")
    assert augment_main(args) == 0 and out.is_file() and not lock.exists()
    assert "was locked by process" in "".join(capsys.readouterr())


def test_bad_input_output_folder_below_a_file(tiny_model_dir, tiny_text_data, tmp_path, capsys):
    """--output_dir through a file: a clear error and status 2, not a NotADirectoryError traceback."""
    blocker = tmp_path / "afile"
    blocker.write_text("mine\n")
    before = _snapshot(tmp_path)
    code = _script().main(["--task", "text_classification", "--model.name_or_path", str(tiny_model_dir),
                           "--data.path", str(tiny_text_data), "--output_dir", str(blocker / "run"),
                           "--report_to", "none"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert f"error: cannot write '{blocker / 'run'}' (Not a directory): a part of that path is a file" in err
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_bad_input_start_model_with_another_number_of_labels(pooling, tiny_model_dir, tmp_path, capsys):
    """A start model whose classifier has 3 classes on 2-class data: a fresh head with a warning, not
    transformers' size-mismatch error."""
    from tasks.text.model import build_text_classifier

    three = tmp_path / "three"
    build_text_classifier(str(tiny_model_dir), ["a", "b", "c"], pooling=pooling).save_pretrained(three)
    before = _snapshot(tmp_path)
    model = build_text_classifier(str(three), ["neg", "pos"], pooling=pooling)
    import torch

    assert [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1].out_features == 2
    assert "has a classifier of 3 classes and this data has 2: its encoder is kept" in capsys.readouterr().out
    assert _snapshot(tmp_path) == before


def test_bad_input_disk_full_while_saving_a_checkpoint(tiny_model_dir, tiny_text_data, tmp_path, capsys,
                                                       monkeypatch):
    """torch.save on a full disk fails in its C++ stream ("basic_ios::clear"): a clear error, status 2, the
    half-written checkpoint removed and the earlier ones kept, so that the same command continues."""
    import collections
    import shutil

    import torch

    real_save, calls = torch.save, []

    def save(obj, f, *a, **k):
        calls.append(f)
        if len(calls) == 2:  # the second checkpoint: the disk is full
            raise RuntimeError("[enforce fail at inline_container.cc:664] . PytorchStreamWriter failed writing "
                               "file data/0: file write failed; basic_ios::clear: iostream error")
        return real_save(obj, f, *a, **k)

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(torch, "save", save)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10 ** 9, 10 ** 9, 0))
    out = tmp_path / "run"
    code = _script().main(["--task", "text_classification", "--model.name_or_path", str(tiny_model_dir),
                           "--data.path", str(tiny_text_data), "--data.num_labeled", "20", "--data.dev_size", "40",
                           "--model.max_length", "32", "--train.max_steps", "4", "--train.warmup_steps", "0",
                           "--train.batch_size", "4", "--train.eval_every", "2", "--output_dir", str(out),
                           "--report_to", "none"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert "(No space left on device): the disk is full: free some space and run the same command again" in err
    kept = sorted(p.name for p in (out / "checkpoints").iterdir() if p.is_dir())
    assert kept == ["step-00000002"]  # no .tmp-* left; the first checkpoint is whole
