import pytest
import torch

from hf_ext.kernels import token_logprobs, token_logprobs_reference
from hf_ext.kernels.testing import assert_close_to_reference, kernel_device

# Both paths reduce in fp32, so only the rounding of the logits to their dtype differs from eager fp32.
TOLERANCES = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 1e-4, "rtol": 1e-4},
    torch.bfloat16: {"atol": 1e-4, "rtol": 1e-4},
}
# The gradient is returned in the logits' dtype.
GRAD_TOLERANCES = {
    torch.float32: {"atol": 1e-6, "rtol": 1e-5},
    torch.float16: {"atol": 1e-3, "rtol": 1e-3},
    torch.bfloat16: {"atol": 8e-3, "rtol": 8e-3},
}


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


@pytest.mark.parametrize("chunk_size", [1, 256, 1500, 5000])
def test_values_and_gradients_match_log_softmax_gather(kernel_path, chunk_size):
    logits, labels = _inputs(vocab=1500 if chunk_size != 1 else 40)
    fused_in, eager_in = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    fused, eager = kernel_path(token_logprobs)(fused_in, labels, chunk_size=chunk_size), _eager(eager_in, labels)
    assert_close_to_reference(fused, eager, **TOLERANCES[torch.float32])
    weights = torch.randn_like(eager)
    (fused * weights).sum().backward()
    (eager * weights).sum().backward()
    assert_close_to_reference(fused_in.grad, eager_in.grad, **GRAD_TOLERANCES[torch.float32])
    assert torch.all(fused[0, :2] == 0) and torch.all(fused_in.grad[0, :2] == 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_logits_are_reduced_in_fp32(kernel_path, dtype):
    kernel_path.skip_unsupported(dtype)
    logits, labels = _inputs(dtype=dtype)
    fused_in, eager_in = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    fused = kernel_path(token_logprobs)(fused_in, labels, chunk_size=512)
    assert fused.dtype == torch.float32
    eager = _eager(eager_in, labels)
    assert_close_to_reference(fused, eager, **TOLERANCES[dtype])
    fused.sum().backward()
    eager.sum().backward()
    assert fused_in.grad.dtype == dtype
    assert_close_to_reference(fused_in.grad.float(), eager_in.grad.float(), **GRAD_TOLERANCES[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
def test_overwrite_logits_gives_the_same_values_and_gradients_in_the_logits_memory(kernel_path, dtype):
    logits, labels = _inputs(dtype=dtype)
    leaf, eager_in = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    scores = leaf * 1  # a non-leaf, like a model's logits; its gradient flows on to ``leaf``
    memory = scores.data_ptr()
    fused = kernel_path(token_logprobs)(scores, labels, chunk_size=512, overwrite_logits=True)
    eager = _eager(eager_in, labels)
    assert_close_to_reference(fused, eager, **TOLERANCES[dtype])
    weights = torch.randn_like(eager)
    (fused * weights).sum().backward()
    (eager * weights).sum().backward()
    assert_close_to_reference(leaf.grad.float(), eager_in.grad.float(), **GRAD_TOLERANCES[dtype])
    # The gradient was built in the logits' own buffer: the logits now hold d(sum w * logprob) / d logits.
    assert scores.data_ptr() == memory
    assert_close_to_reference(scores.detach().float(), eager_in.grad.float(), **GRAD_TOLERANCES[dtype])


def test_overwrite_logits_keeps_the_logits_without_a_gradient(kernel_path):
    logits, labels = _inputs()
    original = logits.clone()
    with torch.no_grad():
        kernel_path(token_logprobs)(logits.requires_grad_(), labels, overwrite_logits=True)
    assert torch.equal(logits.detach(), original)
    kernel_path(token_logprobs)(logits.detach(), labels, overwrite_logits=True)
    assert torch.equal(logits.detach(), original)


def test_overwrite_logits_refuses_logits_another_operation_saved(kernel_path):
    leaf = _inputs()[0].requires_grad_()
    logits, labels = leaf.exp(), _inputs()[1]  # exp saves its output for its backward
    fused = kernel_path(token_logprobs)(logits, labels, overwrite_logits=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        fused.sum().backward()


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
