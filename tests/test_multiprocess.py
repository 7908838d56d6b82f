"""Two CPU processes against one: `accelerate launch --multi_gpu --num_processes 2` and torchrun (gloo).

The runs are made comparable: dropout 0, TSA off and one precomputed augmented copy per text make a
step deterministic, and 2 processes x batch 2 see exactly the global batches of 1 process x batch 4
(BatchStream slices each global batch by rank). DDP averages the gradients of the two halves (each
from two forward passes with gradients, labelled and augmented, before one backward), so both runs
must train the same weights and log the same losses, and evaluation, sharded across the processes,
must count every dev and test example exactly once. A NaN loss on one process only must make both
skip the step.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import torch

from tests.conftest import REPO
from tests.trainkit import model_dir, run, tiny_config, training_lines, weights  # noqa: F401 (fixture)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def copies_file(tiny_text_data, tmp_path_factory):
    """One augmented copy per text (the words reversed), so augmentation draws nothing at random."""
    rows = [json.loads(line) for name in ("train.jsonl", "unsup.jsonl")
            for line in (tiny_text_data / name).read_text().splitlines()]
    path = tmp_path_factory.mktemp("aug") / "copies.jsonl"
    path.write_text("".join(json.dumps({"text": r["text"], "augmented": [" ".join(r["text"].split()[::-1])]}) + "\n"
                            for r in rows))
    return path


def _options(copies, batch_size):
    return {"train.max_steps": 6, "train.warmup_steps": 1, "train.eval_every": 3, "train.log_every": 1,
            "train.batch_size": batch_size, "model.dropout": 0.0, "uda.tsa": "none",
            "augment.method": "precomputed", "augment.file": str(copies), "checkpoint.every_steps": 2}


@pytest.fixture(scope="module")
def single(model_dir, tiny_text_data, copies_file, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("single") / "run"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run(tiny_config(model_dir, tiny_text_data, out, **_options(copies_file, 4)))
    finally:
        torch.set_num_threads(before)
    return out


LAUNCHERS = {
    "accelerate": lambda port: [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
                                "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
                                "--dynamo_backend", "no", "--main_process_port", str(port)],
    "torchrun": lambda port: [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                              "--master_port", str(port)],
}


def _launch(launcher, script, cfg, tmp_path):
    from uda.config import save_config

    save_config(cfg, tmp_path / "c.yaml")
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([*LAUNCHERS[launcher](_free_port()), str(script), "--task", "text_classification",
                           "--config", str(tmp_path / "c.yaml")],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]


def test_two_processes_match_one(model_dir, tiny_text_data, copies_file, single, tmp_path):  # noqa: F811
    launcher = "accelerate"
    out = tmp_path / "run"
    _launch(launcher, REPO / "scripts" / "train_uda.py",
            tiny_config(model_dir, tiny_text_data, out, **_options(copies_file, 2)), tmp_path)

    results = json.loads((out / "results.json").read_text())
    ref = json.loads((single / "results.json").read_text())
    # both processes took part, each on its own half of every batch
    assert results["num_processes"] == 2 and ref["num_processes"] == 1
    procs = results["processes"]
    assert [p["rank"] for p in procs] == [0, 1] and procs[0]["pid"] != procs[1]["pid"]
    assert [p["examples"] for p in procs] == [{"labeled": 12, "unlabeled": 24}] * 2
    assert ref["processes"][0]["examples"] == {"labeled": 24, "unlabeled": 48}
    # evaluation counted every example exactly once
    assert [h["num_examples"] for h in results["dev_history"]] == [40, 40]
    assert results["test"]["num_examples"] == ref["test"]["num_examples"] == 60
    preds = [json.loads(line) for line in (out / "predictions_test.jsonl").read_text().splitlines()]
    ref_preds = [json.loads(line) for line in (single / "predictions_test.jsonl").read_text().splitlines()]
    assert len({p["id"] for p in preds}) == len(preds) == 60
    assert [(p["id"], p["pred"]) for p in preds] == [(p["id"], p["pred"]) for p in ref_preds]
    # the same training: logged losses (averaged over processes), dev metrics and weights
    two, one = training_lines(out), training_lines(single)
    assert [line["step"] for line in two] == list(range(1, 7))  # logged once, by the main process
    for a, b in zip(two, one):
        for key in ("train/loss", "sup/loss", "unsup/loss", "train/grad_norm", "train/lr"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), (a["step"], key)
    for a, b in zip(results["dev_history"], ref["dev_history"]):
        assert a == pytest.approx(b, abs=1e-9)
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == \
        sorted(p.name for p in (single / "checkpoints").iterdir())
    w2, w1 = weights(out / "model"), weights(single / "model")
    # Attention key biases get an exactly-zero gradient in exact arithmetic (softmax ignores a shift
    # shared by all keys): theirs is rounding noise, which Adam scales up to lr-sized steps.
    noise = [k for k in w1 if k.endswith("attention.self.key.bias")]
    max_diff = max(float((w2[k] - w1[k]).abs().max()) for k in w1 if k not in noise)
    assert max_diff < 1e-6, max_diff
    assert max(float((w2[k] - w1[k]).abs().max()) for k in noise) < 6 * 1e-3  # steps x lr
    print(f"{launcher}: 2 processes vs 1: max |weight difference| {max_diff:.3g}, "
          f"final loss {two[-1]['train/loss']:.6f} vs {one[-1]['train/loss']:.6f}")


# The training script, with the supervised loss of process 1 (only) made NaN at its third step.
_NAN_ON_RANK_1 = r"""
import os, sys
sys.path.insert(0, {repo!r}); sys.path.append({scripts!r})  # scripts/ last: its augment.py must not hide the package
from tasks.text.task import TextClassificationTask
real, calls = TextClassificationTask.supervised, []
def supervised(self, model, batch):
    out = real(self, model, batch)
    calls.append(1)
    if os.environ["RANK"] == "1" and len(calls) == 3:
        out.per_example_loss = out.per_example_loss * float("nan")
    return out
TextClassificationTask.supervised = supervised
import train_uda
sys.exit(train_uda.main(sys.argv[1:]))
"""


def test_a_nan_on_one_process_is_skipped_by_all(model_dir, tiny_text_data, copies_file, tmp_path):  # noqa: F811
    script = tmp_path / "nan_on_rank_1.py"
    script.write_text(_NAN_ON_RANK_1.format(repo=str(REPO), scripts=str(REPO / "scripts")))
    out = tmp_path / "run"
    # torchrun; if the processes disagreed, one would wait forever in the gradient all-reduce (timeout)
    _launch("torchrun", script, tiny_config(model_dir, tiny_text_data, out, **_options(copies_file, 2)), tmp_path)
    results = json.loads((out / "results.json").read_text())
    assert results["num_processes"] == 2 and results["nonfinite_skipped_steps"] == 1
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [line for line in lines if "train/nonfinite_skipped" in line]
    assert [line["step"] for line in steps if "train/loss" in line] == [1, 2, 4, 5, 6]
    assert [line["train/nonfinite_skipped"] for line in steps] == [0, 0, 1, 1, 1, 1]


def test_two_nodes_match_two_processes_on_one_node(model_dir, tiny_text_data, copies_file, tmp_path):  # noqa: F811
    """The multi-node path: two torchrun "nodes" on this machine (--nnodes 2, one process each, the
    rendezvous on 127.0.0.1) against one torchrun node with two processes: both nodes take part,
    evaluation counts every example once, and the final weights are those of the one-node run."""
    from uda.config import save_config

    one_node, two_nodes = tmp_path / "one_node", tmp_path / "two_nodes"
    _launch("torchrun", REPO / "scripts" / "train_uda.py",
            tiny_config(model_dir, tiny_text_data, one_node, **_options(copies_file, 2)), tmp_path)
    cfg = tiny_config(model_dir, tiny_text_data, two_nodes, **_options(copies_file, 2))
    save_config(cfg, tmp_path / "nodes.yaml")
    port = _free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    nodes = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
                               "--node_rank", str(rank), "--master_addr", "127.0.0.1", "--master_port", str(port),
                               str(REPO / "scripts" / "train_uda.py"), "--task", "text_classification",
                               "--config", str(tmp_path / "nodes.yaml")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
             for rank in (0, 1)]
    outputs = [n.communicate(timeout=300) for n in nodes]
    for n, (out, err) in zip(nodes, outputs):
        assert n.returncode == 0, out[-3000:] + err[-5000:]
    results = json.loads((two_nodes / "results.json").read_text())
    ref = json.loads((one_node / "results.json").read_text())
    assert results["num_processes"] == 2
    procs = results["processes"]
    assert [p["rank"] for p in procs] == [0, 1] and procs[0]["pid"] != procs[1]["pid"]
    assert [p["examples"] for p in procs] == [{"labeled": 12, "unlabeled": 24}] * 2  # both nodes trained
    assert [h["num_examples"] for h in results["dev_history"]] == [40, 40]
    assert results["test"]["num_examples"] == 60
    preds = [json.loads(line) for line in (two_nodes / "predictions_test.jsonl").read_text().splitlines()]
    assert len({p["id"] for p in preds}) == len(preds) == 60
    for a, b in zip(training_lines(two_nodes), training_lines(one_node)):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-7)
    w2, w1 = weights(two_nodes / "model"), weights(one_node / "model")
    assert all(torch.equal(w2[k], w1[k]) for k in w1)


@pytest.mark.parametrize("method", ["freematch", "flexmatch"])
def test_two_processes_keep_the_method_state_of_one(method, model_dir, tiny_text_data, copies_file,  # noqa: F811
                                                    tmp_path):
    """A method of the FixMatch family on 2 processes x batch 2 against 1 process x batch 4: the state
    (freematch's running means, flexmatch's per-example classes, from the gathered observations) is the
    same, so the losses and weights are too."""
    from uda import checkpoint

    opts = {**_options(copies_file, 4), "uda.method": method}
    if method == "freematch":  # its fairness term is a function of each process's own batch (as in USB), not
        opts["uda.fairness_weight"] = 0  # a mean over examples: 2 x 2 examples do not give what 4 give
    one, two = tmp_path / "one", tmp_path / "two"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run(tiny_config(model_dir, tiny_text_data, one, **opts))
    finally:
        torch.set_num_threads(before)
    _launch("accelerate", REPO / "scripts" / "train_uda.py",
            tiny_config(model_dir, tiny_text_data, two, **{**opts, "train.batch_size": 2}), tmp_path)
    for a, b in zip(training_lines(two), training_lines(one)):
        for key in ("train/loss", "unsup/loss", "unsup/mask_ratio", "unsup/threshold"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), (a["step"], key)
    last = checkpoint.name_for(6)
    s2 = checkpoint.load_state(two / "checkpoints" / last)["loop"]["method"]
    s1 = checkpoint.load_state(one / "checkpoints" / last)["loop"]["method"]
    for j, state in s1["distributions"].items():
        for name, value in state.items():
            assert torch.tensor(s2["distributions"][j][name]).double().allclose(
                torch.tensor(value).double(), rtol=1e-5, atol=1e-7), (method, name)
