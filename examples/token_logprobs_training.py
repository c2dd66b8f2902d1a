"""Per-token log-probabilities for a training loss, with the gradient written into the logits' memory.

``overwrite_logits=True`` suits the usual loss, where the logits are not used after it: the
forward pass also computes d logprob / d logits and stores it in place of the logits, so forward
plus backward allocate nothing of the logits' size (on CUDA the Triton kernel, elsewhere the
chunked torch reference).
"""

import torch

from hf_ext.kernels import token_logprobs

hidden = torch.randn(4, 16, 64, requires_grad=True)
lm_head = torch.nn.Linear(64, 1000, bias=False)
labels = torch.randint(0, 1000, (4, 16))
labels[:, :3] = -100  # prompt tokens: log-probability 0, no gradient

logits = lm_head(hidden)  # (batch, tokens, vocab); not needed after the loss
logprobs = token_logprobs(logits, labels, overwrite_logits=True)
loss = -logprobs.sum() / (labels != -100).sum()
loss.backward()  # the logits now hold the gradient; `hidden` and `lm_head` get theirs as usual

eager = torch.log_softmax(lm_head(hidden), -1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
gap = (logprobs - eager * (labels != -100)).abs().max().item()
print(f"loss {loss.item():.4f}, max difference to log_softmax + gather {gap:.1e}, grad norm {hidden.grad.norm():.3f}")
