"""The real-vLLM fixture itself: the model builds deterministically and the server answers."""

from __future__ import annotations

import json
import urllib.request

import pytest


@pytest.mark.vllm
def test_server_answers_chat(vllm_server):
    body = {
        "model": vllm_server.model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "ignore_eos": True,
    }
    request = urllib.request.Request(
        vllm_server.base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        answer = json.load(reply)
    assert answer["usage"]["completion_tokens"] == 4
    assert answer["model"] == "tiny"


@pytest.mark.vllm
def test_model_build_is_deterministic(tiny_model_dir, tmp_path):
    from vllm_fixture import build_model, vllm_python

    again = build_model(vllm_python(), tmp_path / "again")
    for name in ("model.safetensors", "tokenizer.json", "config.json", "tokenizer_config.json"):
        assert (again / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name
