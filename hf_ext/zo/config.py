"""Configuration of zeroth-order fine-tuning: MeZO (isotropic) and AGZO (activation subspace)."""

from dataclasses import dataclass, field
from typing import ClassVar

from .._validation import check_finite_fields

ESTIMATORS = ("two_point", "one_point")
OTHER_PARAMS = ("isotropic", "frozen")


@dataclass
class ZOConfig:
    """Settings shared by the zeroth-order methods; use :class:`MeZOConfig` or :class:`AGZOConfig`.

    Targeted linear maps (``nn.Linear`` and GPT-2 ``Conv1D`` weights, MoE routers and expert tensors) get the
    method's perturbation; every other trainable parameter (biases, norms, embeddings) follows ``other_params``.
    """

    method: ClassVar[str] = ""

    eps: float = field(default=1e-3, metadata={"help": "Perturbation size: losses are taken at theta +/- eps * Z."})
    num_perturbations: int = field(
        default=1, metadata={"help": "Perturbations per step (q); their estimates are averaged."}
    )
    estimator: str = field(
        default="two_point",
        metadata={
            "help": "'two_point': g = (L(theta+eps Z) - L(theta-eps Z)) / (2 eps). 'one_point': g = (L(theta+eps Z) "
            "- L(theta)) / eps, one forward at theta shared by the q perturbations."
        },
    )
    target_modules: str | list[str] = field(
        default="all-linear",
        metadata={
            "help": "Modules whose linear maps get the method's perturbation, as in PEFT: 'all-linear' (every "
            "trainable nn.Linear and GPT-2 Conv1D except the output embedding, and every MoE router and expert "
            "tensor), a list of names matched as dotted suffixes, or a regex string matched against the full module "
            "name. A matched module contributes the trainable linear layers, routers and expert tensors inside it "
            "(e.g. a PEFT LoRA layer its adapters)."
        },
    )
    other_params: str = field(
        default="isotropic",
        metadata={"help": "Other trainable parameters: 'isotropic' (MeZO-style Gaussian noise) or 'frozen'."},
    )
    weight_decay: float = field(
        default=0.0,
        metadata={"help": "Decoupled weight decay on updated weights (not biases or norms): theta -= lr * wd * theta."},
    )

    def __post_init__(self):
        check_finite_fields(self)
        if not self.eps > 0:
            raise ValueError(f"{type(self).__name__}: `eps` must be > 0, got {self.eps}")
        if not (isinstance(self.num_perturbations, int) and self.num_perturbations >= 1):
            raise ValueError(
                f"{type(self).__name__}: `num_perturbations` must be an integer >= 1, got {self.num_perturbations}"
            )
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"{type(self).__name__}: `estimator` must be one of {ESTIMATORS}, got {self.estimator!r}")
        if self.other_params not in OTHER_PARAMS:
            raise ValueError(
                f"{type(self).__name__}: `other_params` must be one of {OTHER_PARAMS}, got {self.other_params!r}"
            )
        if self.weight_decay < 0:
            raise ValueError(f"{type(self).__name__}: `weight_decay` must be >= 0, got {self.weight_decay}")
        if not isinstance(self.target_modules, str) and (
            not isinstance(self.target_modules, list | tuple)
            or not self.target_modules
            or not all(isinstance(name, str) for name in self.target_modules)
        ):
            raise ValueError(
                f"{type(self).__name__}: `target_modules` must be 'all-linear', a regex string or a non-empty list "
                f"of module names, got {self.target_modules!r}"
            )


@dataclass
class MeZOConfig(ZOConfig):
    """MeZO: isotropic Gaussian perturbation of every trainable parameter (the baseline)."""

    method: ClassVar[str] = "mezo"


@dataclass
class AGZOConfig(ZOConfig):
    """AGZO: each targeted weight is perturbed by ``Z = N U^T / sqrt(r)`` with ``U`` an orthonormal
    basis of the layer's input activations (for a MoE expert, of the tokens routed to it), found on
    the fly during the forward pass."""

    method: ClassVar[str] = "agzo"

    other_params: str = field(
        default="frozen",
        metadata={"help": "Other trainable parameters: 'isotropic' (MeZO-style Gaussian noise) or 'frozen'."},
    )
    rank: int = field(
        default=8,
        metadata={
            "help": "Subspace rank r per layer (capped at the layer's in_features). Smaller r aligns each estimate "
            "better with the gradient (cosine ~ sqrt(in_features / r) x the captured fraction), larger r spreads the "
            "updates over more activation directions; r=8 trained MiniLM best in recipes/agzo_finetune.py."
        },
    )
    power_iterations: int = field(
        default=2, metadata={"help": "Power iterations of the randomized range finder on A^T A."}
    )
    max_activation_rows: int = field(
        default=1024,
        metadata={"help": "At most this many activation rows (tokens) per layer feed the range finder, evenly spaced."},
    )
    subspace_refresh_interval: int = field(
        default=1, metadata={"help": "Recompute the subspaces every this many optimizer steps (1: every step)."}
    )
    share_subspaces: bool = field(
        default=True,
        metadata={
            "help": "Layers fed the very same input tensor (q/k/v, gate/up) share one range finder and so one basis "
            "(4 range finders per Llama block instead of 7). False gives each layer its own sketch; both were measured "
            "side by side in docs/zo.md."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        for name, low in (
            ("rank", 1),
            ("power_iterations", 0),
            ("max_activation_rows", 1),
            ("subspace_refresh_interval", 1),
        ):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= low):
                raise ValueError(f"AGZOConfig: `{name}` must be an integer >= {low}, got {value!r}")
