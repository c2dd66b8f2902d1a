"""Combinatorial solvers of the family, each in its own sub-package."""
