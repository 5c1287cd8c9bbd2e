"""`aotipre doctor`: prove this host can compile, load and run AOTI packages (before blaming a model).

Facts (Python, torch build, CUDA, the C++ compiler and libstdc++ libraries, the directories code
is extracted to) plus a canary: a trivial model compiled, loaded and run on each device through
the same dynamic stages as `check`. `check` reuses the canary (`canary.attribute_crashes`) when a
model's load or run crashes, so a broken host is reported as such.
"""

from __future__ import annotations

from aotipre.doctor.report import DoctorReport
from aotipre.doctor.run import DoctorOptions, run_doctor

__all__ = ["DoctorOptions", "DoctorReport", "run_doctor"]
