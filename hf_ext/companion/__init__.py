"""Companion methods of the same family: Bayesian optimization, evolution strategies, combinatorial solvers,
portfolio selection and single-index models.

Nothing here imports transformers: ``bo`` needs the ``[bo]`` extra (BoTorch); ``es`` (evolution strategies) needs
only numpy; ``combinatorial`` the ``[combinatorial]`` extra (HiGHS); ``portfolio`` the ``[portfolio]`` extra;
``single_index`` the ``[sklearn]`` extra. How each method is judged (benchmark harnesses, outside baselines, the
COCO runner, regret, statistics) is in ``evaluation``, which no method imports; the ``[es]`` extra serves its COCO
runner and pycma baselines.
"""
