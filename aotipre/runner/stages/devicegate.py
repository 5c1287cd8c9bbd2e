"""Before any worker starts: can the requested device run this model at all?

Two facts decide it without importing torch: the device type the package's AOTI code was
compiled for (a cpu .so cannot run on cuda, and with no ExportedProgram there is nothing to
compile for the requested device), and whether this host offers the device (no NVIDIA driver,
or a CPU-only torch build). A real deployment there cannot run the model, so the answer is an
error finding plus stages skipped with the reason, never a load that "passes" on a device the
code was not built for followed by an ERROR without a finding.
"""

from __future__ import annotations

from dataclasses import dataclass

from aotipre.pt2.spec import ModelInfo


@dataclass(frozen=True)
class DeviceRefusal:
    code: str
    short: str
    """The reason in a few words, for the stages' detail (the finding has the whole story)."""
    message: str
    hint: str
    expected: str | None
    actual: str | None


def refuse_device(
    model: ModelInfo, device: str, device_type: str, *, check_host: bool
) -> DeviceRefusal | None:
    """Why `device` cannot run `model` here, or None. `check_host`: also ask this machine
    (False for a fake worker, which stands in for its own host)."""
    code_device = (model.aoti.device_type or "cpu").split(":")[0] if model.aoti else None
    if code_device is not None and code_device != device_type and not model.has_exported_program:
        return DeviceRefusal(
            "AOT406",
            f"its AOTI code is for {code_device} only (AOT406)",
            f"model '{model.name}' has AOTI code for {code_device} only and no ExportedProgram "
            f"to compile for {device_type}: --device {device} cannot run it (aoti_load_package "
            f"on {device_type} would load {code_device} code that cannot take {device_type} "
            "tensors)",
            f"run it with --device {code_device}, or compile the model for {device_type} "
            "(aoti_compile_and_package with the inputs on that device)",
            code_device,
            device_type,
        )
    if device_type != "cuda" or not check_host:
        return None
    from aotipre.environment.host import detect_local

    host = detect_local(probe_cuda=True)
    if "cuda" not in host.device_types:
        return DeviceRefusal(
            "AOT401",
            "this host has no CUDA GPU (AOT401)",
            f"--device {device}: this host has no CUDA GPU (no NVIDIA driver found), so "
            f"model '{model.name}' cannot run on {device_type} here; nothing was run",
            "run the check on a CUDA host, or with --device cpu for a cpu package",
            "cuda",
            ",".join(sorted(host.device_types)),
        )
    if host.torch is not None and host.torch.version.endswith("+cpu"):
        return DeviceRefusal(
            "AOT512",
            f"torch {host.torch.version} is a CPU-only build (AOT512)",
            f"--device {device}: the installed torch {host.torch.version} is a CPU-only "
            f"build, so model '{model.name}' cannot run on {device_type} here; nothing was run",
            "install a CUDA build of torch",
            "cuda",
            host.torch.version,
        )
    return None
