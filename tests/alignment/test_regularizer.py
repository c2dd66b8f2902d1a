import math

import pytest
import torch

from hf_ext.alignment import log_total_probability, mean_token_logprobs, probability_regularizer


def test_mean_token_logprobs_averages_over_the_response_mask():
    # Vocabulary of 2: equal logits give log(1/2); logits (log 3, 0) give log(3/4) for token 0.
    logits = torch.tensor([[[0.0, 0.0], [math.log(3), 0.0], [5.0, 1.0]]])
    labels = torch.tensor([[1, 0, 1]])
    mask = torch.tensor([[1, 1, 0]])
    expected = (math.log(0.5) + math.log(0.75)) / 2
    assert mean_token_logprobs(logits, labels, mask).item() == pytest.approx(expected, rel=1e-6)


def test_log_total_probability_adds_the_two_probabilities():
    log_p = log_total_probability(torch.tensor([math.log(0.2)]), torch.tensor([math.log(0.3)]))
    assert log_p.item() == pytest.approx(math.log(0.5), rel=1e-6)


@pytest.mark.parametrize(
    ("form", "log_p", "expected"),
    [
        ("one_sided", math.log(0.25), math.log(2)),
        ("one_sided", math.log(0.75), 0.0),
        ("two_sided", math.log(0.25), math.log(2) ** 2),
        ("two_sided", math.log(1.0), math.log(2) ** 2),
    ],
)
def test_penalty_against_an_anchor_of_one_half(form, log_p, expected):
    anchor = torch.tensor([math.log(0.5)])
    assert probability_regularizer(torch.tensor([log_p]), anchor, form).item() == pytest.approx(expected, abs=1e-6)


def test_anchor_gets_no_gradient_and_unknown_form_is_rejected():
    log_p, anchor = torch.tensor([-2.0], requires_grad=True), torch.tensor([-1.0], requires_grad=True)
    probability_regularizer(log_p, anchor, "two_sided").sum().backward()
    assert log_p.grad.item() == pytest.approx(-2.0) and anchor.grad is None
    with pytest.raises(ValueError, match=r"`form` must be one of \('one_sided', 'two_sided'\)"):
        probability_regularizer(log_p, anchor, "hinge")
