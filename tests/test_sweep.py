"""uda-compare (the uda_compare package; benchmarks/sweep.py is its shim): a --quick IMDB-style sweep on the
tiny model and data (summary files, plots, resume), one run in-process through main() (progress lines,
per-seed table), its --help, its clear errors, and data.num_labeled=0 (all labelled examples) that its
ceiling runs use."""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO


def started(stdout):
    """Names of the runs the sweep started (its "[i/n] start <name>" lines)."""
    return re.findall(r"^\[\d+/\d+\] start (\S+)$", stdout, flags=re.M)


def sweep(args, check=True):
    """uda-compare in its own process (python -m uda_compare), as the installed command runs it."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", UDA_DATA_PATH="")
    proc = subprocess.run([sys.executable, "-m", "uda_compare", *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"uda-compare failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}")
    return proc


def bt_file(data_dir, path):
    """Precomputed 'back-translated' copies (here: reversed word order) of every text of the data."""
    from augment.precomputed import write_precomputed

    texts = []
    for name in ("train.jsonl", "unsup.jsonl"):
        texts += [json.loads(line)["text"] for line in (data_dir / name).read_text().splitlines()]
    texts = list(dict.fromkeys(texts))
    write_precomputed(path, texts, [[" ".join(reversed(t.split()))] for t in texts])
    return path


def test_quick_imdb_sweep_summary_plots_and_resume(tiny_model_dir, tiny_text_data, tmp_path):
    out = tmp_path / "sweep"
    order = tmp_path / "order.txt"
    order.write_text("\n".join(f"train_{i}" for i in reversed(range(200))) + "\n")
    common = ["--task", "imdb", "--out", str(out), "--num_labeled", "20", "40", "--quick",
              "--methods", "supervised", "uda_tfidf", "uda_bt", "ceiling", "--bt_file",
              str(bt_file(tiny_text_data, tmp_path / "bt.jsonl")), "--reference_split_seed", "0"]
    train_opts = ["--", "--model.name_or_path", str(tiny_model_dir), "--data.path", str(tiny_text_data),
                  "--data.id_order_file", str(order), "--model.max_length", "32", "--train.batch_size", "4",
                  "--train.eval_batch_size", "32", "--uda.unsup_ratio", "2"]
    first = sweep([*common, "--seeds", "0", *train_opts])
    assert "already finished" not in first.stdout and len(started(first.stdout)) == 7
    one_seed = next(l for l in (out / "summary.md").read_text().splitlines() if l.startswith("| 20 | supervised | 1 |"))
    assert "±" not in one_seed  # a single seed has no spread to show
    # a second call with one more seed runs only the new seed's runs
    proc = sweep([*common, "--seeds", "0", "1", *train_opts])
    assert proc.stdout.count("already finished") == 7
    assert all(name.endswith("seed1") for name in started(proc.stdout)) and len(started(proc.stdout)) == 7
    names = [f"{m}-n{n}-seed{s}" for m in ("supervised", "uda_tfidf", "uda_bt") for n in (20, 40) for s in (0, 1)]
    for name in names + ["ceiling-nall-seed0", "ceiling-nall-seed1"]:
        assert (out / name / "results.json").exists(), name

    summary = json.loads((out / "summary.json").read_text())
    got = {(t["method"], t["num_labeled"], t["seeds"]) for t in summary["table"]}
    assert got == {(m, n, 2) for m in ("supervised", "uda_tfidf", "uda_bt") for n in (20, 40)} | {("ceiling", "all", 2)}
    ceiling = next(t for t in summary["table"] if t["method"] == "ceiling")
    assert ceiling["num_train"] == 200 - 16  # every labelled review but the (quick) dev ones
    for t in summary["table"]:
        assert {"accuracy_mean", "accuracy_std", "macro_f1_mean", "total_seconds_mean", "cpu_seconds_mean"} <= set(t)
        assert 0 <= t["accuracy_mean"] <= 100
    assert len(summary["runs"]) == 14 and all(r["accuracy"] is not None for r in summary["runs"])
    md = (out / "summary.md").read_text()
    assert "| 20 | supervised | 2 |" in md and "| 40 | uda_bt | 2 |" in md and "| all (184) | ceiling | 2 |" in md
    assert (out / "summary.csv").read_text().splitlines()[0].startswith("method,num_labeled,seeds")
    for png in ("accuracy_vs_num_labeled.png", "macro_f1_vs_num_labeled.png", "training_curves.png"):
        assert (out / png).stat().st_size > 1000, png

    # the methods' options reached the runs
    def run_cfg(name):
        import yaml

        return yaml.safe_load((out / name / "config.yaml").read_text())

    assert run_cfg("supervised-n20-seed0")["uda"]["lambda_u"] == 0
    assert run_cfg("uda_tfidf-n20-seed0")["augment"]["method"] == "tf_idf"
    assert run_cfg("uda_bt-n20-seed0")["augment"] == {**run_cfg("uda_bt-n20-seed0")["augment"],
                                                      "method": "precomputed", "file": str(tmp_path / "bt.jsonl")}
    assert run_cfg("ceiling-nall-seed1")["data"]["num_labeled"] == 0
    for name, unsup in (("supervised-n40-seed1", False), ("uda_bt-n40-seed1", True)):
        lines = [json.loads(line) for line in (out / name / "metrics.jsonl").read_text().splitlines()]
        assert any("sup/loss" in line for line in lines)
        assert any("unsup/loss" in line for line in lines) == unsup
    # only the reference seed uses the id order file; the others draw their labelled set
    info = {s: json.loads((out / f"supervised-n20-seed{s}" / "data_info.json").read_text()) for s in (0, 1)}
    assert info[0]["selection"].startswith("id_order_file") and info[1]["selection"].startswith("random")

    # --summarize_only rebuilds the summary without running anything
    (out / "summary.md").unlink()
    from uda_compare.cli import main

    assert main(["--task", "imdb", "--out", str(out), "--summarize_only"]) == 0
    assert "| all (184) | ceiling | 2 |" in (out / "summary.md").read_text()


def test_a_stopped_parallel_sweep_saves_its_running_runs_and_the_same_command_finishes_them(tiny_model_dir,
                                                                                            tiny_text_data, tmp_path):
    """SIGINT to the sweep alone (as `timeout -s INT` sends it): the running runs are asked to stop, each
    saves a checkpoint of the step it is in, the sweep exits 130; the same command continues them."""
    import signal
    import time

    out = tmp_path / "sweep"
    cmd = [sys.executable, str(REPO / "benchmarks" / "sweep.py"), "--task", "imdb", "--out", str(out),  # the shim
           "--num_labeled", "20", "--seeds", "0", "1", "--methods", "supervised", "--jobs", "2", "--",
           "--model.name_or_path", str(tiny_model_dir), "--data.path", str(tiny_text_data), "--data.dev_size", "16",
           "--model.max_length", "16", "--train.batch_size", "4", "--train.max_steps", "1200", "--train.log_every",
           "1", "--train.eval_every", "1200", "--train.warmup_steps", "1", "--checkpoint.every_minutes", "none"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", UDA_DATA_PATH="")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    runs = [out / "supervised-n20-seed0", out / "supervised-n20-seed1"]
    deadline = time.time() + 300
    while not all((r / "metrics.jsonl").is_file() and (r / "metrics.jsonl").stat().st_size > 0 for r in runs):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stdout + stderr
    from uda import checkpoint

    for r in runs:
        assert f"stopped {r.name}: training stopped by SIGTERM after step" in stdout, stdout
        step = checkpoint.latest(r / "checkpoints").step
        assert 0 < step < 1200 and not (r / "results.json").exists()
    assert "Run the same command again" in stderr
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    for r in runs:
        assert json.loads((r / "results.json").read_text())["resumed_at_steps"], r


def _main(args, capsys):
    from uda_compare.cli import main

    rc = main(args)
    return rc, capsys.readouterr().err


def test_uda_bt_without_bt_file_is_a_clear_error(tmp_path, capsys):
    out = tmp_path / "sweep"
    rc, err = _main(["--task", "imdb", "--out", str(out), "--methods", "supervised", "uda_bt", "--quick"], capsys)
    assert rc == 2 and "uda_bt" in err and "--bt_file" in err
    assert not out.exists()  # nothing ran
    rc, err = _main(["--task", "imdb", "--out", str(out), "--methods", "uda_bt", "--bt_file",
                     str(tmp_path / "missing.jsonl")], capsys)
    assert rc == 2 and "--bt_file" in err and "missing.jsonl" in err


@pytest.mark.parametrize("passthrough,msg", [(["--task", "squad_v2"], "--task"),
                                             (["--train.lrr", "1"], "--train.lrr")])
def test_conflicting_or_unknown_options_are_errors(tmp_path, capsys, passthrough, msg):
    rc, err = _main(["--task", "imdb", "--out", str(tmp_path / "s"), "--methods", "supervised", "--", *passthrough],
                    capsys)
    assert rc == 2 and msg in err


def test_plan_sets_each_runs_options(tmp_path, capsys):
    from uda_compare.cli import parse_args
    from uda_compare.runs import build_plan

    args = parse_args(["--task", "imdb", "--out", str(tmp_path), "--num_labeled", "20", "100", "--seeds", "0", "1",
                       "--methods", "supervised", "uda_tfidf", "ceiling", "uda"])
    plan = build_plan(args, ["--augment.method", "unif", "--augment.p", "0.2", "--seed", "9",
                             "--data.num_labeled", "8"])
    assert "replaced" in capsys.readouterr().err  # the sweep's own seed and N win, with a note
    names = [folder.name for folder, _ in plan]
    assert names[-2:] == ["ceiling-nall-seed0", "ceiling-nall-seed1"] and len(names) == 2 * 2 * 3 + 2
    cfg = {folder.name: c for folder, c in plan}
    assert (cfg["uda-n100-seed1"].data.num_labeled, cfg["uda-n100-seed1"].seed) == (100, 1)
    assert (cfg["uda-n100-seed1"].augment.method, cfg["uda_tfidf-n20-seed0"].augment.method) == ("unif", "tf_idf")
    assert cfg["uda_tfidf-n20-seed0"].augment.p == 0.2 and cfg["supervised-n20-seed0"].uda.lambda_u == 0
    assert (cfg["ceiling-nall-seed1"].data.num_labeled, cfg["ceiling-nall-seed1"].uda.lambda_u) == (0, 0)
    assert cfg["ceiling-nall-seed1"].output_dir == str(tmp_path / "ceiling-nall-seed1")


def test_finetune_and_ceiling_drop_the_recipes_extra_stages_and_tsa(tmp_path):
    """supervised keeps the recipe's contrastive and MLM stages (the recipe without its consistency loss);
    finetune and ceiling are plain fine-tuning."""
    from uda_compare.cli import parse_args
    from uda_compare.runs import build_plan

    args = parse_args(["--task", "imdb", "--out", str(tmp_path), "--num_labeled", "20", "--seeds", "0",
                       "--methods", "finetune", "supervised", "uda", "ceiling"])
    cfg = {folder.name: c for folder, c in build_plan(args, ["--model.contrastive_iterations", "20",
                                                             "--model.mlm_steps", "100", "--model.pooling", "mean",
                                                             "--model.head_init", "descriptions",
                                                             "--model.label_descriptions", '["bad", "good"]'])}
    assert [cfg[f"{m}-n20-seed0"].model.contrastive_iterations for m in ("finetune", "supervised", "uda")] == [None, 20, 20]
    assert [cfg[f"{m}-n20-seed0"].model.mlm_steps for m in ("finetune", "supervised", "uda")] == [None, 100, 100]
    assert [cfg[f"{m}-n20-seed0"].uda.lambda_u for m in ("finetune", "supervised")] == [0, 0]
    assert cfg["ceiling-nall-seed0"].model.contrastive_iterations is None
    assert cfg["ceiling-nall-seed0"].model.mlm_steps is None
    # the zero-shot start from label descriptions is the recipe's too: plain fine-tuning has a random head
    assert [cfg[f"{m}-n20-seed0"].model.label_descriptions for m in ("finetune", "supervised", "uda")] == \
        [None, ["bad", "good"], ["bad", "good"]]
    assert cfg["ceiling-nall-seed0"].model.label_descriptions is None
    assert [cfg[name].model.head_init for name in ("finetune-n20-seed0", "supervised-n20-seed0",
                                                   "ceiling-nall-seed0")] == ["random", "descriptions", "random"]
    assert [cfg[f"{m}-n20-seed0"].uda.tsa for m in ("finetune", "supervised", "uda")] == [None, "linear", "linear"]
    assert cfg["ceiling-nall-seed0"].uda.tsa is None


def test_num_labeled_all_runs_every_method_on_the_whole_pool(tmp_path, capsys):
    """--num_labeled all: data.num_labeled 0 (every labelled example) for each method, folder -nall-."""
    from uda_compare.cli import parse_args
    from uda_compare.runs import build_plan

    args = parse_args(["--task", "squad_v2", "--out", str(tmp_path), "--num_labeled", "all", "64", "--seeds", "1",
                       "--methods", "supervised", "uda"])
    cfg = {folder.name: c for folder, c in build_plan(args, [])}
    assert list(cfg) == ["supervised-nall-seed1", "uda-nall-seed1", "supervised-n64-seed1", "uda-n64-seed1"]
    assert [cfg[n].data.num_labeled for n in cfg] == [0, 0, 64, 64]
    assert cfg["uda-nall-seed1"].uda.lambda_u > 0 and cfg["supervised-nall-seed1"].uda.lambda_u == 0


@pytest.mark.parametrize("bad", ["0", "-3", "many"])
def test_num_labeled_bad_value_is_a_clear_error(tmp_path, capsys, bad):
    with pytest.raises(SystemExit):
        _main(["--task", "squad_v2", "--out", str(tmp_path), "--num_labeled", bad], capsys)
    assert "'all'" in capsys.readouterr().err


def test_jobs_must_be_positive(tmp_path, capsys):
    with pytest.raises(SystemExit):
        _main(["--task", "imdb", "--out", str(tmp_path), "--jobs", "0"], capsys)
    assert "--jobs" in capsys.readouterr().err


def test_summarize_only_without_runs(tmp_path, capsys):
    rc, err = _main(["--task", "imdb", "--out", str(tmp_path), "--summarize_only"], capsys)
    assert rc == 1 and "no finished runs" in err


def test_summary_says_where_runs_ran_and_leaves_resumed_or_mixed_times_out(tmp_path):
    """A curve finished on two machines: each row says where its runs ran; wall time is averaged only over
    runs that were not resumed (their time covers the last attempt) and only within one kind of device."""
    from uda_compare.summary import collect, summarize, write_summary

    def fake(name, device, seconds, resumed=()):
        r = {"task": "imdb", "test": {"accuracy": 0.8, "macro_f1": 0.79}, "selected_model": {"step": 10},
             "total_seconds": seconds, "cpu_seconds": 2 * seconds, "resumed_at_steps": list(resumed),
             "environment": {"device": device, "device_name": "x"}, "data": {"counts": {"train": 20}}}
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(r))

    fake("supervised-n20-seed1", "cuda:0", 100.0)  # the device index is left out
    fake("supervised-n20-seed2", "cuda", 300.0, resumed=[50])
    fake("supervised-n20-seed3", "cuda", 120.0)
    fake("uda-n20-seed1", "cuda", 200.0)
    fake("uda-n20-seed2", "cpu", 2000.0)
    rows = collect(tmp_path, "imdb")
    table = {t["method"]: t for t in summarize(rows, "imdb")}
    sup, uda = table["supervised"], table["uda"]
    assert sup["devices"] == {"cuda": 3} and uda["devices"] == {"cpu": 1, "cuda": 1}
    assert sup["total_seconds_mean"] == pytest.approx(110.0)  # the resumed run's 300 s left out
    assert sup["cpu_seconds_mean"] == pytest.approx(2 * (100 + 300 + 120) / 3)  # CPU time counts every attempt
    assert "total_seconds_mean" not in uda and "cpu_seconds_mean" not in uda
    write_summary(tmp_path, rows, list(table.values()), "imdb")
    md = (tmp_path / "summary.md").read_text()
    assert re.search(r"^\| 20 \| supervised \| 3 \| .* \| 110 ± 14 \| .* \| cuda \|$", md, flags=re.M), md
    assert re.search(r"^\| 20 \| uda \| 2 \| .* \| - \| - \| cpu 1, cuda 1 \|$", md, flags=re.M), md
    assert "cpu 1, cuda 1" in (tmp_path / "summary.csv").read_text()


def fake_run(out, name, test, dev=None, train=20, dev_labels=16, task="imdb"):
    """A finished run folder: results.json with test (and dev) accuracy, its labelled counts, run on the CPU."""
    r = {"task": task, "test": {"accuracy": test, "macro_f1": test - 0.01}, "selected_model": {"step": 10},
         "total_seconds": 10.0, "cpu_seconds": 20.0, "environment": {"device": "cpu"},
         "data": {"counts": {"train": train}}, "labels": {"train": train, "dev_for_selection": dev_labels}}
    if dev is not None:
        r["dev_best"] = {"step": 10, "accuracy": dev, "macro_f1": dev}
    (out / name).mkdir(parents=True)
    (out / name / "results.json").write_text(json.dumps(r))


def spy(monkeypatch, module, name):
    """Wrap module.name so that each call's arguments are recorded (the function still runs)."""
    calls = []
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_summary_names_the_dev_winner_per_n_and_the_labelled_budget(tmp_path, monkeypatch):
    """Under the mean table a line per N: the method with the best mean dev accuracy and how far it is ahead
    of supervised on test, seed by seed; the mean table gives each row's labels (train + dev)."""
    from uda_compare import plots
    from uda_compare.summary import collect, summarize, write_summary

    fake_run(tmp_path, "supervised-n20-seed1", 0.70, dev=0.70)
    fake_run(tmp_path, "supervised-n20-seed2", 0.74, dev=0.72)
    fake_run(tmp_path, "uda-n20-seed1", 0.80, dev=0.85)
    fake_run(tmp_path, "uda-n20-seed2", 0.72, dev=0.83)
    fake_run(tmp_path, "setfit-n20-seed1", 0.60, dev=0.60, dev_labels=0)  # SetFit's dev chooses nothing
    fake_run(tmp_path, "supervised-n40-seed1", 0.75, dev=0.75, train=40)
    fake_run(tmp_path, "uda-n40-seed1", 0.70, dev=0.80, train=40)
    fake_run(tmp_path, "ceiling-nall-seed1", 0.85, dev=0.86, train=184)
    lines = spy(monkeypatch, plots, "_lines")
    rows = collect(tmp_path, "imdb")
    write_summary(tmp_path, rows, summarize(rows, "imdb"), "imdb")
    md = (tmp_path / "summary.md").read_text()
    assert "| N | method | seeds | labels (train + dev) | accuracy |" in md
    for row in ("| 20 | supervised | 2 | 20 + 16 |", "| 20 | setfit | 1 | 20 + 0 |", "| 40 | uda | 1 | 40 + 16 |",
                "| all (184) | ceiling | 1 | 184 + 16 |"):
        assert row in md, md
    assert ("- N = 20: uda has the best dev accuracy (84.0); on test it is 4.0 points ahead of supervised "
            "(mean over the 2 seeds both ran), ahead on 1 of 2.") in md, md
    assert ("- N = 40: uda has the best dev accuracy (80.0); on test it is 5.0 points behind supervised "
            "(mean over the 1 seed both ran), ahead on 0 of 1.") in md, md
    assert "- N = all (184): ceiling has the best dev accuracy (86.0)." in md, md
    assert md.index("- N = 20:") < md.index("## Test accuracy (%) per seed")  # under the mean table
    assert "dev_labels" in (tmp_path / "summary.csv").read_text().splitlines()[0]

    # several N: a line per method against N; the legends count seeds in the singular too
    assert len(lines) == 2  # accuracy and macro-F1
    ax = lines[0][0]
    assert sorted(ax.get_legend_handles_labels()[1]) == ["ceiling: all 184 labelled (1 seed)", "setfit (1 seed)",
                                                         "supervised (2/1 seeds)", "uda (2/1 seeds)"]
    assert ax.get_xlabel() == "labelled reviews (N, log scale)"
    assert "mean ± std over 1-2 seeds" in ax.get_title()
    for png in ("accuracy_vs_num_labeled.png", "macro_f1_vs_num_labeled.png"):
        assert (tmp_path / png).stat().st_size > 1000, png


def test_one_n_draws_a_bar_per_method_with_its_seeds_as_dots(tmp_path, monkeypatch):
    """One labelled-set size: the accuracy figure is a bar per method (mean, std, a dot per seed), labelled
    by method, the ceiling's bar too; text_classification counts labelled examples, imdb reviews."""
    from uda_compare import plots
    from uda_compare.methods import TASKS
    from uda_compare.summary import collect, summarize, write_summary

    assert (TASKS["imdb"].unit, TASKS["text_classification"].unit) == ("labelled reviews", "labelled examples")
    for seed, (sup, uda) in enumerate([(0.70, 0.80), (0.74, 0.72)], start=1):
        fake_run(tmp_path, f"supervised-n8-seed{seed}", sup, dev=sup, train=8, task="text_classification")
        fake_run(tmp_path, f"uda-n8-seed{seed}", uda, dev=uda, train=8, task="text_classification")
    fake_run(tmp_path, "ceiling-nall-seed1", 0.9, dev=0.9, train=184, task="text_classification")
    bars, lines = spy(monkeypatch, plots, "_bars"), spy(monkeypatch, plots, "_lines")
    rows = collect(tmp_path, "text_classification")
    write_summary(tmp_path, rows, summarize(rows, "text_classification"), "text_classification")
    assert lines == [] and len(bars) == 2
    ax, drawn, _, metric, seed_values = bars[0]
    assert metric == "accuracy" and [t["method"] for t in drawn] == ["supervised", "uda", "ceiling"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["supervised", "uda", "ceiling\nall (184)"]
    assert seed_values[("supervised", 8)] == pytest.approx([70.0, 74.0])
    assert seed_values[("ceiling", "all")] == pytest.approx([90.0])
    assert ax.get_xlabel() == "method"
    assert ax.get_title() == ("Text classification: test accuracy with 8 labelled examples\n(mean ± std over 1-2 "
                              "seeds; dots: single seeds)")
    for png in ("accuracy_vs_num_labeled.png", "macro_f1_vs_num_labeled.png", "training_curves.png"):
        assert (tmp_path / png).stat().st_size > 1000, png


def test_num_labeled_zero_means_all_labelled(tiny_text_data):
    from tasks.common.squad import examples_from_official, few_label_split
    from tasks.text.data import load_text_classification
    from tests.qa_fixtures import make_squad
    from tasks.text.config import TextDataConfig as DataConfig
    from uda.config import ConfigError, build_config

    d = load_text_classification(DataConfig(path=str(tiny_text_data), num_labeled=0, dev_size=40), seed=3)
    assert len(d.train) == 160 and len(d.dev) == 40
    assert not {r["id"] for r in d.train} & {r["id"] for r in d.dev}
    assert sorted(d.info["counts"]["train_per_class"].values()) == [80, 80]
    assert d.info["selection"].startswith("all labelled")
    d2 = load_text_classification(DataConfig(path=str(tiny_text_data), num_labeled=0, dev_size=40), seed=3)
    assert [r["id"] for r in d2.dev] == [r["id"] for r in d.dev]  # seeded like any other split
    with pytest.raises(ValueError, match="dev_size"):
        load_text_classification(DataConfig(path=str(tiny_text_data), num_labeled=0, dev_size=200), seed=0)

    assert build_config("imdb", None, {"data.num_labeled": "0"}).data.num_labeled == 0
    with pytest.raises(ConfigError, match="num_labeled"):
        build_config("imdb", None, {"data.num_labeled": "-2"})

    ex = examples_from_official(make_squad(n_articles=6), "tiny")
    kw = dict(dev_size=0, test_articles=2, dev_articles=1, labeled_articles=2, unlabeled_from_train=True,
              max_unlabeled=None, max_test=None, seed=0)
    split = few_label_split(ex, num_labeled=0, **kw)
    labelled = [e for e in ex if e["id"] in {t["id"] for t in split["train"]}]
    assert len(split["train"]) == split["info"]["counts"]["labeled_pool"]["questions"] == len(labelled) > 0
    # every question that is neither test nor dev, the labelled ones included (labels dropped)
    assert split["info"]["counts"]["unlabeled"] == len(ex) - len(split["dev"]) - len(split["test"])


def test_augment_strength_measure_golden():
    import importlib.util

    spec = importlib.util.spec_from_file_location("augment_strength", REPO / "benchmarks" / "augment_strength.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    originals = ["A great film, great cast.<br />Boring end", "plain words here"]
    copies = ["A big film, great cast. Dull end", "plain words here"]
    r = mod.measure(originals, copies)
    # review 1: 7 words, 5 kept (a, film, great, cast, end) -> 2/7 changed; review 2 unchanged
    assert r["words_changed"] == pytest.approx((2 / 7 + 0) / 2)
    # sentiment occurrences: great x2 (1 kept), boring x1 (0 kept)
    assert r["sentiment_occurrences"] == 3 and r["sentiment_kept"] == pytest.approx(1 / 3)
    assert r["identical"] == 0.5 and r["length_ratio"] == pytest.approx((7 / 7 + 1) / 2)


def test_a_variant_is_its_base_method_with_its_own_options(tmp_path, capsys):
    from uda_compare.cli import parse_args
    from uda_compare.runs import build_plan

    args = parse_args(["--task", "imdb", "--out", str(tmp_path), "--num_labeled", "20", "--seeds", "0",
                       "--methods", "uda", "uda_conf", "sup_long",
                       "--variant", "uda_conf", "uda", "--uda.confidence 0.8 --uda.target hard",
                       "--variant", "sup_long", "supervised", "--train.max_steps 9"])
    cfg = {folder.name: c for folder, c in build_plan(args, ["--train.max_steps", "5", "--train.warmup_steps", "1"])}
    assert (cfg["uda_conf-n20-seed0"].uda.confidence, cfg["uda_conf-n20-seed0"].uda.target) == (0.8, "hard")
    assert cfg["uda-n20-seed0"].uda.confidence is None
    assert (cfg["sup_long-n20-seed0"].uda.lambda_u, cfg["sup_long-n20-seed0"].train.max_steps) == (0, 9)
    assert cfg["uda-n20-seed0"].train.max_steps == 5


@pytest.mark.parametrize("argv,msg", [(["--methods", "nope"], "not a method"),
                                      (["--variant", "Bad-Name", "uda", "", "--methods", "uda"], "--variant name"),
                                      (["--variant", "v", "setfit", "", "--methods", "v"], "base 'setfit'"),
                                      (["--variant", "v", "uda", "--no.such 1", "--methods", "v"], "--variant v")])
def test_bad_methods_and_variants_are_clear_errors(tmp_path, capsys, argv, msg):
    from uda_compare.cli import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--task", "imdb", "--out", str(tmp_path), *argv])
    assert msg in capsys.readouterr().err


def test_compare_draws_another_sweeps_curves(tmp_path):
    from uda_compare.plots import plot_metric
    from uda_compare.summary import compared

    other = tmp_path / "old"
    other.mkdir()
    row = {"num_labeled": 64, "seeds": 2, "num_train": 64, "f1_mean": 50.0, "f1_std": 1.0, "answer_nothing": 50.5}
    (other / "summary.json").write_text(json.dumps({"table": [{**row, "method": "supervised"},
                                                              {**row, "num_labeled": 256, "method": "supervised"}]}))
    rows = compared([(str(other), "plain start")])
    assert [r["method"] for r in rows] == ["plain start: supervised"] * 2
    mine = [{**row, "method": "supervised", "f1_mean": 60.0}, {**row, "num_labeled": 256, "method": "supervised"}]
    plot_metric(tmp_path / "f1.png", mine + rows, "squad_v2", "f1")
    assert (tmp_path / "f1.png").stat().st_size > 1000
    with pytest.raises(SystemExit, match="no summary.json"):
        compared([(str(tmp_path / "missing"), "x")])


def _compare_in_process(args):
    """uda_compare.cli.main in this process (as the installed uda-compare calls it), accelerate's
    per-process state reset around it as tests/trainkit.py does."""
    from accelerate.state import AcceleratorState

    from uda_compare.cli import main

    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        return main(args)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def test_compare_main_end_to_end_progress_lines_and_per_seed_table(tiny_model_dir, tiny_text_data, tmp_path, capsys,
                                                                    one_thread):
    """supervised and uda, one N, two seeds, --quick: the run folders, a start and a done line per run
    (with its time and accuracy), summary.json, and summary.md's mean, per-seed and per-run tables."""
    out = tmp_path / "compare"
    args = ["--task", "text_classification", "--out", str(out), "--num_labeled", "8", "--seeds", "1", "2",
            "--methods", "supervised", "uda", "--quick", "--", "--model.name_or_path", str(tiny_model_dir),
            "--data.path", str(tiny_text_data), "--model.max_length", "32", "--train.batch_size", "4",
            "--uda.unsup_ratio", "2"]
    assert _compare_in_process(args) == 0
    stdout = capsys.readouterr().out
    names = ["supervised-n8-seed1", "uda-n8-seed1", "supervised-n8-seed2", "uda-n8-seed2"]  # the run order
    assert started(stdout) == names
    summary = json.loads((out / "summary.json").read_text())
    runs = {r["run"]: r for r in summary["runs"]}
    assert sorted(runs) == sorted(names)
    for i, name in enumerate(names, start=1):
        res = json.loads((out / name / "results.json").read_text())
        done = re.search(rf"^\[{i}/4\] done {name} in ([\d.]+) (s|min), accuracy ([\d.]+)$", stdout, flags=re.M)
        assert done, stdout
        assert float(done.group(3)) == pytest.approx(100 * res["test"]["accuracy"], abs=0.05)
        assert float(done.group(1)) == pytest.approx(res["total_seconds"] / (60 if done.group(2) == "min" else 1),
                                                     abs=0.05)
        assert runs[name]["total_seconds"] == res["total_seconds"] and runs[name]["cpu_seconds"] is not None
    assert {(t["method"], t["num_labeled"], t["seeds"], tuple(t["seed_list"])) for t in summary["table"]} == \
        {("supervised", 8, 2, (1, 2)), ("uda", 8, 2, (1, 2))}
    md = (out / "summary.md").read_text()
    assert "| 8 | supervised | 2 |" in md and "| 8 | uda | 2 |" in md  # mean ± std
    per_seed = md[md.index("## Test accuracy (%) per seed"):]
    assert "| N | method | seed 1 | seed 2 |" in per_seed
    for method in ("supervised", "uda"):
        acc = [f"{100 * runs[f'{method}-n8-seed{s}']['accuracy']:.1f}" for s in (1, 2)]
        assert f"| 8 | {method} | {acc[0]} | {acc[1]} |" in per_seed, per_seed
    assert "## Test macro-F1 (%) per seed" in md
    run_rows = md[md.index("## Runs"):]
    assert "| run | accuracy | macro-F1 | time (s) | CPU (s) | ran on | selected step |" in run_rows
    for name in names:
        wall, cpu = (f"{runs[name][k]:.0f}" for k in ("total_seconds", "cpu_seconds"))
        assert re.search(rf"^\| {name} \| [\d.]+ \| [\d.]+ \| {re.escape(wall)} \| {re.escape(cpu)} \| cpu \| \d+ \|$",
                         run_rows, flags=re.M), run_rows
    assert (out / "accuracy_vs_num_labeled.png").stat().st_size > 1000

    # the same command again: every run is skipped, nothing trains, the summary is rebuilt
    assert _compare_in_process(args) == 0
    again = capsys.readouterr().out
    assert started(again) == [] and [line for line in again.splitlines() if "already finished" in line] == \
        [f"[{i}/4] skip {name}: already finished" for i, name in enumerate(names, start=1)]


def test_help_is_uda_compare_and_documents_every_option(capsys):
    from uda_compare.cli import main, parser

    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: uda-compare --task TASK --out DIR")
    actions = [a for a in parser()._actions if a.option_strings and a.dest != "help"]
    assert {a.option_strings[0] for a in actions} >= {"--task", "--out", "--num_labeled", "--seeds", "--methods",
                                                      "--variant", "--compare", "--bt_file", "--reference_split_seed",
                                                      "--jobs", "--quick", "--summarize_only"}
    for a in actions:
        assert a.option_strings[0] in text and a.help and len(a.help) > 15, a.option_strings
    for method in ("supervised", "uda", "setfit", "ceiling"):
        assert f"``{method}``" in text  # the methods are explained


def test_setfit_method_without_setfit_is_refused_before_anything_runs(tiny_model_dir, tiny_text_data, tmp_path, capsys,
                                                                       monkeypatch):
    monkeypatch.setitem(sys.modules, "setfit", None)  # as if not installed: find_spec gives None, import fails
    out = tmp_path / "compare"
    rc, err = _main(["--task", "text_classification", "--out", str(out), "--num_labeled", "8", "--seeds", "0",
                     "--methods", "supervised", "setfit", "--quick", "--", "--model.name_or_path",
                     str(tiny_model_dir), "--data.path", str(tiny_text_data)], capsys)
    assert rc == 2 and "setfit" in err and "pip install setfit" in err
    assert not out.exists()  # nothing ran
    # the baseline itself says the same (exit 2) before it reads anything
    from uda_compare.setfit_baseline import main as baseline_main

    assert baseline_main(["--labeled_ids", str(tmp_path / "none.txt"), "--out", str(tmp_path / "sf")]) == 2
    assert "pip install setfit" in capsys.readouterr().err


def test_setfit_runs_as_a_module_of_the_package(tmp_path, monkeypatch):
    """The setfit method starts `python -m uda_compare.setfit_baseline` (no path into the checkout), with
    the folder holding this package first on PYTHONPATH, in the run's output folder."""
    import argparse
    import subprocess as sp

    import uda_compare
    from uda_compare import runs

    source = tmp_path / "uda-n8-seed0"
    source.mkdir()
    for f in ("labeled_ids.txt", "dev_ids.txt", "config.yaml"):
        (source / f).write_text("x\n")
    seen = {}

    def fake_run(cmd, env=None, **kw):
        seen.update(cmd=cmd, env=env)
        return sp.CompletedProcess(cmd, 0)

    monkeypatch.setattr(sp, "run", fake_run)
    args = argparse.Namespace(out=str(tmp_path), quick=True)
    assert runs.run_setfit(tmp_path / "setfit-n8-seed0", 8, 0, args) is None
    assert seen["cmd"][:3] == [sys.executable, "-m", "uda_compare.setfit_baseline"]
    assert seen["cmd"][3:] == ["--run_dir", str(source), "--out", str(tmp_path / "setfit-n8-seed0"), "--quiet",
                               "--num_iterations", "2"]
    root = str(os.path.dirname(os.path.dirname(os.path.abspath(uda_compare.__file__))))
    assert seen["env"]["PYTHONPATH"].split(os.pathsep)[0] == root


def test_summary_without_matplotlib_writes_the_tables_and_says_why_no_plots(tmp_path, capsys, monkeypatch):
    from uda_compare import plots, summary

    run = tmp_path / "supervised-n20-seed1"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({
        "task": "imdb", "test": {"accuracy": 0.8, "macro_f1": 0.79}, "selected_model": {"step": 10},
        "total_seconds": 90.0, "cpu_seconds": 120.0, "environment": {"device": "cpu"},
        "data": {"counts": {"train": 20}}}))
    monkeypatch.setattr(plots, "have_matplotlib", lambda: False)
    rows = summary.collect(tmp_path, "imdb")
    written = summary.write_summary(tmp_path, rows, summary.summarize(rows, "imdb"), "imdb")
    assert [p.name for p in written] == ["summary.json", "summary.csv", "summary.md"]
    assert not list(tmp_path.glob("*.png")) and "pip install matplotlib" in capsys.readouterr().err
    md = (tmp_path / "summary.md").read_text()
    assert "| 20 | supervised | 80.0 |" in md  # the per-seed table
    assert "| supervised-n20-seed1 | 80.0 | 79.0 | 90 | 120 | cpu | 10 |" in md  # the per-run table
