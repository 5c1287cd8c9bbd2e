"""The release diff: what changed between two .pt2 packages (OLD in production, NEW the candidate)
and whether each change breaks OLD's callers, read statically (no torch, no code loaded)."""
