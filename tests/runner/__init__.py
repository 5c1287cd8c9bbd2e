"""Tests of aotipre.runner."""
