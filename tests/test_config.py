"""Config: strict loading, coercion, precedence, and every file in configs/ loads."""

from pathlib import Path

import pytest

from uda.config import CONFIG_DIR, Config, ConfigError, build_config, load_yaml, parse_cli


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.rglob("*.yaml")), ids=lambda p: str(p.relative_to(CONFIG_DIR)))
def test_every_config_file_loads(path):
    data = load_yaml(path)
    if path.parent == CONFIG_DIR:
        cfg = build_config(task=path.stem)
    else:  # a recipe: loaded with --config on top of its task's defaults
        cfg = build_config(task=data.get("task"), config_file=str(path))
    assert isinstance(cfg, Config)


def test_reference_gpu_recipe_defaults():
    cfg = build_config("imdb")
    assert cfg.model.name_or_path == "bert-base-uncased" and cfg.model.max_length == 128
    assert (cfg.data.num_labeled, cfg.uda.unsup_ratio, cfg.train.lr) == (20, 3, 2e-5)
    assert (cfg.train.max_steps, cfg.train.warmup_steps, cfg.uda.tsa) == (10000, 1000, "linear")


def test_yaml_scientific_notation_string_is_coerced(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  lr: 5e-05\n")  # PyYAML reads this as the string '5e-05'
    assert isinstance(load_yaml(f)["train"]["lr"], str)
    cfg = build_config("imdb", str(f))
    assert cfg.train.lr == 5e-05 and isinstance(cfg.train.lr, float)


def test_precedence_defaults_task_file_cli(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  lr: 1.0e-4\n  max_steps: 50\n  warmup_steps: 5\n")
    cfg = build_config("imdb", str(f), {"train.lr": "3e-5"})
    assert cfg.train.lr == 3e-5  # command line beats the file
    assert cfg.train.max_steps == 50  # the file beats the task config
    assert cfg.train.batch_size == 8  # the task config
    assert cfg.train.weight_decay == 0.01  # the dataclass default


def test_unknown_key_in_file_names_it(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  learning_rate: 1e-4\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'train.learning_rate'.*c.yaml"):
        build_config("imdb", str(f))


@pytest.mark.parametrize("key,value,msg", [
    ("train.max_steps", "ten", "train.max_steps' must be an integer"),
    ("train.lr", "fast", "train.lr' must be a number"),
    ("uda.tsa", "cosine", "uda.tsa' must be one of"),
    ("overwrite", "maybe", "overwrite' must be a boolean"),
    ("train.batch_size", "2.5", "train.batch_size' must be an integer"),
])
def test_wrong_types_name_the_key(key, value, msg):
    with pytest.raises(ConfigError, match=msg):
        build_config("imdb", None, {key: value})


def test_none_means_off_and_bools_parse():
    cfg = build_config("imdb", None, {"uda.tsa": "none", "uda.temperature": "0.85", "overwrite": "true"})
    assert cfg.uda.tsa is None and cfg.uda.temperature == 0.85 and cfg.overwrite is True


def test_range_validation():
    with pytest.raises(ConfigError, match="uda.confidence"):
        build_config("imdb", None, {"uda.confidence": "1.5"})
    with pytest.raises(ConfigError, match="warmup_steps"):
        build_config("imdb", None, {"train.max_steps": "10", "train.warmup_steps": "20"})


def test_parse_cli():
    task, cfg_file, over, want_help = parse_cli(["--task", "imdb", "--train.lr=3e-5", "--uda.tsa", "exp",
                                                 "--overwrite", "--config", "x.yaml"])
    assert (task, cfg_file, want_help) == ("imdb", "x.yaml", False)
    assert over == {"train.lr": "3e-5", "uda.tsa": "exp", "overwrite": "true"}
    with pytest.raises(ConfigError, match="--lr"):
        parse_cli(["--lr", "3"])
    assert parse_cli(["--help"])[3] is True


def test_missing_config_file():
    with pytest.raises(ConfigError, match="does not exist"):
        build_config("imdb", "/nonexistent/c.yaml")


def test_non_mapping_yaml(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        build_config("imdb", str(f))
