"""What every layer stands on: the two exception roots, files and streams at the edges,
aotipre's private temporary folders, the bounds of every number a user gives, typed fields of
JSON read back, and progress lines for people.

Why a package: each of these modules is imported from every layer (pt2, inputs, checks, runner,
triage, report, the fleet, the CLI) and imports nothing of aotipre outside this package (but
one lazy call: tempdirs.py asks runner/cache.py whether a cache root is safe to use), so they
are the bottom of the import graph: a change here ripples everywhere, a change elsewhere never
reaches them.
"""
