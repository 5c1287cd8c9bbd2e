"""The fleet: many checks in one run, beside the one-package pipeline (aotipre.api.check).

Why a package: a batch of packages (batch.py: arguments or a manifest, -j threads, reports in
order), where each must run (placement.py: does it need a GPU, which kinds run its code;
gpus.py: the visible GPUs, one lent per CUDA package), which packages a CI job takes (shard.py)
and how the shards' reports become one (merge.py), one package across several interpreters
(matrix.py), and the engines that run a batch (engines/: local threads, a Ray cluster). They
call the pipeline and each other; the pipeline's stages never import them (only the combined
verdict of many reports names a shard and a GPU, and config.py validates --gpus). The CLI calls
batch.check_packages() from above.
"""
