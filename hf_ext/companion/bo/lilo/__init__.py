"""LILO, language-in-the-loop Bayesian optimization: an LLM turns a decision maker's words into preferences for BO.

The decision maker answers questions in natural language; a language model (local transformers
or any OpenAI-compatible server) labels pairs of observed outcomes (or scores them), BoTorch's
``PairwiseGP`` turns the labels into a utility, and a batch acquisition function picks the next
points. Baselines run in the same harness: preferential BO on true comparisons, BO on the true
utility, an LLM-only optimizer and random search.
"""

from .backends import LLMBackend, OpenAIBackend, ScriptedBackend, TransformersBackend
from .config import LILOConfig
from .decision_makers import ScriptedDecisionMaker, SimulatedDecisionMaker
from .environments import ENVIRONMENTS, Environment, make_environment
from .feedback import LLMAnswerError, LLMFeedback, OracleFeedback
from .loop import LILO, METHODS, RoundResult
from .parsing import parse_json_object
from .proposers import fit_preference_model, select_pairs
from .transcript import Transcript
from .utility_functions import BetaCDFProductUtility, L1IdealUtility, PiecewiseLinearUtility

__all__ = [
    "ENVIRONMENTS",
    "LILO",
    "METHODS",
    "BetaCDFProductUtility",
    "Environment",
    "L1IdealUtility",
    "LILOConfig",
    "LLMAnswerError",
    "LLMBackend",
    "LLMFeedback",
    "OpenAIBackend",
    "OracleFeedback",
    "PiecewiseLinearUtility",
    "RoundResult",
    "ScriptedBackend",
    "ScriptedDecisionMaker",
    "SimulatedDecisionMaker",
    "Transcript",
    "TransformersBackend",
    "fit_preference_model",
    "make_environment",
    "parse_json_object",
    "select_pairs",
]
