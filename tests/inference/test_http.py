"""The shared model HTTP client on its own: what it imports, and that its key never shows."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from deepresearcher.errors import BackendUnavailableError
from deepresearcher.inference.http import OpenAIHttpClient
from deepresearcher.retry import Limits
from deepresearcher.testing.openai_server import OpenAIEmulator, Reply


def test_imports_no_caller_package():
    """``inference`` sits below generate, llm, agent and train: importing it loads none of them."""
    code = (
        "import sys, deepresearcher.inference.http\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
        "[['deepresearcher', p] for p in ('generate', 'llm', 'agent', 'train', 'web')]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


async def test_the_key_is_sent_but_never_logged_or_shown(monkeypatch, caplog):
    """The key goes out as a bearer header; retry logs, the final error and the repr never contain it."""
    monkeypatch.setenv("DR_HTTP_KEY", "sk-very-secret")
    caplog.set_level(logging.DEBUG)
    with OpenAIEmulator(responder=lambda body: Reply(status=503)).running() as server:
        http = OpenAIHttpClient(server.base_url, api_key_env="DR_HTTP_KEY",
                                limits=Limits(retries=2, backoff_s=0.01))
        with pytest.raises(BackendUnavailableError, match="gave up after 2 retries") as caught:
            await http.post("/chat/completions", {"model": "m", "messages": []})
        await http.aclose()
    assert server.headers[0]["Authorization"] == "Bearer sk-very-secret"
    assert http.counts.retries == 2 and http.counts.failures == 1
    assert "retry 2/2" in caplog.text
    for shown in (caplog.text, str(caught.value), repr(http)):
        assert "sk-very-secret" not in shown
