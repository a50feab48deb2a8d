"""Time to first token of a chat turn and of its follow-up against a running `ingot serve` (port in argv[1]):
turn 2 repeats turn 1's conversation, so its prefill covers only the new tokens (KV prefix reuse).
Usage: ingot serve -m MODEL --port 8080 --ctx 1024 & python3 scripts/serve-ttft.py 8080"""
import http.client, json, sys, time
host, port = "127.0.0.1", int(sys.argv[1])
def first_token(messages):
    """Time of a request for one token: prefill plus the first sample (time to first token)."""
    c = http.client.HTTPConnection(host, port, timeout=600)
    body = json.dumps({"messages": messages, "max_tokens": 1, "temperature": 0})
    t0 = time.time()
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    v = json.loads(c.getresponse().read())
    return time.time() - t0, v["choices"][0]["message"]["content"], v["usage"]["prompt_tokens"]
long = " ".join(["The quick brown fox jumps over the lazy dog near the river bank."] * 20)
m1 = [{"role": "user", "content": long}]
t1, r1, p1 = first_token(m1)
m2 = m1 + [{"role": "assistant", "content": r1}, {"role": "user", "content": "And then?"}]
t2, _, p2 = first_token(m2)
print(json.dumps({"turn1_prompt_tokens": p1, "turn1_ttft_s": round(t1, 3), "turn2_prompt_tokens": p2, "turn2_ttft_s": round(t2, 3)}))
