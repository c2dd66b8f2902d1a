"""How the combinatorial methods are judged: one sub-package per method of :mod:`hf_ext.companion.combinatorial`."""
