"""A small byte-level BPE tokenizer trained on the standard library's source, for models trained from scratch.

SmolLM2's 49k-token vocabulary would dominate a model of a few million parameters; pretraining
experiments (gradient smoothing, weight-decay plasticity) use this one instead. It is trained
once per (vocabulary size, file count) and cached under ``$HF_EXT_CACHE``.
"""

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from ..models import cache_root
from .stdlib_text import read_source, stdlib_source_files

END_OF_TEXT = "<|endoftext|>"

# "user: ...\nassistant: ...<|endoftext|>": enough structure for the chat-format datasets
# (arithmetic) to train and evaluate a from-scratch model with the same code as SmolLM2.
PLAIN_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% else %}{{ '\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def _train(vocab_size: int, max_files: int | None) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = (read_source(path) for path in stdlib_source_files()[:max_files])
    tokenizer.train_from_iterator((text for text in texts if text), trainer=trainer)
    return tokenizer


def stdlib_bpe_tokenizer(vocab_size: int = 2048, max_files: int | None = 400) -> PreTrainedTokenizerFast:
    """Byte-level BPE with ``vocab_size`` tokens (``<|endoftext|>`` is BOS, EOS and padding).

    Trained on the first ``max_files`` standard-library files in sorted order (``None``: all).
    Carries :data:`PLAIN_CHAT_TEMPLATE`, so chat-format rows tokenize and generate as with SmolLM2.
    """
    if vocab_size < 300:
        raise ValueError(f"stdlib_bpe_tokenizer: `vocab_size` must be >= 300 (256 bytes + merges), got {vocab_size}")
    if max_files is not None and max_files < 1:
        raise ValueError(f"stdlib_bpe_tokenizer: `max_files` must be >= 1 or None, got {max_files}")
    path = cache_root() / "tokenizers" / f"stdlib_bpe_{vocab_size}_{max_files or 'all'}.json"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(".tmp")
        _train(vocab_size, max_files).save(str(scratch))
        Path(scratch).replace(path)
    return PreTrainedTokenizerFast(
        tokenizer_file=str(path),
        bos_token=END_OF_TEXT,
        eos_token=END_OF_TEXT,
        pad_token=END_OF_TEXT,
        chat_template=PLAIN_CHAT_TEMPLATE,
    )
