"""How the companion methods are judged, apart from the methods: one sub-package per method, mirroring its path.

``hf_ext.companion.evaluation.es`` holds the ES's benchmark harness, COCO runner and statistics,
``hf_ext.companion.evaluation.combinatorial.set_cover`` the set-cover harness and OR-Tools baseline, and so on. The
recipes and benchmarks import them; a method never does (tests/test_architecture.py), so what a user imports to
train or solve carries no benchmark code, and a harness changes without touching the method.
"""
