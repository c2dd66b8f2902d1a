import pytest
import torch

from hf_ext.data import synthetic_volumes, volume_segmentation
from hf_ext.data.volumes import ORGANS, class_names


def test_rows_are_trainer_ready_tensors():
    data = volume_segmentation(num_train=3, num_validation=2, size=16)
    assert {split: len(rows) for split, rows in data.items()} == {"train": 3, "validation": 2}
    row = data["train"][0]
    assert row["pixel_values"].shape == (1, 16, 16, 16) and row["pixel_values"].dtype == torch.float32
    assert row["labels"].shape == (16, 16, 16) and row["labels"].dtype == torch.int64
    assert row["pixel_values"].mean().abs() < 1e-4 and (row["pixel_values"].std() - 1).abs() < 1e-3


def test_deterministic_by_seed_and_splits_differ():
    first, again = synthetic_volumes(2, size=16, seed=3), synthetic_volumes(2, size=16, seed=3)
    assert torch.equal(first[:]["pixel_values"], again[:]["pixel_values"])
    assert torch.equal(first[:]["labels"], again[:]["labels"])
    other_seed = synthetic_volumes(2, size=16, seed=4)
    validation = synthetic_volumes(2, size=16, seed=3, split="validation")
    assert not torch.equal(first[:]["labels"], other_seed[:]["labels"])
    assert not torch.equal(first[:]["labels"], validation[:]["labels"])
    # volume i does not depend on how many volumes are drawn
    assert torch.equal(synthetic_volumes(1, size=16, seed=3)[0]["labels"], first[0]["labels"])


def test_every_organ_appears_with_background_dominant_and_the_lesion_rare():
    labels = synthetic_volumes(8, size=32)[:]["labels"]
    fractions = torch.bincount(labels.reshape(-1), minlength=4).double() / labels.numel()
    assert fractions[0] > 0.8
    assert fractions[1] > fractions[2] > fractions[3] > 0
    assert all((labels == c).flatten(1).any(1).float().mean() >= 0.75 for c in range(1, 4))


def test_liver_and_kidney_share_their_intensity():
    data = synthetic_volumes(8, size=32)[:]
    image, labels = data["pixel_values"][:, 0], data["labels"]
    liver, kidney, background = (image[labels == c].mean() for c in (1, 2, 0))
    assert abs(liver - kidney) < 0.5 < liver - background
    assert ORGANS[0].intensity == ORGANS[1].intensity


def test_fewer_classes_keep_the_first_organs():
    labels = synthetic_volumes(2, size=16, num_classes=2)[:]["labels"]
    assert set(labels.unique().tolist()) <= {0, 1}
    assert class_names(3) == ["background", "liver", "kidney"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_volumes": 0}, "`num_volumes` must be an integer >= 1, got 0"),
        ({"num_volumes": 1, "size": 4}, "`size` must be an integer >= 8, got 4"),
        ({"num_volumes": 1, "num_classes": 5}, r"`num_classes` must be in 2..4, got 5"),
        ({"num_volumes": 1, "split": "test"}, r"`split` must be one of \['train', 'validation'\], got 'test'"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match="synthetic_volumes: " + message):
        synthetic_volumes(**kwargs)
