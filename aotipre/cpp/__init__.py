"""The C++ loader as deployments use it: aotipre's harness (harness.cpp), its worker steps and
what their records mean (torch-free; the worker builds and runs the harness)."""
