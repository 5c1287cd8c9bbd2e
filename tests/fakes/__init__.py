"""Fake worker scripts that crash, hang, abort or spew on demand, to test process isolation."""
