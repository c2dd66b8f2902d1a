"""Companion methods of the same family: Bayesian optimization, combinatorial search, single-index models.

Nothing here imports transformers: ``bo`` needs the ``[bo]`` extra (BoTorch), ``single_index`` the
``[sklearn]`` extra (scikit-learn).
"""
