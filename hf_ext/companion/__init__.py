"""Companion methods of the same family: Bayesian optimization, evolution strategies, single-index models.

Nothing here imports transformers: ``bo`` needs the ``[bo]`` extra (BoTorch); ``es`` (evolution strategies) needs
only numpy, and the ``[es]`` extra for COCO and the pycma baselines; ``single_index`` the ``[sklearn]`` extra.
"""
