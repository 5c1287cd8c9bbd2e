"""Names of the members of a .pt2 archive (torch/export/pt2_archive/constants.py, as of 2.11-2.13)."""

from __future__ import annotations

ARCHIVE_FORMAT = "archive_format"
ARCHIVE_FORMAT_VALUE = "pt2"
ARCHIVE_VERSION = "archive_version"
MODELS_DIR = "models"
"""models/<name>.json: the serialized ExportedProgram."""
SAMPLE_INPUTS_DIR = "data/sample_inputs"
"""data/sample_inputs/<name>.pt: example inputs saved by torch.export.save."""
WEIGHTS_DIR = "data/weights"
CONSTANTS_DIR = "data/constants"
AOTI_DIR = "data/aotinductor"
"""data/aotinductor/<name>/: the compiled AOTI code of one model."""
WRAPPER_CPP_SUFFIX = ".wrapper.cpp"
WRAPPER_METADATA_SUFFIX = "wrapper_metadata.json"
AOTI_WEIGHTS_CONFIG = "weights_config.json"
"""Present when the AOTI weights live on disk instead of inside the .so."""
