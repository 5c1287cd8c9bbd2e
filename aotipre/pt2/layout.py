"""Names of the members of a .pt2 archive (torch/csrc/export/pt2_archive_constants.h, 2.11-2.15)."""

from __future__ import annotations

ARCHIVE_FORMAT = "archive_format"
ARCHIVE_FORMAT_VALUE = "pt2"
ARCHIVE_VERSION = "archive_version"
MODELS_DIR = "models"
"""models/<name>.json: the serialized ExportedProgram."""
SAMPLE_INPUTS_DIR = "data/sample_inputs"
"""data/sample_inputs/<name>.pt: example inputs saved by torch.export.save."""
EXTRA_DIR = "extra"
"""extra/<name>: text files; torch's loader reads every one as UTF-8 (binary ones break it)."""
EXPECTED_OUTPUTS_FORMAT = "data/aotipre/{model}.expected_outputs.pt"
"""Where `aotipre bundle` keeps a model's expected outputs for its sample inputs: a folder that
torch's loaders do not read (aotipre/pt2/bundle.py)."""
TS_SAMPLE_INPUTS_SUFFIX = ".forward.sample_input.pt"
"""extra/<name>.forward.sample_input.pt: the other place sample inputs are stored (2.11+,
`TS_SAMPLE_INPUTS_FILENAME_FORMAT`); read when data/sample_inputs/<name>.pt is absent."""
WEIGHTS_DIR = "data/weights"
CONSTANTS_DIR = "data/constants"
OPAQUE_OBJ_PREFIX = "opaque_obj_"
"""data/constants/opaque_obj_<n>: a Python object that torch loads with plain `pickle.loads`
(2.13+); aotipre never unpickles it."""
CUSTOM_OBJ_PREFIX = "custom_obj_"
"""data/constants/custom_obj_<n>: a torchbind object (torch's own pickler)."""
AOTI_DIR = "data/aotinductor"
"""data/aotinductor/<name>/: the compiled AOTI code of one model."""
WRAPPER_CPP_SUFFIX = ".wrapper.cpp"
WRAPPER_METADATA_SUFFIX = "wrapper_metadata.json"
METADATA_SUFFIX = "_metadata.json"
"""`<hash>.wrapper_metadata.json` / `<hash>.kernel_metadata.json`: the metadata of a packaged
.cpp; the C++ loader parses the one beside the kernel .cpp (kernel_metadata.json) when present."""
WEIGHTS_BLOB_SUFFIX = ".wrapper_weights.blob"
"""The weights outside the .so (package_constants_on_disk_format="binary_blob")."""
AOTI_WEIGHTS_CONFIG = "weights_config.json"
"""Present when the AOTI weights live on disk instead of inside the .so."""
