import pytest
import torch

from hf_ext.kernels import token_logprobs, token_logprobs_reference, token_logprobs_triton
from hf_ext.kernels.testing import assert_close_to_reference, kernel_device, triton_runnable

runnable, reason = triton_runnable()
PATHS = [
    pytest.param(token_logprobs_reference, id="reference"),
    pytest.param(token_logprobs_triton, id="triton", marks=pytest.mark.skipif(not runnable, reason=reason)),
]


def _eager(logits, labels, ignore_index=-100):
    valid = labels != ignore_index
    picked = torch.log_softmax(logits.float(), -1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return picked * valid


def _inputs(shape=(3, 5), vocab=1500, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    logits = (3 * torch.randn(*shape, vocab, generator=generator)).to(dtype).to(kernel_device())
    labels = torch.randint(0, vocab, shape, generator=generator).to(kernel_device())
    labels[0, :2] = -100
    return logits, labels


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("chunk_size", [1, 256, 1500, 5000])
def test_values_and_gradients_match_log_softmax_gather(path, chunk_size):
    logits, labels = _inputs(vocab=1500 if chunk_size != 1 else 40)
    fused_in, eager_in = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    fused, eager = path(fused_in, labels, chunk_size=chunk_size), _eager(eager_in, labels)
    assert_close_to_reference(fused, eager, atol=1e-5, rtol=1e-5)
    weights = torch.randn_like(eager)
    (fused * weights).sum().backward()
    (eager * weights).sum().backward()
    assert_close_to_reference(fused_in.grad, eager_in.grad, atol=1e-6, rtol=1e-5)
    assert torch.all(fused[0, :2] == 0) and torch.all(fused_in.grad[0, :2] == 0)


@pytest.mark.parametrize("path", PATHS)
def test_half_precision_logits_are_reduced_in_fp32(path):
    logits, labels = _inputs(dtype=torch.float16)
    fused = path(logits, labels, chunk_size=512)
    assert fused.dtype == torch.float32
    assert_close_to_reference(fused, _eager(logits, labels), atol=1e-4, rtol=1e-4)


def test_dispatch_uses_the_reference_on_cpu_and_keeps_leading_dimensions():
    logits, labels = (t.cpu() for t in _inputs(shape=(2, 3, 4)))
    assert token_logprobs(logits, labels).shape == (2, 3, 4)
    assert torch.equal(token_logprobs(logits, labels), token_logprobs_reference(logits, labels))


@pytest.mark.parametrize(
    ("labels_shape", "kwargs", "error", "match"),
    [
        ((3, 4), {}, ValueError, "`labels` must have the shape"),
        ((3, 5), {"chunk_size": 0}, ValueError, "`chunk_size`"),
    ],
)
def test_bad_input_is_rejected(labels_shape, kwargs, error, match):
    with pytest.raises(error, match=match):
        token_logprobs(torch.zeros(3, 5, 10), torch.zeros(labels_shape, dtype=torch.long), **kwargs)
    with pytest.raises(TypeError, match="floating"):
        token_logprobs(torch.zeros(3, 5, 10, dtype=torch.long), torch.zeros(3, 5, dtype=torch.long))
