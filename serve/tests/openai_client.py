"""The real `openai` Python client against `ingot serve`: a non-streaming and a streaming greedy chat
completion must give the same text. Run by tests/serve_clients.rs as

    python3 openai_client.py BASE_URL EXPECTED_TEXT

with PYTHONPATH=.tools/python (where `cargo xtask tools` installs the pinned client). EXPECTED_TEXT is
the greedy reply the Rust test got from its own raw HTTP request. Prints one JSON line and exits 0 on
success; any mismatch raises (exit status 1 with a traceback).
"""

import json
import sys

import openai
from openai import OpenAI

base_url, expected = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=60)

models = client.models.list().data
assert len(models) == 1, models
model = models[0].id

messages = [{"role": "user", "content": "Hi"}]

full = client.chat.completions.create(
    model=model, messages=messages, max_tokens=8, temperature=0
)
assert full.object == "chat.completion", full
choice = full.choices[0]
assert choice.message.role == "assistant", choice
text = choice.message.content
assert text == expected, f"non-streaming text {text!r} != expected {expected!r}"
assert full.usage is not None and full.usage.completion_tokens >= 1, full.usage

stream = client.chat.completions.create(
    model=model,
    messages=messages,
    max_tokens=8,
    temperature=0,
    stream=True,
    stream_options={"include_usage": True},
)
pieces, finish, usage, chunks = [], None, None, 0
for chunk in stream:
    chunks += 1
    assert chunk.object == "chat.completion.chunk", chunk
    if chunk.usage is not None:
        usage = chunk.usage
    for c in chunk.choices:
        if c.delta.content:
            pieces.append(c.delta.content)
        if c.finish_reason is not None:
            finish = c.finish_reason
streamed = "".join(pieces)
assert streamed == text, f"streamed text {streamed!r} != non-streaming {text!r}"
assert finish == choice.finish_reason, (finish, choice.finish_reason)
assert usage is not None and usage.completion_tokens == full.usage.completion_tokens, usage

print(
    json.dumps(
        {
            "openai": openai.__version__,
            "model": model,
            "text": text,
            "chunks": chunks,
            "finish_reason": finish,
        }
    )
)
