"""Two CPU processes (torchrun, gloo) against one for the passages task: evaluation is sharded across
the processes and gathered, so every dev and test question is counted exactly once and the metrics
equal a one-process run's (the learning rate is ~0, so both evaluate the same weights)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from tests.conftest import REPO
from tests.qa_fixtures import tiny_qa_model_dir, tiny_squad_file  # noqa: F401 (fixtures)
from tests.test_passages_e2e import tiny_args


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(prefix, model_dir, data_file, out):
    args = tiny_args(model_dir, data_file, out)[:-6] + [
        "--train.max_steps", "2", "--train.eval_every", "2", "--train.lr", "1e-12", "--uda.lambda_u", "0",
        "--report_to", "none", "--output_dir", str(out)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", UDA_DATA_PATH="", OMP_NUM_THREADS="1")
    proc = subprocess.run([*prefix, str(REPO / "scripts" / "train_uda.py"), *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads((out / "results.json").read_text())


def test_two_processes_count_every_question_once(tiny_qa_model_dir, tiny_squad_file, tmp_path):  # noqa: F811
    one = _run([sys.executable], tiny_qa_model_dir, tiny_squad_file, tmp_path / "one")
    two = _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                str(_free_port())], tiny_qa_model_dir, tiny_squad_file, tmp_path / "two")
    assert two["num_processes"] == 2 and one["num_processes"] == 1
    assert two["test"]["num_examples"] == one["test"]["num_examples"] == 36
    assert two["dev_history"][0]["num_examples"] == 12
    for key in ("em", "f1", "passage@1", "passage@5", "em@1", "em@5", "top_f1", "NoAns_f1"):
        assert abs(two["test"][key] - one["test"][key]) < 1e-6, key
    ids = [json.loads(line)["id"] for line in (tmp_path / "two" / "predictions_test.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 36
    assert (tmp_path / "two" / "data" / "retrieval.jsonl.gz").is_file()
