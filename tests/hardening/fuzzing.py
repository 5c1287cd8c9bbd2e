"""Fuzz targets and mutation strategies shared by tests/hardening/test_fuzz.py (a fixed budget in
CI) and scripts/fuzz.py (longer runs): random mutations of real .pt2 archives and of real
wrapper.cpp texts must give a PackageInfo (and a complete report) or a clean aotipre error;
mutations of real torch.save sample-input files (opcode-level edits of data.pkl, compression
methods, byte damage) must give SampleInputs or one InputsError line."""

from __future__ import annotations

import io
import json
import pickletools
import re
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from aotipre.api import CheckOptions, check
from aotipre.foundation.errors import AotipreError, InputsError, PackageError
from aotipre.inputs.load import load_sample_inputs_bytes
from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import PackageInfo
from aotipre.pt2.wrapper import WrapperContract, parse_wrapper_cpp
from aotipre.pt2.wrapper_contract import WrapperView, contract_from_wrapper
from aotipre.report import render_report
from tests.hardening.craft import Pkl, write_members

WRAPPER_DIR = Path(__file__).resolve().parents[1] / "pt2" / "data"
ARCHIVES = ("ep_only", "both", "aoti")
"""Fixture packages whose mutations are fuzzed (pkg(name))."""

HOSTILE_NAMES = [
    "../../evil",
    "/abs",
    "a\\b",
    "C:/x",
    "",
    "pkg",
    "x/models/model.json",
    "models/model.json",
    "data/aotinductor/model/a.wrapper.cpp",
    "data/aotinductor/model/weights_config.json",
    "data/aotinductor/other/x.wrapper_metadata.json",
    "data/sample_inputs/model.pt",
    "archive_format",
    "archive_version",
    "models/zz.json",
    "é/ü",
]

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=10,
)


@dataclass
class Stats:
    """What a fuzz run saw: outcomes by kind, the slowest example, and any failure."""

    outcomes: dict[str, int] = field(default_factory=dict)
    slowest_s: float = 0.0
    slowest: str = ""

    def count(self, kind: str, took: float, what: str) -> None:
        self.outcomes[kind] = self.outcomes.get(kind, 0) + 1
        if took > self.slowest_s:
            self.slowest_s, self.slowest = took, what


# --- archive mutations ------------------------------------------------------------------------

_MEMBER_CACHE: dict[Path, list[tuple[str, bytes]]] = {}


def members_of(path: Path) -> list[tuple[str, bytes]]:
    if path not in _MEMBER_CACHE:
        with zipfile.ZipFile(path) as zf:
            _MEMBER_CACHE[path] = [(i.filename, zf.read(i)) for i in zf.infolist()]
    return list(_MEMBER_CACHE[path])


def _json_mutation(data: st.DataObject, value: Any) -> Any:
    """Replace, delete or wrap one random node of a decoded JSON document."""
    path: list[Any] = []
    node = value
    while isinstance(node, (dict, list)) and node and data.draw(st.integers(0, 3)) > 0:
        key = data.draw(
            st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node)))
        )
        path.append(key)
        node = node[key]
    action = data.draw(st.sampled_from(["replace", "delete", "wrap", "empty"]))
    new: Any
    if action == "replace":
        new = data.draw(JSON_VALUES)
    elif action == "wrap":
        new = [node]
    elif action == "empty":
        new = type(node)() if isinstance(node, (dict, list, str)) else None
    else:
        new = None
    if not path:
        return new
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    if action == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return value


def _text_mutation(data: st.DataObject, text: str) -> str:
    """Delete, duplicate or replace a span, or change a number (wrapper.cpp text)."""
    if not text:
        return data.draw(st.text(max_size=50))
    action = data.draw(st.sampled_from(["delete", "duplicate", "insert", "number", "line"]))
    a = data.draw(st.integers(0, len(text) - 1))
    b = min(len(text), a + data.draw(st.integers(0, 2000)))
    if action == "delete":
        return text[:a] + text[b:]
    if action == "duplicate":
        return text[:b] + text[a:b] * data.draw(st.integers(1, 50)) + text[b:]
    if action == "insert":
        junk = data.draw(
            st.sampled_from(
                [
                    "{",
                    "}",
                    '"',
                    'R"(',
                    ')"',
                    ";",
                    "\n",
                    "if (",
                    "input_handles[",
                    "static void check_input_0(AtenTensorHandle* input_handles) {",
                    "void AOTInductorModel::run_impl(",
                    "in_spec_ = ",
                    "\x00",
                    "\udcff",
                ]
            )
            | st.text(max_size=30)
        )
        return text[:a] + junk + text[a:]
    if action == "number":
        numbers = list(re.finditer(r"-?\d+", text))
        if not numbers:
            return text
        m = data.draw(st.sampled_from(numbers))
        new = str(data.draw(st.integers(-(2**70), 2**70)))
        return text[: m.start()] + new + text[m.end() :]
    lines = text.split("\n")
    i = data.draw(st.integers(0, len(lines) - 1))
    j = data.draw(st.integers(0, len(lines) - 1))
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def mutate_members(
    data: st.DataObject, members: list[tuple[str, bytes]]
) -> list[tuple[str, bytes]]:
    """One member-level mutation: rename, drop, duplicate, swap contents, or mutate a JSON or
    wrapper.cpp member's content."""
    action = data.draw(st.sampled_from(["rename", "drop", "dup", "swap", "json", "json", "text"]))
    i = data.draw(st.integers(0, len(members) - 1))
    name, body = members[i]
    root = name.split("/", 1)[0]
    if action == "rename":
        new = data.draw(st.sampled_from(HOSTILE_NAMES) | st.text(max_size=30))
        new = new if data.draw(st.booleans()) else f"{root}/{new}"
        if new.split("\x00")[0]:  # zipfile writes no empty name (the corpus has one, raw)
            members[i] = (new, body)
    elif action == "drop":
        del members[i]
    elif action == "dup":
        members.append(members[i])
    elif action == "swap":
        j = data.draw(st.integers(0, len(members) - 1))
        members[i], members[j] = (name, members[j][1]), (members[j][0], body)
    elif action == "json":
        targets = [k for k, (n, _) in enumerate(members) if n.endswith(".json")]
        if targets:
            k = data.draw(st.sampled_from(targets))
            n, b = members[k]
            try:
                doc = json.loads(b)
            except ValueError:  # an earlier mutation left it no JSON
                return members
            members[k] = (n, json.dumps(_json_mutation(data, doc)).encode())
    else:
        targets = [k for k, (n, _) in enumerate(members) if n.endswith((".cpp", "archive_format"))]
        if targets:
            k = data.draw(st.sampled_from(targets))
            n, b = members[k]
            text = _text_mutation(data, b.decode("utf-8", "surrogateescape"))
            members[k] = (n, text.encode("utf-8", "surrogateescape"))
    return members


def mutate_bytes(data: st.DataObject, blob: bytes) -> bytes:
    """One byte-level mutation: flips anywhere, flips in the zip directory, truncation, insertion."""
    out = bytearray(blob)
    action = data.draw(st.sampled_from(["flip", "flip_tail", "truncate", "insert"]))
    if action in ("flip", "flip_tail"):
        lo = 0 if action == "flip" else max(0, len(out) - 4096)
        for _ in range(data.draw(st.integers(1, 8))):
            at = data.draw(st.integers(lo, len(out) - 1))
            out[at] = data.draw(st.integers(0, 255))
    elif action == "truncate":
        del out[data.draw(st.integers(0, len(out) - 1)) :]
    else:
        at = data.draw(st.integers(0, len(out)))
        out[at:at] = data.draw(st.binary(min_size=1, max_size=64))
    return bytes(out)


def mutated_archive(data: st.DataObject, source: Path, folder: Path) -> Path:
    """A mutation of a real archive written to `folder`: member-level edits (re-zipped), then
    sometimes byte-level damage on top."""
    members = members_of(source)
    for _ in range(data.draw(st.integers(0, 3))):
        if members:
            members = mutate_members(data, members)
    path = folder / "fuzz.pt2"
    write_members(path, members)
    if data.draw(st.integers(0, 2)) == 0:
        path.write_bytes(mutate_bytes(data, path.read_bytes()))
    return path


# --- the properties -----------------------------------------------------------------------------


def check_archive(path: Path, stats: Stats | None = None) -> str:
    """read_package gives a PackageInfo or a PackageError (one line); a static check of the same
    file gives a Report that renders as JSON and as a table. Returns the outcome kind."""
    started = time.monotonic()
    try:
        info = read_package(path)
    except PackageError as exc:
        assert "\n" not in str(exc), str(exc)
        kind = f"package_error:{getattr(exc, 'code', '?')}"
    else:
        assert isinstance(info, PackageInfo)
        kind = "package_info"
    report = check(str(path), CheckOptions(static_only=True))
    json.loads(render_report(report, "json"))
    render_report(report, "table")
    if report.error is not None:
        assert kind.startswith("package_error") or report.findings, report.error
    if stats is not None:
        stats.count(kind, time.monotonic() - started, str(path))
    return kind


def check_wrapper(text: str, stats: Stats | None = None) -> None:
    """parse_wrapper_cpp and contract_from_wrapper never raise, whatever the text."""
    started = time.monotonic()
    contract = parse_wrapper_cpp(text)
    assert isinstance(contract, WrapperContract)
    view = contract_from_wrapper(text)
    assert isinstance(view, WrapperView)
    if stats is not None:
        stats.count(
            "recognized" if contract.recognized else "unrecognized",
            time.monotonic() - started,
            text[:80],
        )


def wrapper_texts() -> list[str]:
    return [p.read_text() for p in sorted(WRAPPER_DIR.glob("*.wrapper.cpp"))]


def fuzz_archive_example(
    data: st.DataObject, sources: list[Path], stats: Stats | None = None
) -> None:
    source = data.draw(st.sampled_from(sources))
    with tempfile.TemporaryDirectory(prefix="aotipre-fuzz-") as tmp:
        path = mutated_archive(data, source, Path(tmp))
        try:
            check_archive(path, stats)
        except AotipreError:
            raise AssertionError("an AotipreError escaped check()") from None


def fuzz_wrapper_example(data: st.DataObject, texts: list[str], stats: Stats | None = None) -> None:
    text = data.draw(st.sampled_from(texts))
    for _ in range(data.draw(st.integers(1, 4))):
        text = _text_mutation(data, text)
    check_wrapper(text, stats)


# --- sample-input files (the restricted unpickler and the zip guard) ---------------------------

INPUT_FILES = (
    "aoti_inputs",
    "aoti_inputs_transposed",
    "derived_inputs",
    "dtypes_inputs",
    "embedding_oob_inputs",
    "inputs_numpy",
)
"""Fixture torch.save files whose mutations are fuzzed (pkg(name))."""

HOSTILE_OPS = [
    b"\x85" * 2000,  # TUPLE1 x 2000: deep nesting
    b"(" * 300,  # MARKs
    b"]" * 5000,  # EMPTY_LIST flood
    b"}",
    b")",
    b"N",
    b"s",
    b"t",
    b"a",
    b"e",
    b"R",
    b"b",
    b"u",
    b"\x86",
    b"h\x00",
    b"q\x00",
    b"r\xf0\xff\xff\xff",  # LONG_BINPUT 2**32 - 16
    b"j\x07\x00\x00\x00",  # LONG_BINGET of an unset entry
    b"X\xff\xff\xff\x0f",  # BINUNICODE claiming 256 MiB
    b"\x8a\xff" + b"\x01" * 255,  # LONG1 of 255 bytes
    Pkl.glob("collections", "OrderedDict"),
    Pkl.glob("torch", "Size"),
    Pkl.glob("_codecs", "encode"),
    Pkl.glob("os", "system"),
]


def _ops(pkl: bytes) -> list[bytes]:
    """data.pkl split into its opcodes (each with its argument bytes)."""
    try:
        starts = [pos for _, _, pos in pickletools.genops(pkl)]
    except Exception:  # noqa: BLE001 - already damaged: mutate it as bytes
        return [pkl]
    ends = [*starts[1:], len(pkl)]
    return [pkl[a:b] for a, b in zip(starts, ends)]


def mutate_pickle(data: st.DataObject, pkl: bytes) -> bytes:
    """1-4 opcode-level edits: delete, duplicate a span up to 200 times, insert hostile opcodes,
    swap two, change a memo index, flip a byte."""
    ops = _ops(pkl)
    for _ in range(data.draw(st.integers(1, 4))):
        if not ops:
            break
        at = data.draw(st.integers(0, len(ops) - 1))
        action = data.draw(
            st.sampled_from(["delete", "duplicate", "insert", "swap", "memo", "flip"])
        )
        if action == "delete":
            del ops[at]
        elif action == "duplicate":
            end = data.draw(st.integers(at, min(len(ops), at + 8)))
            ops[at:at] = ops[at:end] * data.draw(st.integers(1, 200))
        elif action == "insert":
            ops[at:at] = [data.draw(st.sampled_from(HOSTILE_OPS))]
        elif action == "swap":
            other = data.draw(st.integers(0, len(ops) - 1))
            ops[at], ops[other] = ops[other], ops[at]
        elif action == "memo":
            index = data.draw(st.integers(0, 2**32 - 1))
            ops[at:at] = [data.draw(st.sampled_from([b"r", b"j"])) + index.to_bytes(4, "little")]
        else:
            op = bytearray(ops[at])
            op[data.draw(st.integers(0, len(op) - 1))] = data.draw(st.integers(0, 255))
            ops[at] = bytes(op)
    return b"".join(ops)


def mutated_inputs(data: st.DataObject, source: bytes) -> bytes:
    """A mutation of a real torch.save file: data.pkl edited at opcode level (mostly), members
    re-zipped with a random compression method, sometimes byte damage on top."""
    with zipfile.ZipFile(io.BytesIO(source)) as zf:
        members = [(i.filename, zf.read(i)) for i in zf.infolist()]
    if data.draw(st.integers(0, 3)) > 0:
        members = [(n, mutate_pickle(data, b) if n.endswith("data.pkl") else b) for n, b in members]
    method = data.draw(st.sampled_from([zipfile.ZIP_STORED] * 4 + [zipfile.ZIP_DEFLATED, 12, 14]))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, blob in members:
            zf.writestr(name, blob)
    out = buf.getvalue()
    if data.draw(st.integers(0, 2)) == 0:
        out = mutate_bytes(data, out)
    return out


_INPUT_KINDS = (
    ("would take more than", "budget"),
    ("nested more than", "depth"),
    ("nodes", "hashed"),
    ("memo", "memo"),
    ("compression method", "compression"),
    ("opcodes", "opcodes"),
    ("globals", "globals"),
    ("not a valid pickle", "bad_pickle"),
    ("cannot be unpickled", "unpickle_error"),
    ("zip", "zip"),
)


def check_inputs(blob: bytes, stats: Stats | None = None) -> str:
    """load_sample_inputs_bytes gives SampleInputs or one short InputsError line."""
    started = time.monotonic()
    try:
        load_sample_inputs_bytes(blob, "fuzz.pt")
        kind = "sample_inputs"
    except InputsError as exc:
        text = str(exc)
        assert "\n" not in text and len(text) < 4000, text[:4000]
        kind = "inputs_error:" + next((k for w, k in _INPUT_KINDS if w in text), "other")
    if stats is not None:
        stats.count(kind, time.monotonic() - started, f"{len(blob)} bytes")
    return kind


def fuzz_inputs_example(
    data: st.DataObject, sources: list[bytes], stats: Stats | None = None
) -> None:
    check_inputs(mutated_inputs(data, data.draw(st.sampled_from(sources))), stats)
