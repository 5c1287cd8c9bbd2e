"""Name the zip archives that users ship as `.pt2` but that are not pt2 packages."""

from __future__ import annotations


def describe_foreign_zip(names: list[str], root: str) -> str | None:
    """What a zip without `archive_format` is, from its member names (torch 2.11-2.13 writers):
    None when it is nothing aotipre recognizes."""
    members = set(names)
    if f"{root}/data.pkl" not in members:
        return None
    if f"{root}/constants.pkl" in members or any(n.startswith(f"{root}/code/") for n in names):
        return (
            "a TorchScript archive (torch.jit.save), not a .pt2 package: aoti_load_package "
            "cannot load it (torch.jit.load does); export the model with torch.export.export "
            "and compile it with torch._inductor.aoti_compile_and_package"
        )
    return (
        "a torch.save file (a pickle in a zip: tensors, a state_dict or a pickled module), not "
        "a .pt2 package: aoti_load_package cannot load it; export the model with "
        "torch.export.export and compile it with torch._inductor.aoti_compile_and_package"
    )
