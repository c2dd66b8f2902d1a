"""Companion methods of the same family: Bayesian optimization, evolution strategies, combinatorial solvers,
portfolio selection and single-index models.

Nothing here imports transformers: ``bo`` needs the ``[bo]`` extra (BoTorch); ``es`` (evolution strategies) needs
only numpy, and the ``[es]`` extra for COCO and the pycma baselines; ``combinatorial`` the ``[combinatorial]`` extra
(HiGHS); ``portfolio`` the ``[portfolio]`` extra; ``single_index`` the ``[sklearn]`` extra.
"""
