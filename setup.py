from setuptools import find_packages, setup

setup(
    name="uda-consistency",
    version="0.1.0",
    description="Faithful Unsupervised Data Augmentation (consistency training) for transformers",
    packages=find_packages(include=["uda", "uda.*", "augment", "augment.*", "tasks", "tasks.*"]),
    python_requires=">=3.10",
    # torch is deliberately not listed: install torch==2.13.0 (or your CUDA build) first; see README.
    install_requires=[
        "transformers>=4.45",
        "datasets>=2.19",
        "accelerate>=0.34",
        "tensorboard>=2.15",
        "tqdm",
        "pyyaml",
        "numpy",
        "safetensors",
        "sentencepiece",
    ],
    extras_require={"test": ["pytest"]},
)
