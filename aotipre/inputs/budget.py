"""The restricted unpickler's budget: replays a pickle's opcodes before anything is built and
refuses what would allocate too much or nest too deep (see `Simulation`)."""

from __future__ import annotations

import _compat_pickle

from aotipre.foundation.errors import InputsError

MAX_DEPTH = 100
"""Containers nested deeper than this (or a cyclic structure) are refused."""
MAX_ALLOC_BYTES = 64 * 1024 * 1024
"""The unpickler's budget: what building the sample inputs may allocate (estimated per object,
container slot, memo slot, stack slot and string byte, from the opcodes, before anything is
built). Sample inputs are a few tensors: a few KB."""
MAX_HASHED_NODES = 100_000
"""Most nodes of a tuple that is hashed (a dict key) or passed to a call, counted expanded."""
MAX_MEMO = 1_000_000
"""Most memo entries a data.pkl may define (its indices must also be dense, as pickle writes them)."""
_OBJECT_COST = 64
"""Estimated bytes of one Python object (a float, a small tuple, an empty list)."""
_SLOT_COST = 16
"""Estimated bytes of one reference in a list, a tuple, the memo or the unpickler's stack."""
_ENTRY_COST = 104
"""Estimated bytes of one dict entry (key, value, hash, index, growth)."""
_OPCODE_COST = 8
MAX_OPCODES = 2_000_000
"""Most opcodes a data.pkl may hold, whatever they do: a bound on the scan's time (pickletools
reads 0.5-3 us per opcode). A sample input is ~25 opcodes per tensor."""
"""Charged for every opcode: a bound on the work of reading it too."""
_LEAF_RESULTS = frozenset(
    (
        "torch.Size",
        "torch.device",
        "_codecs.encode",
        "torch._tensor._rebuild_from_type_v2",
        "torch.tensor._rebuild_from_type_v2",
        "torch._export.serde.serialize._reconstruct_fake_tensor",
    )
)
"""Allowed globals whose call returns a leaf (a tensor, a device, bytes) or a flat tuple of ints."""
_COPY_COST = {
    "collections.OrderedDict": _ENTRY_COST,
    "_codecs.encode": 1,
    "torch._export.serde.serialize._reconstruct_fake_tensor": 32,  # json.loads of its bytes
}
"""Bytes a call of this global may allocate per unit of its arguments' size (entries or chars)."""


class _Cell:
    """What one stack or memo entry of the pickle stands for, as far as the budget is concerned.

    Shared like the objects themselves (a memo GET pushes the same cell), so a list appended to
    after it was memoized has one depth and one size wherever it is referenced.
    """

    __slots__ = ("depth", "size", "inner", "name", "weight", "heaviest")

    def __init__(self, depth: int = 0, size: int = 0, inner: int = 0, name: str = "") -> None:
        self.weight = 1
        """For a tuple: its nodes counted as hashing and comparing visit them (a shared item
        counts each time: a DAG of tuples 60 deep hashes 2**60 nodes); 1 for anything else."""
        self.heaviest = 1
        """The largest `weight` of a tuple reachable from this value when it was built."""
        self.depth = depth
        """Nesting depth of the value (0: a leaf)."""
        self.size = size
        """Entries of a container, characters of a string."""
        self.inner = inner
        """For a tuple: the sum of its items' sizes (what a call with these arguments copies)."""
        self.name = name
        """For a global: its `module.name`; for a string: the string when short."""


_MARK = _Cell(-1)


class Simulation:
    """Replays a protocol-2 pickle's opcodes on `_Cell`s: charges every allocation the real
    unpickler would make to one budget (`MAX_ALLOC_BYTES`), validates memo indices, and bounds
    the nesting depth (`MAX_DEPTH`) of every value before it is built. CPython hashes a dict key
    recursively in C, without a recursion check: a key nested 100,000 deep crashes the process,
    so depth must be refused before the unpickler ever builds it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.stack: list[_Cell] = []
        self.marks: list[int] = []
        self.memo: dict[int, _Cell] = {}
        self.spent = 0

    def charge(self, nbytes: int) -> None:
        self.spent += nbytes
        if self.spent > MAX_ALLOC_BYTES:
            raise InputsError(
                f"{self.source}: sample inputs would take more than "
                f"{MAX_ALLOC_BYTES // (1024 * 1024)} MiB to unpickle (too many objects or too "
                "large strings)",
                "sample inputs should be a few tensors, not a dataset",
            )

    def push(self, cell: _Cell) -> None:
        if cell.depth > MAX_DEPTH:
            raise InputsError(
                f"{self.source}: sample inputs are nested more than {MAX_DEPTH} levels deep"
            )
        self.charge(_SLOT_COST)
        self.stack.append(cell)

    def pop(self) -> _Cell:
        if not self.stack or self.stack[-1] is _MARK:
            raise InputsError(f"{self.source}: data.pkl is not a valid pickle (stack underflow)")
        return self.stack.pop()

    def pop_mark(self) -> list[_Cell]:
        if not self.marks:
            raise InputsError(f"{self.source}: data.pkl is not a valid pickle (no MARK)")
        at = self.marks.pop()
        items = self.stack[at + 1 :]
        if len(self.stack) <= at or self.stack[at] is not _MARK or _MARK in items:
            raise InputsError(f"{self.source}: data.pkl is not a valid pickle (bad MARK)")
        del self.stack[at:]
        return items

    def top(self) -> _Cell:
        if not self.stack or self.stack[-1] is _MARK:
            raise InputsError(f"{self.source}: data.pkl is not a valid pickle (stack underflow)")
        return self.stack[-1]

    def hashed(self, cell: _Cell) -> None:
        """`cell`'s value is about to be hashed or compared (a dict key, a call's arguments)."""
        if cell.heaviest > MAX_HASHED_NODES:
            raise InputsError(
                f"{self.source}: sample inputs hold a tuple of more than {MAX_HASHED_NODES} "
                "nodes (shared references counted each time) where it would be hashed"
            )

    def grow(self, container: _Cell, items: list[_Cell], per_item: int) -> None:
        """`items` were added to `container` (APPEND(S), SETITEM(S))."""
        self.charge(per_item * len(items))
        container.heaviest = max([container.heaviest, *(c.heaviest for c in items)])
        container.size += len(items)
        deepest = max((c.depth for c in items), default=-1)
        container.depth = max(container.depth, deepest + 1)
        if container.depth > MAX_DEPTH:
            raise InputsError(
                f"{self.source}: sample inputs are nested more than {MAX_DEPTH} levels deep "
                "(or contain a cycle)"
            )

    def tuple_of(self, items: list[_Cell]) -> _Cell:
        self.charge(_OBJECT_COST + _SLOT_COST * len(items))
        depth = max((c.depth for c in items), default=-1) + 1
        cell = _Cell(depth, len(items), sum(c.size for c in items))
        cell.weight = min(1 + sum(c.weight for c in items), 2 * MAX_HASHED_NODES)
        cell.heaviest = max([cell.weight, *(c.heaviest for c in items)])
        return cell

    def step(self, name: str, arg: object) -> None:
        self.charge(_OPCODE_COST)
        if name in ("PROTO", "STOP", "FRAME"):
            return
        if name == "MARK":
            self.marks.append(len(self.stack))
            self.charge(_SLOT_COST)
            self.stack.append(_MARK)
        elif name in ("EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET"):
            self.charge(_OBJECT_COST)
            self.push(_Cell(1))
        elif name == "EMPTY_TUPLE":
            self.push(_Cell(1))
        elif name == "TUPLE":
            self.push(self.tuple_of(self.pop_mark()))
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            n = int(name[-1])
            items = [self.pop() for _ in range(n)][::-1]
            self.push(self.tuple_of(items))
        elif name == "APPEND":
            item = self.pop()
            self.grow(self.top(), [item], _SLOT_COST)
        elif name == "APPENDS":
            items = self.pop_mark()
            self.grow(self.top(), items, _SLOT_COST)
        elif name == "SETITEM":
            value, key = self.pop(), self.pop()
            self.hashed(key)
            self.grow(self.top(), [key, value], _ENTRY_COST // 2)
        elif name == "SETITEMS":
            items = self.pop_mark()
            if len(items) % 2:
                raise InputsError(f"{self.source}: data.pkl is not a valid pickle (SETITEMS)")
            for key in items[::2]:
                self.hashed(key)
            self.grow(self.top(), items, _ENTRY_COST // 2)
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            index = int(arg)  # type: ignore[call-overload]
            if index > len(self.memo):
                raise InputsError(
                    f"{self.source}: data.pkl memo index {index} skips ahead of the "
                    f"{len(self.memo)} defined (pickle writes them in order)"
                )
            if index == len(self.memo):
                self.charge(_SLOT_COST * 2)
            self.memo[index] = self.top()
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            cell = self.memo.get(int(arg))  # type: ignore[call-overload]
            if cell is None:
                raise InputsError(f"{self.source}: data.pkl reads memo entry {arg}, never set")
            self.push(cell)
        elif name == "GLOBAL":
            module, _, attr = str(arg).partition(" ")
            self.charge(_OBJECT_COST)
            self.push(_Cell(0, name=python3_name(module, attr)))
        elif name in ("REDUCE", "NEWOBJ"):
            args, func = self.pop(), self.pop()
            self.hashed(args)  # e.g. OrderedDict(pairs) hashes every key
            per_unit = _COPY_COST.get(func.name, 1)
            self.charge(_OBJECT_COST + per_unit * (args.inner + args.size))
            depth = 1 if func.name in _LEAF_RESULTS else max(args.depth - 1, 1)
            self.push(_Cell(depth, args.inner))
        elif name == "BUILD":
            state = self.pop()
            self.hashed(state)
            self.grow(self.top(), [state], _ENTRY_COST * max(state.size, 1))
        elif name == "BINPERSID":
            self.pop()
            self.charge(_OBJECT_COST)
            self.push(_Cell(0))
        elif isinstance(arg, (str, bytes)):
            size = len(arg)
            wide = isinstance(arg, str) and not arg.isascii()
            self.charge(_OBJECT_COST + (4 * size if wide else size))
            self.push(_Cell(0, size, name=arg if isinstance(arg, str) and size <= 200 else ""))
        else:  # None, True, False, ints, floats
            self.charge(_OBJECT_COST)
            self.push(_Cell(0))


def python3_name(module: str, name: str) -> str:
    """The name pickle resolves: a protocol-2 `__builtin__.eval` is `builtins.eval`."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    return f"{module}.{name}"
