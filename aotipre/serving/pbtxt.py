"""config.pbtxt in and out: protobuf's text format with Triton's own generated ModelConfig.

The message classes are Triton's, not a copy: `tritonclient` ships `model_config.proto` compiled
(`tritonclient/grpc/model_config_pb2.py`, the .proto of triton-inference-server/common). That
module is loaded from its file, without running `tritonclient/grpc/__init__.py`, which imports
grpcio (a client library aotipre has no use for). Both come with the `serving` extra; without
it, every command that needs them says in one line how to install it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from aotipre.foundation import safeio
from aotipre.foundation.errors import UsageError

INSTALL_HINT = "install it with: pip install 'aotipre[serving]' (tritonclient, protobuf>=6.30,<7)"
MAX_CONFIG_BYTES = 1024 * 1024
"""Largest config.pbtxt read (Triton's own are a few KB; the text parser is pure Python)."""

_MODULE_FILE = ("grpc", "model_config_pb2.py")
_module: ModuleType | None = None


def model_config_pb2() -> ModuleType:
    """Triton's generated `model_config_pb2` (message `inference.ModelConfig`); UsageError with
    the install line when tritonclient or protobuf is missing or too old."""
    global _module
    if _module is not None:
        return _module
    imported = sys.modules.get("tritonclient.grpc.model_config_pb2")
    if imported is not None:  # the caller imported tritonclient.grpc itself: the same classes
        _module = imported
        return imported
    try:
        import google.protobuf  # noqa: F401

        spec = importlib.util.find_spec("tritonclient")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    path = next(
        (Path(p, *_MODULE_FILE) for p in locations if Path(p, *_MODULE_FILE).is_file()), None
    )
    if path is None:
        raise UsageError(
            "reading and writing Triton's config.pbtxt needs tritonclient and protobuf",
            hint=INSTALL_HINT,
        )
    loader_spec = importlib.util.spec_from_file_location("aotipre_triton_model_config_pb2", path)
    if loader_spec is None or loader_spec.loader is None:
        raise UsageError(f"cannot load Triton's model_config_pb2 from {path}", hint=INSTALL_HINT)
    module = importlib.util.module_from_spec(loader_spec)
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - e.g. a protobuf runtime older than the gencode
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(
            f"Triton's model_config_pb2 ({path}) does not load: {first}", hint=INSTALL_HINT
        ) from None
    _module = module
    return module


def new_config() -> Any:
    """An empty `inference.ModelConfig`."""
    return model_config_pb2().ModelConfig()


def parse_config(text: str, source: str) -> Any:
    """`text` parsed as an `inference.ModelConfig`; one UsageError line naming `source` (and
    the line and column) for anything else: bad syntax, an unknown field, a wrong value."""
    from google.protobuf import text_format

    config = new_config()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        detail = " ".join(str(exc).split())
        if len(detail) > 300:
            detail = detail[:300] + "..."
        hint = ""
        if "default_model_name" in detail:
            # the backend's README shows `default_model_name: "another_file_name.pt2"`, but
            # model_config.proto (triton-inference-server/common) names the field
            # `default_model_filename`, which is what the backend reads (backend_model_instance.cc)
            hint = "the field is default_model_filename (model_config.proto)"
        raise UsageError(
            f"{source}: not a Triton model configuration: {detail}", hint=hint
        ) from None
    except RecursionError:
        raise UsageError(f"{source}: not a Triton model configuration: nested too deeply") from None
    return config


def read_config(path: str | os.PathLike[str]) -> Any:
    """Read and parse a config.pbtxt through safeio (a regular UTF-8 file of at most
    MAX_CONFIG_BYTES: a FIFO, a directory, a device or a binary file is one line)."""
    model_config_pb2()  # the install line before anything is read
    name = os.fspath(path)
    text = safeio.read_text(name, f"serving config {name}", MAX_CONFIG_BYTES)
    return parse_config(text, name)


def format_config(config: Any) -> str:
    """The text format of a ModelConfig, as Triton's docs write it (`dims: [-1, 8]`)."""
    from google.protobuf import text_format

    return text_format.MessageToString(config, use_short_repeated_primitives=True)


def enum_name(enum: Any, value: int) -> str:
    """The name of a value of a model_config.proto enum (`DataType`, 11 -> `TYPE_FP32`); a
    number no name has (proto3 enums are open: `data_type: 99` parses) as the number."""
    try:
        return str(enum.Name(value))
    except ValueError:
        return str(value)
