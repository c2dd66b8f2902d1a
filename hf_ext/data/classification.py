"""Real-text classification: standard-library docstrings labelled by their package family."""

import random
from collections import defaultdict

from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

from .stdlib_text import stdlib_docstrings

# Distinct topics, each with 120+ docstrings of 40+ characters in CPython 3.11.
FAMILIES = ("asyncio", "email", "tkinter", "xml", "logging", "multiprocessing", "unittest", "http")


def docstring_classification(num_classes: int = 4, validation_fraction: float = 0.2, seed: int = 0) -> DatasetDict:
    """Balanced train/validation splits with columns ``text`` and ``label`` (a ``ClassLabel``).

    Classes are the first ``num_classes`` of :data:`FAMILIES`; every class keeps as many
    docstrings as the smallest one has, chosen with ``seed``.
    """
    if not 2 <= num_classes <= len(FAMILIES):
        raise ValueError(f"docstring_classification: `num_classes` must be in 2..{len(FAMILIES)}, got {num_classes}")
    if not 0 < validation_fraction < 1:
        raise ValueError(
            f"docstring_classification: `validation_fraction` must be in (0, 1), got {validation_fraction}"
        )
    names = FAMILIES[:num_classes]
    by_family: dict[str, list[str]] = defaultdict(list)
    for doc in stdlib_docstrings():
        if doc.family in names:
            by_family[doc.family].append(doc.text)
    # Some docstrings repeat verbatim (overrides, aliases); keep one copy so no text is in both splits.
    unique = {name: list(dict.fromkeys(by_family[name])) for name in names}
    per_class = min(len(unique[name]) for name in names)
    if per_class < 10:
        raise RuntimeError(f"too few standard-library docstrings for classes {names}: {per_class} per class")
    rng = random.Random(f"docstrings-{num_classes}-{seed}")
    num_validation = max(1, round(per_class * validation_fraction))
    splits: dict[str, dict[str, list]] = {s: {"text": [], "label": []} for s in ("train", "validation")}
    for label, name in enumerate(names):
        texts = rng.sample(unique[name], per_class)
        for split, chunk in (("validation", texts[:num_validation]), ("train", texts[num_validation:])):
            splits[split]["text"].extend(chunk)
            splits[split]["label"].extend([label] * len(chunk))
    features = Features({"text": Value("string"), "label": ClassLabel(names=list(names))})
    return DatasetDict(
        {split: Dataset.from_dict(rows, features=features).shuffle(seed=seed) for split, rows in splits.items()}
    )
