"""Synthetic 3D segmentation volumes: organ-like blobs in noise, with bias fields and class imbalance.

Each volume holds one blob per organ class, painted in order (a later organ covers an earlier
one where they overlap): an ellipsoid of random size, orientation and position whose surface is
wobbled by low-frequency sinusoids. The image is a background, each organ's intensity (jittered
per volume), a smooth multiplicative bias field and Gaussian noise, standardised per volume.
``liver`` and ``kidney`` share one intensity, so telling them apart takes their size and shape,
which a large receptive field sees and a 3x3x3 one does not; ``lesion`` is small (rare voxels).
Deterministic by seed: volume ``i`` of split ``s`` depends only on (seed, s, i, size).
"""

from dataclasses import dataclass

import numpy as np
from datasets import Array3D, Array4D, Dataset, DatasetDict, Features


@dataclass(frozen=True)
class Organ:
    name: str
    radii: tuple[tuple[float, float], ...]  # (low, high) of each semi-axis, in units of the half side
    intensity: float


ORGANS = (
    Organ("liver", ((0.50, 0.70), (0.40, 0.55), (0.35, 0.45)), 1.0),
    Organ("kidney", ((0.15, 0.22), (0.15, 0.22), (0.35, 0.50)), 1.0),
    Organ("lesion", ((0.12, 0.18), (0.12, 0.18), (0.12, 0.18)), 0.45),
)
BACKGROUND = "background"
BACKGROUND_INTENSITY = 0.2
NOISE = 0.2
SPLITS = ("train", "validation")


def class_names(num_classes: int = len(ORGANS) + 1) -> list[str]:
    """Label names of a data set with ``num_classes`` classes: the background, then the first organs."""
    return [BACKGROUND, *(organ.name for organ in ORGANS[: num_classes - 1])]


def _smooth_field(rng: np.random.Generator, coords: np.ndarray, waves: int, amplitude: float) -> np.ndarray:
    """A sum of ``waves`` random plane waves of 1-2 periods across the volume, scaled to ``amplitude``."""
    field = np.zeros(coords.shape[:-1], dtype=np.float32)
    for _ in range(waves):
        direction = rng.normal(size=3)
        frequency = rng.uniform(0.5, 1.0) * np.pi
        field += np.sin(frequency * coords @ (direction / np.linalg.norm(direction)) + rng.uniform(0, 2 * np.pi))
    return amplitude * field / waves


def _volume(rng: np.random.Generator, size: int, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    axis = np.linspace(-1, 1, size, dtype=np.float32)
    coords = np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), axis=-1)
    labels = np.zeros((size, size, size), dtype=np.int64)
    image = np.full(labels.shape, BACKGROUND_INTENSITY, dtype=np.float32)
    for label, organ in enumerate(ORGANS[: num_classes - 1], start=1):
        radii = np.array([rng.uniform(low, high) for low, high in organ.radii], dtype=np.float32)
        rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        centre = rng.uniform(-0.45, 0.45, size=3)
        local = (coords - centre) @ rotation.astype(np.float32)
        inside = ((local / radii) ** 2).sum(-1) <= 1 + _smooth_field(rng, coords, waves=3, amplitude=0.3)
        labels[inside] = label
        image[inside] = organ.intensity * rng.uniform(0.85, 1.15)
    image += _smooth_field(rng, coords, waves=4, amplitude=0.1)  # texture
    image *= np.exp(_smooth_field(rng, coords, waves=2, amplitude=0.3))  # bias field
    image += rng.normal(0, NOISE, size=image.shape).astype(np.float32)
    image = (image - image.mean()) / image.std()
    return image[None], labels


def synthetic_volumes(num_volumes: int, size: int = 32, num_classes: int = 4, seed: int = 0, split: str = "train"):
    """``num_volumes`` volumes as a ``Dataset`` with ``pixel_values`` (1, size^3, float32) and ``labels`` (size^3).

    Rows come back as torch tensors (``set_format("torch")``), ready for the ``Trainer``.
    """
    if isinstance(num_volumes, bool) or not isinstance(num_volumes, int) or num_volumes < 1:
        raise ValueError(f"synthetic_volumes: `num_volumes` must be an integer >= 1, got {num_volumes!r}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 8:
        raise ValueError(f"synthetic_volumes: `size` must be an integer >= 8, got {size!r}")
    if not 2 <= num_classes <= len(ORGANS) + 1:
        raise ValueError(f"synthetic_volumes: `num_classes` must be in 2..{len(ORGANS) + 1}, got {num_classes}")
    if split not in SPLITS:
        raise ValueError(f"synthetic_volumes: `split` must be one of {list(SPLITS)}, got {split!r}")
    volumes = [
        _volume(np.random.default_rng([seed, SPLITS.index(split), index, size]), size, num_classes)
        for index in range(num_volumes)
    ]
    features = Features(
        {
            "pixel_values": Array4D(shape=(1, size, size, size), dtype="float32"),
            "labels": Array3D(shape=(size, size, size), dtype="int64"),
        }
    )
    rows = {"pixel_values": [image for image, _ in volumes], "labels": [labels for _, labels in volumes]}
    return Dataset.from_dict(rows, features=features).with_format("torch")


def volume_segmentation(
    num_train: int = 64, num_validation: int = 16, size: int = 32, num_classes: int = 4, seed: int = 0
) -> DatasetDict:
    """Train and validation splits of :func:`synthetic_volumes` (disjoint random streams)."""
    return DatasetDict(
        {
            "train": synthetic_volumes(num_train, size, num_classes, seed, "train"),
            "validation": synthetic_volumes(num_validation, size, num_classes, seed, "validation"),
        }
    )
