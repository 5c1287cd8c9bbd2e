"""The adversarial corpus: hostile packages and input files, each built here (torch-free, from
the real fixture packages or from raw bytes) with the exit code and finding codes that
`aotipre check --static-only` must answer with."""

from __future__ import annotations

import os
import pickle
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.build_fixtures import deflated_zeros
from tests.hardening.craft import (
    EvalsOnLoad,
    ExecutesOnLoad,
    Pkl,
    RawEntry,
    edit_json,
    many_empty_members,
    raw_zip,
    read_members,
    replace_member,
    rewrite,
    torch_save_zip,
    write_members,
)

GiB = 1 << 30
MiB = 1 << 20
MARKER = "PWNED"
"""A file a hostile pickle would create (in the case folder) if it were ever executed."""


@dataclass(frozen=True)
class Sources:
    """Real fixture packages the cases are derived from."""

    ep_only: Path
    """TinyMLP ExportedProgram, x float32 [s77 1..32, s27 2..64, 8], stored sample inputs."""
    both: Path
    aoti: Path


Build = Callable[[Path, Sources], list[str]]
"""Writes the case's files into a folder; returns the arguments after `aotipre check`."""


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    build: Build
    exit_code: int
    codes: tuple[str, ...] = ()
    """Finding codes the JSON report must hold (others may appear too)."""
    absent: tuple[str, ...] = ()
    """Finding codes the report must not hold."""
    unreadable: bool = False
    """Needs file modes to bite (root without CAP_DAC_OVERRIDE, via setpriv)."""


CASES: list[Case] = []


def case(
    what: str,
    exit_code: int,
    codes: tuple[str, ...] = (),
    *,
    absent: tuple[str, ...] = (),
    unreadable: bool = False,
) -> Callable[[Build], Build]:
    def register(build: Build) -> Build:
        name = build.__name__.removeprefix("build_")
        CASES.append(Case(name, what, build, exit_code, codes, absent, unreadable))
        return build

    return register


def _pt2(root: str = "pkg", **extra: bytes) -> list[RawEntry]:
    """archive_format, archive_version and `extra` members (`name=data`, under root)."""
    entries = [
        RawEntry(f"{root}/archive_format".encode(), b"pt2"),
        RawEntry(f"{root}/archive_version".encode(), b"0"),
    ]
    entries += [RawEntry(f"{root}/{k}".encode(), v) for k, v in extra.items()]
    return entries


def _write(path: Path, data: bytes) -> list[str]:
    path.write_bytes(data)
    return [path.name]


def _ep_member(src: Sources, suffix: str) -> bytes:
    return next(data for name, data in read_members(src.ep_only) if name.endswith(suffix))


# --- zip bombs ----------------------------------------------------------------------------------


@case("a member whose real deflate stream inflates to 8 GiB (8 MB on disk)", 2, ("AOT007",))
def build_bomb_8gib_member(d: Path, s: Sources) -> list[str]:
    members = [RawEntry(n.encode(), b) for n, b in read_members(s.ep_only)]
    root = members[0].name.split(b"/")[0]
    bomb = RawEntry(
        root + b"/data/bomb.bin", deflated_zeros(8 * GiB), zipfile.ZIP_DEFLATED, 8 * GiB, 0
    )
    return _write(d / "bomb.pt2", raw_zip([*members, bomb]))


@case("a stored member whose header claims 2 TiB", 2, ("AOT007",))
def build_forged_2tib_member(d: Path, s: Sources) -> list[str]:
    forged = RawEntry(b"pkg/data/weights/w", b"x" * 100, size=2 << 40, compress_size=100)
    return _write(d / "forged.pt2", raw_zip([*_pt2(), forged]))


@case(
    "a header that declares 1 MiB over a stream of 1 GiB: reads stop at 1 MiB",
    0,
    absent=("AOT007", "AOT008"),
)
def build_bomb_lying_small_header(d: Path, s: Sources) -> list[str]:
    members = [RawEntry(n.encode(), b) for n, b in read_members(s.ep_only)]
    root = members[0].name.split(b"/")[0]
    liar = RawEntry(
        root + b"/data/extra.bin",
        deflated_zeros(GiB),
        zipfile.ZIP_DEFLATED,
        size=MiB,
        crc=zlib.crc32(bytes(MiB)),
    )
    return _write(d / "liar.pt2", raw_zip([*members, liar]))


@case("512 compressed members of 1 MiB each: 512 MiB in all from 0.5 MB", 2, ("AOT007",))
def build_bomb_many_compressed_members(d: Path, s: Sources) -> list[str]:
    stream = deflated_zeros(MiB)
    crc = zlib.crc32(bytes(MiB))
    parts = [
        RawEntry(b"pkg/data/p%04d" % i, stream, zipfile.ZIP_DEFLATED, MiB, crc) for i in range(512)
    ]
    return _write(d / "many_bombs.pt2", raw_zip([*_pt2(), *parts]))


@case("400,000 empty members (a 24 MB central directory)", 2, ("AOT007",))
def build_many_tiny_members(d: Path, s: Sources) -> list[str]:
    return _write(d / "tiny.pt2", many_empty_members(400_000))


@case("an end record declaring a 1 GiB central directory", 2, ("AOT007",))
def build_forged_central_directory_size(d: Path, s: Sources) -> list[str]:
    return _write(d / "cd.pt2", raw_zip(_pt2(), forged_cd_size=GiB))


# --- overlapping and duplicate members -------------------------------------------------------


@case("two directory entries, two names, one local header", 2, ("AOT007",))
def build_overlap_shared_local_header(d: Path, s: Sources) -> list[str]:
    entries = _pt2(**{"models/model.json": _ep_member(s, "models/model.json")})
    entries.append(RawEntry(b"pkg/data/weights/w0", b"", points_at=2))
    return _write(d / "overlap.pt2", raw_zip(entries))


@case("one name twice, both entries at the same local header", 2, ("AOT003",))
def build_duplicate_shared_local_header(d: Path, s: Sources) -> list[str]:
    entries = _pt2(**{"models/model.json": _ep_member(s, "models/model.json")})
    entries.append(RawEntry(b"pkg/models/model.json", b"", points_at=2))
    return _write(d / "dup.pt2", raw_zip(entries))


@case("a stored member whose data quote a second member (quoted overlap)", 2, ("AOT007",))
def build_overlap_quoted(d: Path, s: Sources) -> list[str]:
    head = _pt2()
    inner = raw_zip([RawEntry(b"pkg/data/inner", b"y" * 1000)])
    inner_record = inner[: inner.find(b"PK\x01\x02")]
    outer = RawEntry(b"pkg/data/outer", inner_record)
    outer_at = sum(30 + len(e.name) + len(e.data) for e in head)
    quoted = RawEntry(b"pkg/data/inner", b"y" * 1000, offset=outer_at + 30 + len(outer.name))
    return _write(d / "quoted.pt2", raw_zip([*head, outer, quoted]))


@case("a member flagged as encrypted", 2, ("AOT004",))
def build_encrypted_member(d: Path, s: Sources) -> list[str]:
    data = bytearray(raw_zip([*_pt2(), RawEntry(b"pkg/models/model.json", b"{}")]))
    record = data.rfind(b"PK\x01\x02")
    data[record + 8] |= 0x1  # general-purpose flag bit 0 in the directory record
    return _write(d / "encrypted.pt2", bytes(data))


@case("the same member name written twice", 2, ("AOT003",))
def build_duplicate_names(d: Path, s: Sources) -> list[str]:
    members = read_members(s.ep_only)
    fmt = next(m for m in members if m[0].endswith("/archive_format"))
    return [write_members(d / "dup2.pt2", [*members, fmt]).name]


# --- member names -------------------------------------------------------------------------------


def _named(name: bytes, **kw: Any) -> Build:
    def build(d: Path, s: Sources) -> list[str]:
        return _write(d / "named.pt2", raw_zip([*_pt2(), RawEntry(name, b"x", **kw)]))

    return build


for _name, _raw, _kw in [
    ("name_dotdot", b"pkg/../../evil", {}),
    ("name_absolute", b"/etc/cron.d/evil", {}),
    ("name_backslash", b"pkg\\..\\..\\evil", {}),
    ("name_nul", b"pkg/models/model.json\x00/../../../evil", {}),
    ("name_drive_letter", b"C:/Windows/evil", {}),
    ("name_symlink", b"pkg/link", {"create_system": 3, "external_attr": 0o120777 << 16}),
    ("name_empty", b"", {}),
    ("name_newline", b"pkg/models/a\nb.json", {}),
    ("name_terminal_escape", b"pkg/\x1b]0;pwned\x07\x1b[2J", {}),
]:
    _build = _named(_raw, **_kw)
    _build.__name__ = f"build_{_name}"
    case(f"a member named {_raw!r}" + (" (a symlink)" if _kw else ""), 2, ("AOT003",))(_build)


@case("members under two root folders", 2, ("AOT004",))
def build_two_roots(d: Path, s: Sources) -> list[str]:
    return _write(d / "roots.pt2", raw_zip([*_pt2(), *_pt2("other")]))


@case("a member outside any root folder", 2, ("AOT004",))
def build_loose_member(d: Path, s: Sources) -> list[str]:
    return _write(d / "loose.pt2", raw_zip([*_pt2(), RawEntry(b"archive_format", b"pt2")]))


@case("a valid zip with no members", 2, ("AOT004",))
def build_empty_zip(d: Path, s: Sources) -> list[str]:
    return _write(d / "empty_zip.pt2", raw_zip([]))


# --- archive_format / archive_version ----------------------------------------------------------


@case("a valid zip whose archive_format is 'torchscript'", 2, ("AOT004",))
def build_wrong_archive_format(d: Path, s: Sources) -> list[str]:
    edit = replace_member("/archive_format", b"torchscript")
    return [rewrite(s.ep_only, d / "fmt.pt2", edit).name]


@case("archive_format of 2 MB", 2, ("AOT007",))
def build_huge_archive_format(d: Path, s: Sources) -> list[str]:
    edit = replace_member("/archive_format", b"pt2" * 700_000)
    return [rewrite(s.ep_only, d / "fmt_big.pt2", edit).name]


@case("archive_version 99", 2, ("AOT005",))
def build_archive_version_99(d: Path, s: Sources) -> list[str]:
    return [rewrite(s.ep_only, d / "v99.pt2", replace_member("/archive_version", b"99")).name]


@case("no archive_version member", 2, ("AOT005",))
def build_archive_version_missing(d: Path, s: Sources) -> list[str]:
    return [rewrite(s.ep_only, d / "nov.pt2", replace_member("/archive_version", None)).name]


# --- not a zip, unreadable ------------------------------------------------------------------------


@case("an empty file", 2, ("AOT002",))
def build_empty_file(d: Path, s: Sources) -> list[str]:
    return _write(d / "empty.pt2", b"")


@case("random bytes", 2, ("AOT002",))
def build_random_bytes(d: Path, s: Sources) -> list[str]:
    return _write(d / "random.pt2", os.urandom(4096))


@case("the first half of a real package", 2, ("AOT002",))
def build_truncated(d: Path, s: Sources) -> list[str]:
    data = s.both.read_bytes()
    return _write(d / "half.pt2", data[: len(data) // 2])


@case("a directory instead of a file", 2, ("AOT001",))
def build_directory(d: Path, s: Sources) -> list[str]:
    (d / "dir.pt2").mkdir()
    return ["dir.pt2"]


@case("a named pipe nobody writes to (must not block)", 2, ("AOT001",))
def build_fifo(d: Path, s: Sources) -> list[str]:
    os.mkfifo(d / "fifo.pt2")
    return ["fifo.pt2"]


@case("a symbolic link loop", 2, ("AOT001",))
def build_symlink_loop(d: Path, s: Sources) -> list[str]:
    os.symlink("loop_b.pt2", d / "loop_a.pt2")
    os.symlink("loop_a.pt2", d / "loop_b.pt2")
    return ["loop_a.pt2"]


@case("a package without read permission", 2, ("AOT001",), unreadable=True)
def build_unreadable_package(d: Path, s: Sources) -> list[str]:
    path = d / "noread.pt2"
    path.write_bytes(s.ep_only.read_bytes())
    path.chmod(0)
    return [path.name]


@case("a member whose bytes were damaged (CRC mismatch)", 1, ("AOT008",))
def build_corrupt_member(d: Path, s: Sources) -> list[str]:
    data = bytearray(s.both.read_bytes())
    at = data.find(b"\x7fELF") + 4096
    data[at : at + 4] = bytes(b ^ 0xFF for b in data[at : at + 4])
    return _write(d / "crc.pt2", bytes(data))


# --- models/*.json of the wrong shape -------------------------------------------------------


def _model_json(change: Callable[[Any], Any]) -> Build:
    def build(d: Path, s: Sources) -> list[str]:
        return [rewrite(s.ep_only, d / "shape.pt2", edit_json("models/model.json", change)).name]

    return build


def _set(path: str, value: Any) -> Callable[[Any], Any]:
    """Set a '/'-separated path (list items by index) in the model JSON."""

    def change(data: Any) -> Any:
        keys = path.split("/")
        node = data
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
        return data

    return change


def _first_tensor(change: Callable[[dict[str, Any]], None]) -> Callable[[Any], Any]:
    def apply(data: Any) -> Any:
        values = data["graph_module"]["graph"]["tensor_values"]
        name = data["graph_module"]["signature"]["input_specs"][-1]["user_input"]["arg"][
            "as_tensor"
        ]["name"]
        change(values[name])
        return data

    return apply


def _nest(depth: int) -> Any:
    node: Any = []
    for _ in range(depth):
        node = [node]
    return node


def _deep_in_spec(data: Any) -> Any:
    for entry in data["graph_module"]["module_call_graph"]:
        if entry.get("fqn") == "":
            spec: Any = {"type": None, "context": None, "children_spec": []}
            for _ in range(300):
                spec = {"type": "builtins.tuple", "context": "null", "children_spec": [spec]}
            entry["signature"]["in_spec"] = __import__("json").dumps([1, spec])
    return data


def _in_spec(value: Any) -> Callable[[Any], Any]:
    def change(data: Any) -> Any:
        for entry in data["graph_module"]["module_call_graph"]:
            if entry.get("fqn") == "":
                entry["signature"]["in_spec"] = value
        return data

    return change


_SHAPES: list[tuple[str, str, Callable[[Any], Any], int, tuple[str, ...]]] = [
    ("json_top_level_list", "a list at the top", lambda d: [d], 2, ("AOT006",)),
    ("json_top_level_number", "a number at the top", lambda d: 42, 2, ("AOT006",)),
    ("json_empty_object", "{}", lambda d: {}, 2, ("AOT006",)),
    ("json_graph_module_list", "graph_module a list", _set("graph_module", [1]), 2, ("AOT006",)),
    (
        "json_signature_missing",
        "no signature",
        lambda d: {**d, "graph_module": {"graph": d["graph_module"]["graph"]}},
        2,
        ("AOT006",),
    ),
    (
        "json_input_specs_object",
        "input_specs an object",
        _set("graph_module/signature/input_specs", {"a": 1}),
        2,
        ("AOT006",),
    ),
    (
        "json_user_input_list",
        "a user_input that is a list",
        _set("graph_module/signature/input_specs", [{"user_input": [1, 2]}]),
        2,
        ("AOT006",),
    ),
    (
        "json_output_spec_list",
        "a user_output that is a list",
        _set("graph_module/signature/output_specs", [{"user_output": [1]}]),
        2,
        ("AOT006",),
    ),
    (
        "json_size_string",
        "a size as_int 'abc'",
        _first_tensor(lambda t: t.__setitem__("sizes", [{"as_int": "abc"}])),
        2,
        ("AOT006",),
    ),
    (
        "json_size_expr_list",
        "a size as_expr that is a list",
        _first_tensor(lambda t: t.__setitem__("sizes", [{"as_expr": [1]}])),
        2,
        ("AOT006",),
    ),
    (
        "json_device_type_list",
        "a tensor device that is a list (read as cpu)",
        _first_tensor(lambda t: t.__setitem__("device", [1])),
        0,
        (),
    ),
    (
        "json_range_constraints_list",
        "range_constraints a list",
        _set("range_constraints", [1, 2]),
        2,
        ("AOT006",),
    ),
    (
        "json_call_signature_list",
        "the module call signature a list",
        lambda d: _set(
            "graph_module/module_call_graph",
            [{"fqn": "", "signature": [1]}],
        )(d),
        2,
        ("AOT006",),
    ),
    ("json_in_spec_not_json", "in_spec not JSON", _in_spec("[1, {"), 2, ("AOT006",)),
    ("json_in_spec_300_deep", "in_spec nested 300 deep", _deep_in_spec, 2, ("AOT006",)),
    (
        "json_huge_static_dim",
        "a static dim of 2**200",
        _first_tensor(lambda t: t["sizes"].__setitem__(2, {"as_int": 2**200})),
        1,
        ("AOT302",),
    ),
    (
        "json_huge_range",
        "range bounds of -(2**300) and 2**300",
        lambda d: {
            **d,
            "range_constraints": {
                k: {"min_val": -(2**300), "max_val": 2**300} for k in d["range_constraints"]
            },
        },
        0,
        (),
    ),
    (
        "json_nan_range",
        "range bounds NaN and Infinity",
        lambda d: {
            **d,
            "range_constraints": {
                k: {"min_val": float("nan"), "max_val": float("inf")}
                for k in d["range_constraints"]
            },
        },
        0,
        (),
    ),
    (
        "json_unknown_device",
        "tensors on device 'quantum'",
        _first_tensor(lambda t: t.__setitem__("device", {"type": "quantum"})),
        0,
        ("AOT014",),
    ),
]

for _name, _what, _change, _exit, _codes in _SHAPES:
    _build = _model_json(_change)
    _build.__name__ = f"build_{_name}"
    case(f"models/model.json: {_what}", _exit, _codes)(_build)


@case("models/model.json: an array nested 50,000 deep under an unused key", 2, ("AOT006",))
def build_json_deep_value(d: Path, s: Sources) -> list[str]:
    text = _ep_member(s, "models/model.json")
    deep = b"[" * 50_000 + b"]" * 50_000
    text = text.replace(b'"schema_version": {', b'"extra": ' + deep + b', "schema_version": {', 1)
    return [rewrite(s.ep_only, d / "deep.pt2", replace_member("models/model.json", text)).name]


@case("models/model.json: a 5,000-digit integer (not JSON Python reads)", 2, ("AOT006",))
def build_json_giant_int_literal(d: Path, s: Sources) -> list[str]:
    text = _ep_member(s, "models/model.json")
    text = text.replace(
        b'"schema_version": {', b'"big": ' + b"9" * 5000 + b', "schema_version": {', 1
    )
    assert b"9" * 5000 in text
    return [rewrite(s.ep_only, d / "bigint.pt2", replace_member("models/model.json", text)).name]


@case("models/model.json: 20 MB of [{},{},...] (a memory amplifier)", 2, ("AOT007",))
def build_json_dense_containers(d: Path, s: Sources) -> list[str]:
    text = b"[" + b"{}," * (7 * MiB) + b"{}]"
    return [rewrite(s.ep_only, d / "dense.pt2", replace_member("models/model.json", text)).name]


# --- AOTI metadata and wrapper.cpp ----------------------------------------------------------


@case("wrapper_metadata.json is a list", 2, ("AOT006",))
def build_metadata_list(d: Path, s: Sources) -> list[str]:
    edit = replace_member("wrapper_metadata.json", b"[1, 2, 3]")
    return [rewrite(s.aoti, d / "meta.pt2", edit).name]


@case("wrapper_metadata.json names device 'quantum'", 0, ("AOT014",))
def build_metadata_unknown_device(d: Path, s: Sources) -> list[str]:
    edit = edit_json("wrapper_metadata.json", lambda m: {**m, "AOTI_DEVICE_KEY": "quantum"})
    return [rewrite(s.aoti, d / "meta_dev.pt2", edit).name]


@case("wrapper_metadata.json with nested and huge values", 0)
def build_metadata_odd_values(d: Path, s: Sources) -> list[str]:
    edit = edit_json(
        "wrapper_metadata.json",
        lambda m: {**m, "AOTI_CPU_ISA": [1, {"a": None}], "x": _nest(500), "n": 2**4000},
    )
    return [rewrite(s.aoti, d / "meta_odd.pt2", edit).name]


@case("no wrapper.cpp (only the .so)", 0, ("AOT012",))
def build_wrapper_absent(d: Path, s: Sources) -> list[str]:
    return [rewrite(s.aoti, d / "nowrap.pt2", replace_member(".wrapper.cpp", None)).name]


@case("an empty wrapper.cpp", 0, ("AOT012",))
def build_wrapper_empty(d: Path, s: Sources) -> list[str]:
    return [rewrite(s.aoti, d / "empty_wrap.pt2", replace_member(".wrapper.cpp", b"")).name]


def _wrapper_text(s: Sources) -> str:
    return next(b for n, b in read_members(s.aoti) if n.endswith(".wrapper.cpp")).decode()


@case("a wrapper.cpp whose check conditions do not parse", 0)
def build_wrapper_garbled_checks(d: Path, s: Sources) -> list[str]:
    text = _wrapper_text(s).replace("_size[", "_size( [").replace(" > ", " >>= ")
    edit = replace_member(".wrapper.cpp", text.encode())
    return [rewrite(s.aoti, d / "garbled.pt2", edit).name]


@case("a wrapper.cpp whose checks contradict their messages and each other", 0)
def build_wrapper_misleading(d: Path, s: Sources) -> list[str]:
    text = _wrapper_text(s)
    text = text.replace("> 128L", "> 5L").replace("< 2L", "< 9999L")
    text += "\nstatic void check_input_0(AtenTensorHandle* input_handles) {\n"
    text += "    ConstantHandle arg7_1 = ConstantHandle(input_handles[7]);\n"
    text += "    if (arg7_1_size[99] > -5L) {\n"
    edit = replace_member(".wrapper.cpp", text.encode())
    return [rewrite(s.aoti, d / "misleading.pt2", edit).name]


@case("a wrapper.cpp that is a Python file", 0, ("AOT012",))
def build_wrapper_foreign(d: Path, s: Sources) -> list[str]:
    edit = replace_member(".wrapper.cpp", b"import os\nos.system('echo hi')\n" * 100)
    return [rewrite(s.aoti, d / "foreign.pt2", edit).name]


@case("a wrapper.cpp of 1 MiB random bytes", 0, ("AOT012",))
def build_wrapper_binary(d: Path, s: Sources) -> list[str]:
    edit = replace_member(".wrapper.cpp", os.urandom(MiB))
    return [rewrite(s.aoti, d / "binary.pt2", edit).name]


@case("a wrapper.cpp of 8 MB: 130,000 check functions (quadratic before)", 0)
def build_wrapper_many_check_functions(d: Path, s: Sources) -> list[str]:
    text = "static void check_input_0(AtenTensorHandle* input_handles) {\n" * 130_000
    edit = replace_member(".wrapper.cpp", text.encode())
    return [rewrite(s.aoti, d / "checks.pt2", edit).name]


@case("a wrapper.cpp of 8 MB: unterminated in_spec_ raw strings (quadratic before)", 0)
def build_wrapper_unterminated_specs(d: Path, s: Sources) -> list[str]:
    edit = replace_member(".wrapper.cpp", b'in_spec_ = R"(' * 600_000)
    return [rewrite(s.aoti, d / "specs.pt2", edit).name]


@case("a wrapper.cpp of 16 MB: one identifier inside a check function (slow regex before)", 0)
def build_wrapper_long_word(d: Path, s: Sources) -> list[str]:
    text = b"static void check_input_0(AtenTensorHandle* input_handles) {\n"
    text += b"    auto arg0_1 = input_handles[0];\n" + b"a" * (16 * MiB)
    edit = replace_member(".wrapper.cpp", text)
    return [rewrite(s.aoti, d / "word.pt2", edit).name]


# --- sample inputs --------------------------------------------------------------------------------


def _inputs(name: str, data: bytes) -> Build:
    def build(d: Path, s: Sources) -> list[str]:
        (d / name).write_bytes(data)
        return [str(s.ep_only), "--inputs", name]

    return build


def _x(
    size: tuple[int, ...], stride: tuple[int, ...] | None = None, numel: int | None = None
) -> bytes:
    """`((x,), {})` with one float32 tensor x; its storage member declares `numel` floats."""
    if stride is None:
        stride = tuple(int(_prod(size[i + 1 :])) for i in range(len(size)))
    n = _prod(size) if numel is None else numel
    return Pkl.args_kwargs(Pkl.tensor(size, stride, n))


def _prod(xs: tuple[int, ...]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def _pt(pkl: bytes, storage: RawEntry | None = None) -> bytes:
    return torch_save_zip(pkl, {"0": storage} if storage is not None else None)


def _hostile_pickle(payload: object) -> bytes:
    return _pt(pickle.dumps(((payload,), {}), protocol=2))


_TOUCH = f"touch {MARKER}"
_INPUT_CASES: list[tuple[str, str, bytes, int, tuple[str, ...]]] = [
    (
        "inputs_os_system",
        "a pickle calling os.system (must never run)",
        _hostile_pickle(ExecutesOnLoad(_TOUCH)),
        2,
        ("AOT021",),
    ),
    (
        "inputs_eval",
        "a pickle calling builtins.eval (must never run)",
        _hostile_pickle(EvalsOnLoad(f"open({MARKER!r}, 'w').close()")),
        2,
        ("AOT021",),
    ),
    (
        "inputs_stack_global",
        "a protocol-4 pickle reaching os.system through STACK_GLOBAL",
        _pt(pickle.dumps(((ExecutesOnLoad(_TOUCH),), {}), protocol=4)),
        2,
        ("AOT021",),
    ),
    (
        "inputs_nested_100000",
        "lists nested 100,000 deep",
        _pt(Pkl.dump(b"]" * 100_000 + b"a" * 99_999)),
        2,
        ("AOT020",),
    ),
    (
        "inputs_two_million_leaves",
        "a flat list of 2,000,000 ints",
        _pt(Pkl.dump(b"](" + Pkl.integer(7) * 2_000_000 + b"e")),
        2,
        ("AOT020",),
    ),
    (
        "inputs_zero_size",
        "x of shape [0, 0, 8]",
        _pt(_x((0, 0, 8)), RawEntry(b"archive/data/0", b"")),
        1,
        ("AOT303",),
    ),
    (
        "inputs_2_pow_40_elements",
        "x of shape [2**20, 2**17, 8] (2**40 elements) over a deflated storage declared 4 TiB "
        "(refused by the zip guard as a bomb, like a package member)",
        _pt(
            _x((2**20, 2**17, 8)),
            RawEntry(b"archive/data/0", deflated_zeros(MiB), zipfile.ZIP_DEFLATED, 4 << 40, 0),
        ),
        2,
        ("AOT020",),
    ),
    (
        "inputs_storage_past_eof",
        "a stored storage member claiming 2**42 bytes in a small file",
        _pt(
            _x((2, 4, 8)),
            RawEntry(b"archive/data/0", b"\0" * 256, size=1 << 42, compress_size=1 << 42),
        ),
        2,
        ("AOT020",),
    ),
    (
        "inputs_expanded_2_pow_62",
        "x of shape [2**62, 2, 8] with stride 0 over 64 bytes",
        _pt(_x((2**62, 2, 8), (0, 8, 1), 16), RawEntry(b"archive/data/0", b"\0" * 64)),
        1,
        ("AOT304",),
    ),
    (
        "inputs_data_pkl_bomb",
        "data.pkl that inflates to 1 GiB",
        raw_zip([RawEntry(b"archive/data.pkl", deflated_zeros(GiB), zipfile.ZIP_DEFLATED, GiB, 0)]),
        2,
        ("AOT020",),
    ),
]

for _name, _what, _data, _exit, _codes in _INPUT_CASES:
    _build = _inputs(f"{_name}.pt", _data)
    _build.__name__ = f"build_{_name}"
    case(f"--inputs: {_what}", _exit, _codes)(_build)


@case("--inputs: x nested in 90 tuples (under the nesting limit)", 1, ("AOT104",))
def build_inputs_nested_90(d: Path, s: Sources) -> list[str]:
    x = Pkl.tensor((2, 4, 8), (32, 8, 1), 64)
    nested = b"(" * 90 + x + b"t" * 90
    pkl = Pkl.dump(Pkl.tup(Pkl.tup(nested), Pkl.EMPTY_DICT))
    (d / "nested.pt").write_bytes(_pt(pkl, RawEntry(b"archive/data/0", b"\0" * 256)))
    return [str(s.ep_only), "--inputs", "nested.pt"]


@case("--inputs: a file without read permission", 2, ("AOT020",), unreadable=True)
def build_inputs_unreadable(d: Path, s: Sources) -> list[str]:
    path = d / "noread.pt"
    path.write_bytes(_pt(_x((2, 4, 8)), RawEntry(b"archive/data/0", b"\0" * 256)))
    path.chmod(0)
    return [str(s.ep_only), "--inputs", path.name]


@case("--inputs: a named pipe (must not block)", 2, ("AOT020",))
def build_inputs_fifo(d: Path, s: Sources) -> list[str]:
    os.mkfifo(d / "fifo.pt")
    return [str(s.ep_only), "--inputs", "fifo.pt"]


@case("--inputs: a .pt2 package instead of a torch.save file", 2, ("AOT020",))
def build_inputs_is_a_package(d: Path, s: Sources) -> list[str]:
    return [str(s.ep_only), "--inputs", str(s.ep_only)]


# exit 1 since issue 30: torch.export.load retries such a member with weights_only=False (it runs),
# so the package itself is refused (AOT081); aotipre still never unpickles it
@case("stored sample inputs: a pickle calling os.system", 1, ("AOT020", "AOT081"))
def build_stored_inputs_hostile(d: Path, s: Sources) -> list[str]:
    edit = replace_member("sample_inputs/model.pt", _hostile_pickle(ExecutesOnLoad(_TOUCH)))
    return [rewrite(s.ep_only, d / "stored_evil.pt2", edit).name]


# exit 1 since issue 30: a member aotipre cannot scan counts as one torch would unpickle (AOT081)
@case("stored sample inputs: a 100 MiB member (more than aotipre reads)", 1, ("AOT020", "AOT081"))
def build_stored_inputs_oversized(d: Path, s: Sources) -> list[str]:
    members = [RawEntry(n.encode(), b) for n, b in read_members(s.ep_only)]
    big = next(m for m in members if m.name.endswith(b"sample_inputs/model.pt"))
    big.data, big.method = deflated_zeros(100 * MiB), zipfile.ZIP_DEFLATED
    big.size, big.crc = 100 * MiB, _zeros_crc(100)
    return _write(d / "stored_big.pt2", raw_zip(members))


def _zeros_crc(mib: int) -> int:
    crc, block = 0, bytes(MiB)
    for _ in range(mib):
        crc = zlib.crc32(block, crc)
    return crc
