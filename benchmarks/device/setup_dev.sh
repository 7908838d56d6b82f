#!/usr/bin/env bash
# Shared set-up of the device scripts (sourced): installs the wheels .dev/ carries (see
# prepare_qa_carry.sh), restores all-MiniLM-L6-v2 to fp32 in /tmp/minilm32, records the machine in
# $RES/env.txt and starts a GPU monitor. Reads PY, RES, NO_WHEELS and QUICK from the environment.
PY=${PY:-python3}
RES=${RES:-/tmp/res}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ -z "${NO_WHEELS:-}" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
fi
mkdir -p $RES /tmp/minilm32
$PY - <<'PY' || exit 4
import os, shutil, sys
import torch, transformers, datasets, accelerate, tokenizers
from safetensors.torch import load_file, save_file
sd = load_file(".dev/minilm16/model.safetensors")
sd = {k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in sd.items()}
save_file(sd, "/tmp/minilm32/model.safetensors", metadata={"format": "pt"})
for f in ["config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]:
    shutil.copy(f".dev/minilm16/{f}", "/tmp/minilm32/")
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-", "transformers", transformers.__version__,
      "datasets", datasets.__version__, "accelerate", accelerate.__version__, "tokenizers", tokenizers.__version__, flush=True)
assert torch.cuda.is_available() or os.environ.get("QUICK"), "no GPU"
PY
(nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv) > $RES/env.txt 2>&1
(nvidia-smi dmon -s u -d 15 > $RES/dmon.txt 2>&1 &)
