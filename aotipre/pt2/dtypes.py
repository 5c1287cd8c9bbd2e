"""Torch-free dtype tables: every numbering a .pt2 archive or an AOTI log uses, mapped to torch names.

Canonical names are torch's (`float32`, `int64`, `bfloat16`, ...). Three numberings meet here:
the export schema enum (`torch/_export/serde/schema.py: ScalarType`, FLOAT=7), c10's
`ScalarType` (runtime check messages: `expected: 6(at::kFloat)`), and the legacy storage
class names of a pickled `.pt` file (`FloatStorage`).
"""

from __future__ import annotations

# torch/_export/serde/schema.py: ScalarType (the numbers in models/<name>.json)
EXPORT_SCHEMA_DTYPES: dict[int, str] = {
    1: "uint8",
    2: "int8",
    3: "int16",
    4: "int32",
    5: "int64",
    6: "float16",
    7: "float32",
    8: "float64",
    9: "complex32",
    10: "complex64",
    11: "complex128",
    12: "bool",
    13: "bfloat16",
    28: "uint16",
    29: "float8_e4m3fn",
    30: "float8_e5m2",
    31: "float8_e4m3fnuz",
    32: "float8_e5m2fnuz",
    33: "float8_e8m0fnu",
    34: "uint32",
    35: "uint64",
}

# c10/core/ScalarType.h (the numbers in AOTI runtime check messages and in aoti_torch_dtype_*)
C10_DTYPES: dict[int, str] = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    7: "float64",
    8: "complex32",
    9: "complex64",
    10: "complex128",
    11: "bool",
    12: "qint8",
    13: "quint8",
    14: "qint32",
    15: "bfloat16",
    16: "quint4x2",
    17: "quint2x4",
    23: "float8_e5m2",
    24: "float8_e4m3fn",
    25: "float8_e5m2fnuz",
    26: "float8_e4m3fnuz",
    27: "uint16",
    28: "uint32",
    29: "uint64",
    44: "float8_e8m0fnu",
}

# Legacy typed-storage class names in a pickled .pt file (torch.FloatStorage, ...)
STORAGE_DTYPES: dict[str, str] = {
    "ByteStorage": "uint8",
    "CharStorage": "int8",
    "ShortStorage": "int16",
    "IntStorage": "int32",
    "LongStorage": "int64",
    "HalfStorage": "float16",
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
    "BoolStorage": "bool",
    "BFloat16Storage": "bfloat16",
    "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32",
    "UntypedStorage": "uint8",
}

# Short aliases torch accepts (torch.float == torch.float32, ...)
ALIASES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "chalf": "complex32",
}

ALL_DTYPES: frozenset[str] = frozenset(EXPORT_SCHEMA_DTYPES.values()) | frozenset(
    C10_DTYPES.values()
)

ITEMSIZE: dict[str, int] = {
    "uint8": 1,
    "int8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "complex32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
    "qint8": 1,
    "quint8": 1,
    "qint32": 4,
}


def canonical(name: str) -> str:
    """`torch.float` / `float` / `Float` -> `float32`; unknown names pass through lower-cased."""
    name = name.strip()
    if name.startswith("torch."):
        name = name[len("torch.") :]
    name = ALIASES.get(name, name)
    return name


def is_floating(name: str) -> bool:
    return name.startswith(("float", "bfloat", "complex"))


def is_integral(name: str) -> bool:
    return name.startswith(("int", "uint")) or name == "bool"
