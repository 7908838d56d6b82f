"""Mixed precision (bf16 autocast on the CPU; fp16 with loss scaling where a GPU exists) and the
non-finite loss guard: NaN/inf steps are skipped and counted, a run of them stops training with a
message naming the last good checkpoint, and that checkpoint resumes."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

import uda.step
from tasks import get_task
from tests.trainkit import metric_lines, model_dir, run, tiny_config, training_lines, weights  # noqa: F401
from uda import checkpoint
from uda.config import ConfigError
from uda.devices import resolve_precision
from uda.train import NonFiniteLossError


# one thread makes the tiny runs fast on a busy machine, and every run of a comparison uses it
pytestmark = pytest.mark.usefixtures("one_thread")


class DtypeSpyTask:
    """The real task, recording the dtype an encoder layer computes in."""

    def __init__(self) -> None:
        self.inner, self.dtypes = get_task("text_classification"), set()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def build_model(self, cfg):
        model = self.inner.build_model(cfg)
        query = model.bert.encoder.layer[0].attention.self.query
        query.register_forward_hook(lambda mod, args, out: self.dtypes.add(out.dtype))
        return model


def test_bf16_autocast_on_cpu_keeps_losses_in_float32(model_dir, tiny_text_data, tmp_path, monkeypatch):  # noqa: F811
    seen = []
    real = uda.step.consistency_loss

    def spy(ori, aug, *args, **kwargs):
        seen.append((ori.dtype, aug.dtype))
        return real(ori, aug, *args, **kwargs)

    monkeypatch.setattr(uda.step, "consistency_loss", spy)
    monkeypatch.setattr("uda.devices.cpu_has_native_bf16", lambda: True)  # explicit bf16 on any CPU
    task = DtypeSpyTask()
    out = tmp_path / "bf16"
    results = run(tiny_config(model_dir, tiny_text_data, out, **{
        "train.mixed_precision": "bf16", "train.max_steps": 6, "train.eval_every": 3, "train.log_every": 1}), task)
    assert torch.bfloat16 in task.dtypes  # the encoder ran under bf16 autocast
    assert seen and set(seen) == {(torch.float32, torch.float32)}  # the consistency loss got float32 logits
    lines = training_lines(out)
    assert len(lines) == 6 and all(math.isfinite(v) for line in lines for v in line.values())
    assert results["mixed_precision"] == "bf16" and results["nonfinite_skipped_steps"] == 0
    assert results["test"]["num_examples"] == 60
    assert all(w.dtype == torch.float32 for w in weights(out / "model").values())  # master weights stay fp32
    print(f"bf16: losses {[round(line['train/loss'], 4) for line in lines]}, test {results['test']}")


def test_fp16_on_cpu_is_refused(model_dir, tiny_text_data, tmp_path):  # noqa: F811
    if torch.accelerator.is_available():
        pytest.skip("this machine has an accelerator; see test_fp16_with_loss_scaling_on_gpu")
    with pytest.raises(ConfigError, match="train.mixed_precision=fp16 needs a GPU"):
        run(tiny_config(model_dir, tiny_text_data, tmp_path / "fp16", **{"train.mixed_precision": "fp16"}))
    assert not (tmp_path / "fp16").exists()  # refused before anything was written


@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16 loss scaling needs a CUDA GPU")
def test_fp16_with_loss_scaling_on_gpu(model_dir, tiny_text_data, tmp_path):  # noqa: F811
    out = tmp_path / "fp16"
    results = run(tiny_config(model_dir, tiny_text_data, out, **{
        "train.mixed_precision": "fp16", "train.max_steps": 6, "train.eval_every": 3}))
    state = checkpoint.load_state(checkpoint.latest(out / "checkpoints").path)
    assert state["scaler"] is not None and state["scaler"]["scale"] > 0  # the grad scaler's state is saved
    assert results["test"]["num_examples"] == 60


class NaNTask:
    """The real task, except that the supervised loss is NaN at the steps ``nan_loss`` and the loss is
    finite but its gradient NaN at the steps ``nan_grad`` (an overflow in the backward pass)."""

    def __init__(self, nan_loss=(), nan_grad=()) -> None:
        self.inner, self.nan_loss, self.nan_grad = get_task("text_classification"), set(nan_loss), set(nan_grad)
        self.step, self.weight_sums = 0, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def supervised(self, model, batch):
        self.step += 1
        w = next(model.parameters())
        self.weight_sums.append(float(w.detach().double().sum()))
        out = self.inner.supervised(model, batch)
        loss = out.per_example_loss
        if self.step in self.nan_loss:
            loss = loss * float("nan")
        if self.step in self.nan_grad:
            loss = loss + (w - w.detach()).abs().sum().sqrt()  # value 0; gradient 0 * inf = NaN
        return dataclasses.replace(out, per_example_loss=loss)


def test_nonfinite_steps_are_skipped_and_counted(model_dir, tiny_text_data, tmp_path):  # noqa: F811
    task = NaNTask(nan_loss={3, 4}, nan_grad={6})
    out = tmp_path / "run"
    results = run(tiny_config(model_dir, tiny_text_data, out, **{
        "train.max_steps": 8, "train.eval_every": 4, "train.log_every": 1, "train.max_nonfinite_steps": 3}), task)
    assert results["nonfinite_skipped_steps"] == 3
    s = task.weight_sums  # the weights at the start of each step (1-based: s[i - 1] is step i)
    assert s[2] == s[3] == s[4]  # steps 3 and 4 changed nothing
    assert s[5] == s[6] and s[4] != s[5]  # nor did step 6; step 5 did
    lines = {line["step"]: line for line in metric_lines(out) if "train/nonfinite_skipped" in line}
    assert [lines[i]["train/nonfinite_skipped"] for i in range(1, 9)] == [0, 0, 1, 2, 2, 3, 3, 3]
    assert [i for i in lines if "train/loss" in lines[i]] == [1, 2, 5, 7, 8]  # skipped steps log no loss
    assert all(math.isfinite(v) for line in lines.values() for v in line.values())
    assert all(torch.isfinite(w).all() for w in weights(out / "model").values())


def test_repeated_nonfinite_losses_stop_and_keep_the_last_good_checkpoint(model_dir, tiny_text_data, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    options = {"train.max_steps": 12, "train.eval_every": 6, "train.log_every": 1, "checkpoint.every_steps": 2,
               "train.max_nonfinite_steps": 3}
    with pytest.raises(NonFiniteLossError) as e:
        run(tiny_config(model_dir, tiny_text_data, out, **options), NaNTask(nan_loss=range(5, 100)))
    message = str(e.value)
    assert "was NaN/inf for 3 steps in a row (steps 5-7), so training stopped" in message
    assert "the last good checkpoint is" in message and "step-00000004' (step 4)" in message
    assert "--train.lr" in message
    last = checkpoint.latest(out / "checkpoints")
    assert last.step == 4  # the save due at step 6 fell inside the run of NaN steps and was not made
    assert all(torch.isfinite(w).all() for w in weights(last.path / "model").values())
    assert not (out / "results.json").exists()
    # once the cause is fixed, the same command continues from the last good checkpoint
    results = run(tiny_config(model_dir, tiny_text_data, out, **options))
    assert results["resumed_at_steps"] == [4] and results["nonfinite_skipped_steps"] == 0
    assert [line["step"] for line in training_lines(out)] == list(range(1, 13))


def test_auto_picks_bf16_only_where_the_device_runs_it_natively():
    assert resolve_precision("auto", "cpu", native_bf16=True) == (
        "bf16", "auto: this CPU runs bfloat16 natively (AVX-512 or AMX)")
    assert resolve_precision("auto", "cpu", native_bf16=False) == ("no", "auto: this CPU has no native bfloat16, so float32")
    assert resolve_precision("auto", "cuda", native_bf16=False, cuda_bf16=True)[0] == "bf16"
    assert resolve_precision("auto", "cuda", native_bf16=True, cuda_bf16=False)[0] == "no"  # the CPU's answer is not the GPU's
    assert resolve_precision("auto", "mps", native_bf16=True)[0] == "no"
    for device, native in (("cpu", True), ("cpu", False), ("cuda", False)):
        assert resolve_precision("no", device, native)[0] == "no"
    assert resolve_precision("fp16", "cuda", native_bf16=False)[0] == "fp16"  # loss scaling, as before
    assert resolve_precision("bf16", "cpu", native_bf16=True)[0] == "bf16"
    assert resolve_precision("bf16", "cuda", native_bf16=False, cuda_bf16=True)[0] == "bf16"


def test_mixed_precision_options():
    from uda.config import build_config
    d = build_config("text_classification", None, {}).train
    assert (d.mixed_precision, d.allow_emulated_bf16) == ("no", False)  # float32 unless asked
    t = build_config("text_classification", None, {"train.mixed_precision": "auto",
                                                   "train.allow_emulated_bf16": "true"}).train
    assert (t.mixed_precision, t.allow_emulated_bf16) == ("auto", True)
    with pytest.raises(ConfigError, match="train.mixed_precision"):
        build_config("text_classification", None, {"train.mixed_precision": "fp32"})


def test_explicit_bf16_on_a_cpu_that_would_emulate_it_is_refused_unless_allowed():
    # emulated bf16 ran the IMDB recipe 12x slower than float32 on an AVX2-only CPU
    with pytest.raises(ConfigError) as e:
        resolve_precision("bf16", "cpu", native_bf16=False)
    assert "--train.mixed_precision auto" in str(e.value) and " or no" in str(e.value)
    assert "--train.allow_emulated_bf16 true" in str(e.value)
    used, reason = resolve_precision("bf16", "cpu", native_bf16=False, allow_emulated=True)
    assert used == "bf16" and "emulated" in reason
    with pytest.raises(ConfigError, match="train.mixed_precision=fp16 needs a GPU"):
        resolve_precision("fp16", "cpu", native_bf16=True, allow_emulated=True)


@pytest.mark.parametrize("native", [True, False])
def test_auto_run_records_its_choice(native, model_dir, tiny_text_data, tmp_path, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setattr("uda.devices.cpu_has_native_bf16", lambda: native)
    out = tmp_path / "run"
    results = run(tiny_config(model_dir, tiny_text_data, out, **{
        "train.mixed_precision": "auto", "train.max_steps": 2, "train.eval_every": 2, "eval.test": False}))
    used = "bf16" if native else "no"
    choice = json.loads((out / "results.json").read_text())["mixed_precision_choice"]
    assert choice == results["mixed_precision_choice"]
    assert choice["requested"] == "auto" and choice["used"] == used and choice["reason"].startswith("auto: this CPU")
    assert results["mixed_precision"] == used  # accelerate trained in what auto chose
    assert f"mixed precision: {used} ({choice['reason']})" in capsys.readouterr().out


def test_bf16_on_a_cpu_without_native_bf16_is_refused_before_the_run(model_dir, tiny_text_data, tmp_path, monkeypatch):  # noqa: F811
    if torch.accelerator.is_available():
        pytest.skip("this machine has an accelerator: bf16 runs there")
    monkeypatch.setattr("uda.devices.cpu_has_native_bf16", lambda: False)
    with pytest.raises(ConfigError, match="--train.mixed_precision auto"):
        run(tiny_config(model_dir, tiny_text_data, tmp_path / "run", **{"train.mixed_precision": "bf16"}))
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_allow_emulated_bf16_trains_in_bf16_with_a_warning(model_dir, tiny_text_data, tmp_path, monkeypatch, capsys):  # noqa: F811
    if torch.accelerator.is_available():
        pytest.skip("this machine has an accelerator: bf16 runs there natively")
    monkeypatch.setattr("uda.devices.cpu_has_native_bf16", lambda: False)
    results = run(tiny_config(model_dir, tiny_text_data, tmp_path / "run", **{
        "train.mixed_precision": "bf16", "train.allow_emulated_bf16": "true", "train.max_steps": 2,
        "train.eval_every": 2, "eval.test": False}))
    assert results["mixed_precision"] == "bf16"
    assert results["mixed_precision_choice"]["requested"] == results["mixed_precision_choice"]["used"] == "bf16"
    assert "warning: bf16 is emulated on this CPU" in capsys.readouterr().out


def test_cpu_has_native_bf16_answers_a_bool():
    from uda.devices import cpu_has_native_bf16
    assert isinstance(cpu_has_native_bf16(), bool)
