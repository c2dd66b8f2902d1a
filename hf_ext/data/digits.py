"""scikit-learn's digits: 1797 handwritten digits of 8x8 pixels, shipped with scikit-learn (nothing downloads).

The small classification problem of the optimizer recipes and benchmarks (``symmetry_curvature``, ``dsgd``,
``benchmarks/gradient_smoothing.py``), with :func:`hf_ext.models.digits_mlp`; how to split it is each experiment's.
"""

import torch


def digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The images as float32 rows of 64 pixels scaled to [0, 1] (scikit-learn stores 0 to 16), and their labels.

    Needs the ``sklearn`` extra.
    """
    from sklearn.datasets import load_digits  # the extra, imported only when the data is asked for

    data = load_digits()
    return torch.tensor(data.data, dtype=torch.float32) / 16, torch.tensor(data.target)
