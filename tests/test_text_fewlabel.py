"""The general few-label recipe (configs/recipes/text_fewlabel.yaml) on any text classification data:
it loads for an IMDB-like and a TREC-like folder, the zero-shot start's descriptions come from
--model.label_descriptions (a list, a file or a template), labels.json beside the data or the default
template (in label order, recorded in data_info.json),
and the labelled set is N per class (a class with too few examples is an error)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tasks.text.data import load_text_classification
from tasks.text.descriptions import resolve_label_descriptions
from tests.conftest import make_review, require_resource, shared_data_dir, write_jsonl
from uda.config import ConfigError, build_config
from uda.data import DataError

RECIPE = "configs/recipes/text_fewlabel.yaml"
TREC_NAMES = ["ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"]
QUESTION = {"ABBR": "What does {} stand for ?", "ENTY": "What {} is the best ?", "DESC": "Why is {} so ?",
            "HUM": "Who invented {} ?", "LOC": "Where is {} ?", "NUM": "How many {} are there ?"}


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("UDA_DATA_PATH", raising=False)


def imdb_like(folder: Path) -> Path:
    """train/test/unsup jsonl with integer labels 0/1 and no label names (IMDB's layout)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    write_jsonl(folder / "train.jsonl", [{"id": f"train_{i}", "text": make_review(rng, i % 2), "label": i % 2}
                                         for i in range(80)])
    write_jsonl(folder / "test.jsonl", [{"id": f"test_{i}", "text": make_review(rng, i % 2), "label": i % 2}
                                        for i in range(20)])
    write_jsonl(folder / "unsup.jsonl", [{"id": f"unsup_{i}", "text": make_review(rng, i % 2, 14), "label": -1}
                                         for i in range(40)])
    return folder


def trec_like(folder: Path, per_class: dict | None = None) -> Path:
    """train/test jsonl of 6 classes with integer labels and a label_name column (TREC's layout), no
    unlabelled file."""
    folder.mkdir(parents=True, exist_ok=True)
    per_class = per_class or {}

    def rows(split: str, n: int) -> list[dict]:
        out = []
        for c, name in enumerate(TREC_NAMES):
            for j in range(per_class.get(name, n) if split == "train" else n):
                out.append({"id": f"{split}_{name}_{j}", "text": QUESTION[name].format(f"thing {split} {j}"),
                            "label": c, "label_name": name, "fine_label": f"{name}:other"})
        random.Random(1).shuffle(out)
        return out

    write_jsonl(folder / "train.jsonl", rows("train", 30))
    write_jsonl(folder / "test.jsonl", rows("test", 3))
    return folder


def recipe(data: Path, **overrides):
    return build_config("text_classification", RECIPE, {"data.path": str(data), **overrides})


def split_and_descriptions(cfg):
    data = load_text_classification(cfg.data, cfg.seed)
    texts, info = resolve_label_descriptions(cfg.model, data.label_names, cfg.data.path,
                                             data.info["label_names_from"])
    return data, texts, info


def test_recipe_is_the_imdb_recipe_without_imdb():
    """The general recipe has the IMDB few-label recipe's settings, less what only IMDB has."""
    def flat(d: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in d.items():
            out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
        return out

    imdb = flat(build_config("imdb", "configs/recipes/imdb_cpu_fewlabel.yaml", {}).to_dict())
    general = flat(build_config("text_classification", RECIPE, {}).to_dict())
    differ = {k for k in imdb.keys() | general.keys() if imdb.get(k) != general.get(k)}
    assert differ == {"task", "data.hub_id", "data.id_order_file", "data.label_names", "data.min_unlabeled_chars",
                      "data.dev_sampling", "model.label_descriptions"}
    assert general["data.dev_sampling"] == "proportional" and imdb["data.dev_sampling"] == "balanced"
    assert general["model.head_init"] == imdb["model.head_init"] == "descriptions"
    assert general["model.label_descriptions"] is None
    assert general["data.id_order_file"] is None and general["data.label_names"] is None
    header = (Path(__file__).resolve().parent.parent / RECIPE).read_text().split("\ntask:")[0]
    assert "--data.path ../shared/data/imdb" in header and "--data.path ../shared/data/trec" in header
    assert "trec_fewlabel_tried" in header


def test_recipe_on_an_imdb_like_folder(tmp_path):
    data = imdb_like(tmp_path / "imdb")
    cfg = recipe(data, **{"data.num_labeled": 20, "data.dev_size": 20,
                          "model.label_descriptions": ["This movie is terrible.", "This movie is great."]})
    split, texts, info = split_and_descriptions(cfg)
    assert split.label_names == ["0", "1"] and split.info["selection"].startswith("random per class")
    assert split.info["counts"]["train_per_class"] == {"0": 10, "1": 10}
    assert len(split.unlabeled) == 40 + 80 - 20  # the unsup file (any length) and the pool less dev
    assert texts == ["This movie is terrible.", "This movie is great."]
    assert info["source"] == "model.label_descriptions"
    # integer labels without names: the template has nothing to fill in, and says what to write
    with pytest.raises(DataError, match="labels.json"):
        split_and_descriptions(recipe(data, **{"data.num_labeled": 20, "data.dev_size": 20}))
    # labels.json by integer label
    (data / "labels.json").write_text(json.dumps({"1": "great", "0": "terrible"}))
    _, texts, info = split_and_descriptions(recipe(data, **{"data.num_labeled": 20, "data.dev_size": 20}))
    assert texts == ["terrible", "great"] and info["source"].startswith("labels.json")


def test_recipe_on_a_trec_like_folder_and_the_template(tmp_path):
    data = trec_like(tmp_path / "trec")
    split, texts, info = split_and_descriptions(recipe(data, **{"data.num_labeled": 24, "data.dev_size": 12}))
    assert split.label_names == TREC_NAMES  # from the label_name column, in label order
    assert split.info["label_names_from"].startswith("column 'label_name'")
    assert split.info["counts"]["train_per_class"] == {n: 4 for n in TREC_NAMES}
    assert len(split.unlabeled) == 6 * 30 - 12  # no unsup file: the training pool's texts less dev
    assert texts == [f"This text is about {n.lower()}." for n in TREC_NAMES]
    assert info == {"source": "template 'This text is about {label}.'", "texts": dict(zip(TREC_NAMES, texts))}
    # a template of your own; names are lower-cased with underscores as spaces
    cfg = recipe(data, **{"data.num_labeled": 24, "data.dev_size": 12, "model.label_descriptions": "A {label} question",
                          "data.label_names": [n if n != "HUM" else "HUMAN_BEING" for n in TREC_NAMES]})
    _, texts, info = split_and_descriptions(cfg)
    assert texts[3] == "A human being question" and texts[0] == "A abbr question"
    assert info["source"] == "model.label_descriptions template 'A {label} question'"
    with pytest.raises(ConfigError, match=r"template without \{label\}"):
        recipe(data, **{"model.label_descriptions": "A {name} question"})
    with pytest.raises(DataError, match=r"'no slot' is not a file .* and not a template \(it has no \{label\}\)"):
        split_and_descriptions(recipe(data, **{"data.num_labeled": 24, "data.dev_size": 12,
                                               "model.label_descriptions": "no slot"}))
    with pytest.raises(ConfigError, match="pooling mean"):
        recipe(data, **{"model.pooling": "cls"})
    with pytest.raises(ConfigError, match="add --model.head_init descriptions"):
        recipe(data, **{"model.head_init": "random", "model.label_descriptions": "A {label} question"})
    # without the recipe's zero-shot start: a random head, as before
    assert resolve_label_descriptions(build_config("text_classification", None, {}).model, TREC_NAMES, str(data)) \
        == (None, None)


def test_descriptions_from_labels_json_and_the_config(tmp_path):
    data = trec_like(tmp_path / "trec")
    described = {n: f"A question about {n}" for n in reversed(TREC_NAMES)}  # any key order
    described["4"] = described.pop("LOC")  # an integer label as a string
    (data / "labels.json").write_text(json.dumps(described))
    opts = {"data.num_labeled": 24, "data.dev_size": 12}
    _, texts, info = split_and_descriptions(recipe(data, **opts))
    assert texts == [f"A question about {n}" for n in TREC_NAMES]
    assert info["source"] == f"labels.json {data / 'labels.json'}"
    # the config's list wins over labels.json
    listed = [f"d{c}" for c in range(6)]
    _, texts, info = split_and_descriptions(recipe(data, **opts, **{"model.label_descriptions": listed}))
    assert texts == listed and info["source"] == "model.label_descriptions"
    with pytest.raises(ConfigError, match="has 2 texts but the data has 6 classes"):
        split_and_descriptions(recipe(data, **opts, **{"model.label_descriptions": ["a", "b"]}))
    # a file elsewhere, and a bare name found in the data folder; a list in label order is a file's layout too
    other = tmp_path / "mine.json"
    other.write_text(json.dumps({n: n.lower() for n in TREC_NAMES}))
    _, texts, info = split_and_descriptions(recipe(data, **opts, **{"model.label_descriptions": str(other)}))
    assert texts == [n.lower() for n in TREC_NAMES] and info["source"] == f"model.label_descriptions file {other}"
    (data / "listed.json").write_text(json.dumps(listed))
    _, texts, info = split_and_descriptions(recipe(data, **opts, **{"model.label_descriptions": "listed.json"}))
    assert texts == listed and info["source"] == f"model.label_descriptions file {data / 'listed.json'}"
    with pytest.raises(DataError, match="'missing.json' is not a file"):
        split_and_descriptions(recipe(data, **opts, **{"model.label_descriptions": "missing.json"}))
    # the shipped TREC descriptions (configs/labels/trec.json)
    trec = Path(__file__).resolve().parent.parent / "configs" / "labels" / "trec.json"
    _, texts, _ = split_and_descriptions(recipe(data, **opts, **{"model.label_descriptions": str(trec)}))
    assert texts == [json.loads(trec.read_text())[n] for n in TREC_NAMES]


@pytest.mark.parametrize("content, pattern", [
    ({n: "x" for n in TREC_NAMES if n != "HUM"}, r"labels\.json' has no description of label\(s\) 'HUM'"),
    ({**{n: "x" for n in TREC_NAMES}, "SPORT": "x"}, r"labels\.json' names the unknown label 'SPORT'"),
    ({**{n: "x" for n in TREC_NAMES}, "0": "y"}, "describes label 'ABBR' twice"),
    ({**{n: "x" for n in TREC_NAMES}, "NUM": " "}, "must be a non-empty text"),
    (["x"] * 5, r"labels\.json' has 5 texts but the data has 6 classes"),
    (["x"] * 5 + [""], "every description must be a non-empty text"),
    ("x", "holds a str; it must be a JSON object"),
])
def test_labels_json_errors(tmp_path, content, pattern):
    data = trec_like(tmp_path / "trec")
    (data / "labels.json").write_text(json.dumps(content))
    with pytest.raises(DataError, match=pattern):
        split_and_descriptions(recipe(data, **{"data.num_labeled": 24, "data.dev_size": 12}))


def test_stratified_sample_keeps_every_class_and_a_small_class_is_an_error(tmp_path):
    data = trec_like(tmp_path / "trec", per_class={"ABBR": 5})
    for seed in (0, 1):
        split, _, _ = split_and_descriptions(recipe(data, **{"data.num_labeled": 30, "data.dev_size": 0,
                                                             "seed": seed}))
        assert split.info["counts"]["train_per_class"] == {n: 5 for n in TREC_NAMES}  # all 5 ABBR
    with pytest.raises(DataError, match=r"only 5 labelled examples of class 'ABBR' but data.num_labeled=36 asks "
                                        r"for 6 per class"):
        load_text_classification(recipe(data, **{"data.num_labeled": 36, "data.dev_size": 0}).data, 0)
    with pytest.raises(DataError, match=r"multiple of the number of classes \(6"):
        load_text_classification(recipe(data, **{"data.num_labeled": 20}).data, 0)


def test_label_names_column_that_disagrees_is_an_error(tmp_path):
    data = trec_like(tmp_path / "trec")
    rows = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    rows[7]["label_name"] = "LOC" if rows[7]["label_name"] != "LOC" else "NUM"
    write_jsonl(data / "train.jsonl", rows)
    with pytest.raises(DataError, match="row 8: label .* has the name"):
        load_text_classification(recipe(data, **{"data.num_labeled": 24, "data.dev_size": 12}).data, 0)
    # ignored on request: the names are the indices
    split = load_text_classification(recipe(data, **{"data.num_labeled": 24, "data.dev_size": 12,
                                                     "data.label_name_column": "none"}).data, 0)
    assert split.label_names == [str(c) for c in range(6)]


@pytest.mark.usefixtures("one_thread")
def test_data_info_records_the_descriptions_source(tiny_model_dir, tmp_path):
    from tests.trainkit import run, tiny_config

    data = trec_like(tmp_path / "trec")
    (data / "labels.json").write_text(json.dumps({n: f"a {n.lower()} question" for n in TREC_NAMES}))
    out = tmp_path / "run"
    run(tiny_config(tiny_model_dir, data, out, **{
        "model.pooling": "mean", "model.head_init": "descriptions", "data.num_labeled": 24, "data.dev_size": 12,
        "data.min_unlabeled_chars": 0, "train.max_steps": 2, "train.eval_every": 2}))
    info = json.loads((out / "data_info.json").read_text())
    assert info["label_names"] == TREC_NAMES
    assert info["label_descriptions"] == {"source": f"labels.json {data / 'labels.json'}",
                                          "texts": {n: f"a {n.lower()} question" for n in TREC_NAMES}}


def test_real_trec_split_with_the_recipe():
    """The recipe builds TREC's split with N = 96 (16 per class), without training."""
    trec = require_resource(shared_data_dir() / "trec", "TREC data")
    cfg = recipe(trec, **{"data.num_labeled": 96})
    split, texts, info = split_and_descriptions(cfg)
    assert split.label_names == TREC_NAMES
    assert split.info["counts"]["train"] == 96
    assert split.info["counts"]["train_per_class"] == {n: 16 for n in TREC_NAMES}
    assert split.info["counts"]["test"] == 500 and split.info["counts"]["dev"] == 500
    assert split.info["counts"]["train_pool"] == 5368
    ids = {r["id"] for r in split.train} | {r["id"] for r in split.dev}
    assert len(ids) == 596  # dev is carved from the rest of the pool
    assert len(split.unlabeled) == 5368 - 500  # the pool's texts less dev (TREC has no unlabelled file)
    assert texts == [f"This text is about {n.lower()}." for n in TREC_NAMES]
    assert info["source"] == "template 'This text is about {label}.'"


def header_commands() -> dict:
    """The recipe header's commands, by data set ('IMDB', 'TREC'), as argument lists after uda-train."""
    import shlex

    lines = (Path(__file__).resolve().parent.parent / RECIPE).read_text().split("\ntask:")[0].splitlines()
    commands, name = {}, None
    for line in lines:
        text = line.lstrip("#").strip()
        if text.startswith(("IMDB: uda-train", "TREC: uda-train")):
            name, text = text[:4], text[6:]
            commands[name] = ""
        elif name is None or not commands[name].endswith("\\"):
            name = None
            continue
        commands[name] = commands[name].rstrip("\\") + " " + text
    return {k: shlex.split(v)[1:] for k, v in commands.items()}


def test_the_headers_commands_build_their_configs():
    from uda.config import parse_cli

    commands = header_commands()
    assert set(commands) == {"IMDB", "TREC"}
    built = {}
    for name, argv in commands.items():
        task, config_file, overrides, _ = parse_cli(argv)
        assert (task, config_file) == ("text_classification", RECIPE)
        built[name] = build_config(task, config_file, overrides)
    assert built["IMDB"].model.label_descriptions == ["This movie is terrible.", "This movie is great."]
    assert (built["IMDB"].data.num_labeled, built["TREC"].data.num_labeled) == (20, 96)
    assert built["TREC"].data.path == "../shared/data/trec"
    assert built["TREC"].model.label_descriptions == "configs/labels/trec.json"


def test_sweep_plain_methods_drop_the_zero_shot_start(tmp_path):
    from uda_compare.cli import parse_args
    from uda_compare.runs import build_plan

    data = trec_like(tmp_path / "trec")
    args = parse_args(["--task", "text_classification", "--out", str(tmp_path / "sweep"), "--num_labeled", "24",
                       "--seeds", "0", "--methods", "finetune", "supervised", "uda", "ceiling"])
    cfg = {folder.name: c for folder, c in build_plan(args, ["--config", RECIPE, "--data.path", str(data),
                                                             "--model.label_descriptions", "labels.json"])}
    start = {name: (c.model.head_init, c.model.label_descriptions) for name, c in cfg.items()}
    assert start == {"finetune-n24-seed0": ("random", None), "supervised-n24-seed0": ("descriptions", "labels.json"),
                     "uda-n24-seed0": ("descriptions", "labels.json"), "ceiling-nall-seed0": ("random", None)}


def test_proportional_dev_follows_the_class_shares_and_keeps_every_class():
    import numpy as np

    from tasks.text.data import _balanced_subset, _proportional_subset

    per_class = [list(range(0, 16)), list(range(100, 700)), list(range(1000, 1384))]  # 16 / 600 / 384
    rng = np.random.default_rng(0)
    picked = _proportional_subset(per_class, 100, rng)
    counts = [sum(i in set(c) for i in picked) for c in per_class]
    assert sum(counts) == 100 and len(set(picked)) == 100 and picked == sorted(picked)
    assert counts == [2, 60, 38]  # 1.6, 60.0, 38.4 by largest remainders
    assert _proportional_subset([[1], list(range(10, 1010))], 10, rng)[0] == 1  # a rare class keeps one example
    balanced = _balanced_subset(per_class, 100, np.random.default_rng(0))
    assert [sum(i in set(c) for i in balanced) for c in per_class] == [16, 42, 42]


def test_dev_sampling_option_draws_the_dev_set(tmp_path):
    from collections import Counter

    from tasks.text.config import TextDataConfig
    from tasks.text.data import load_text_classification

    rows = [{"id": f"r{i}", "text": f"text number {i} " + "word " * (i % 7), "label": 0 if i < 20 else 1}
            for i in range(400)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "test.jsonl").write_text("".join(json.dumps({**r, "id": f"t{i}"}) + "\n" for i, r in enumerate(rows[:30])))
    for sampling, expected in (("balanced", {0: 10, 1: 10}), ("proportional", {0: 1, 1: 19})):
        cfg = TextDataConfig(path=str(tmp_path), num_labeled=4, dev_size=20, dev_sampling=sampling,
                             min_unlabeled_chars=0)
        data = load_text_classification(cfg, seed=1)
        assert dict(Counter(r["label"] for r in data.dev)) == expected
        assert data.info["dev_sampling"] == sampling
