"""The plots of :mod:`hf_ext.plotting` as the recipes and benchmarks draw them: every series named as the papers
spell the methods, optimizers and settings they compare (``"mezo"`` is drawn as "MeZO", not "MEZO").

The spellings live here, beside the code that runs the methods; the core's plotting knows no method.
"""

from functools import partial

from hf_ext import plotting

# How method, optimizer and algorithm ids are written in legends, titles and tables: the spelling of the papers.
DISPLAY_NAMES = {
    "agzo": "AGZO",
    "mezo": "MeZO",
    "sgd": "SGD",
    "adamw": "AdamW",
    "dpo": "DPO",
    "simpo": "SimPO",
    "gp_ucb": "GP-UCB",
    "rcgp_ucb_stable": "RCGP-UCB (stable)",
    "rcgp_ucb_adaptive": "RCGP-UCB (adaptive)",
    "gp_ts": "GP-TS",
    "rcgp_ts": "RCGP-TS",
    "relevance_pursuit_ucb": "relevance pursuit + UCB",
    "sgd_momentum": "SGD+momentum",
    "sps": "SPS",
    "ngn": "NGN",
    "ngn_m": "NGN-M",
    "rep3d": "Rep3D",
    "fixed_prior": "fixed prior",
    "no_mask": "no mask",
    "small_kernel": "small kernel",
}


def display_name(key: str) -> str:
    """How ``key`` is written: its :data:`DISPLAY_NAMES` entry, or ``key`` itself if it has none."""
    return DISPLAY_NAMES.get(key, key)


plot_bands = partial(plotting.plot_bands, names=DISPLAY_NAMES)
plot_curves = partial(plotting.plot_curves, names=DISPLAY_NAMES)
plot_grouped_bars = partial(plotting.plot_grouped_bars, names=DISPLAY_NAMES)
plot_histograms = partial(plotting.plot_histograms, names=DISPLAY_NAMES)
plot_label_slices = partial(plotting.plot_label_slices, names=DISPLAY_NAMES)
plot_line_panels = partial(plotting.plot_line_panels, names=DISPLAY_NAMES)
plot_log_sweeps = partial(plotting.plot_log_sweeps, names=DISPLAY_NAMES)
plot_seed_curves = partial(plotting.plot_seed_curves, names=DISPLAY_NAMES)
