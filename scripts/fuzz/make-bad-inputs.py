#!/usr/bin/env python3
"""Regenerates the bad-input corpus in Tests/SoftchatCoreTests/BadInputs/: one file per case,
named DIRECTION--EXPECTED_CODE--case.txt (DIRECTION client or relay: which parser gets it).
Deterministic: events come from fixed keys via `softchat event sign` with a fixed corpus, so
re-running changes nothing but signatures' aux randomness (signatures are checked, not bytes).
usage: scripts/fuzz/make-bad-inputs.py [path/to/softchat]"""
import json
import os
import subprocess
import sys

softchat = sys.argv[1] if len(sys.argv) > 1 else ".build/debug/softchat"
out = "Tests/SoftchatCoreTests/BadInputs"
os.makedirs(out, exist_ok=True)
for f in os.listdir(out):
    os.remove(os.path.join(out, f))
key = "/tmp/softchat-bad-inputs.key"
if os.path.exists(key):
    os.remove(key)
with open(key, "w") as f:
    f.write("c0ffee" + "11" * 29 + "\n")  # a fixed test-only key
os.chmod(key, 0o600)


def sign(draft):
    r = subprocess.run([softchat, "event", "sign", "--key", key], input=json.dumps(draft) + "\n", capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def write(direction, code, name, data):
    path = os.path.join(out, f"{direction}--{code}--{name}.txt")
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def frame(*elements):
    return json.dumps(list(elements), separators=(",", ":"), ensure_ascii=False)


good = sign({"kind": 1, "created_at": 1764000000, "tags": [["t", "bad-inputs"]], "content": "a good event"})
forged = dict(good, sig=("0" if good["sig"][0] != "0" else "1") + good["sig"][1:])
many_tags = sign({"kind": 1, "created_at": 1764000000, "tags": [["t", f"tag{i}"] for i in range(10000)], "content": "ten thousand tags"})
many_tags_forged = dict(many_tags, content="ten thousand tags, altered")
auth_wrong_kind = sign({"kind": 1, "created_at": 1764000000, "tags": [["relay", "wss://r.example"], ["challenge", "c"]], "content": ""})

# client → relay
big = frame("REQ", "s", {"#t": ["x" * 524288]})
write("client", "invalid_relay_frame", "oversize-frame", big[: 524289 - 1] + "]" if len(big) > 524289 else big)
write("client", "invalid_relay_frame", "deep-nesting", "[" * 40 + "]" * 40)
write("client", "invalid_relay_frame", "deep-nesting-inside-event", frame("EVENT", dict(good, content="x")).replace('"tags":[', '"tags":[' + "[" * 40 + "]" * 40 + ",", 1))
write("client", "invalid_relay_frame", "invalid-utf8", b'["EVENT",{"content":"\xc3\x28"}]')
write("client", "invalid_relay_frame", "lone-surrogate-escape", '["CLOSE","\\ud800"]')
write("client", "invalid_relay_frame", "huge-number-kind", frame("EVENT", dict(good, kind=10 ** 30)).replace(str(10 ** 30), "1" + "0" * 400))
write("client", "invalid_relay_frame", "huge-created-at", frame("EVENT", dict(good, created_at=2 ** 64)))
write("client", "invalid_relay_frame", "fractional-kind", frame("EVENT", dict(good, kind=1.5)))
write("client", "invalid_relay_frame", "forged-signature", frame("EVENT", forged))
write("client", "invalid_relay_frame", "ten-thousand-tags-forged", frame("EVENT", many_tags_forged))
write("client", "invalid_relay_frame", "unknown-event-field", frame("EVENT", dict(good, extra=1)))
write("client", "invalid_relay_frame", "trailing-data", frame("CLOSE", "s") + " x")
write("client", "invalid_relay_frame", "duplicate-key-in-event", frame("EVENT", good).replace('"kind":1', '"kind":1,"kind":1', 1))
write("client", "invalid_relay_frame", "empty-subscription-id", frame("CLOSE", ""))
write("client", "invalid_relay_frame", "long-subscription-id", frame("CLOSE", "s" * 65))
write("client", "invalid_relay_frame", "unknown-verb", frame("PUBLISH", good))
write("client", "invalid_relay_filter", "sixty-five-filters", frame("REQ", "s", *([{"kinds": [1]}] * 65)))
write("client", "invalid_relay_filter", "multi-letter-tag", frame("REQ", "s", {"#pp": ["x"]}))
write("client", "invalid_relay_filter", "uppercase-author", frame("REQ", "s", {"authors": ["ABCDEF"]}))
write("client", "invalid_relay_batch", "nested-events", frame("EVENTS", [good]))
write("client", "invalid_relay_batch", "empty-batch", frame("EVENTS"))
write("client", "invalid_relay_batch", "duplicate-ids", frame("EVENTS", good, good))
write("client", "invalid_relay_batch", "forged-inside-batch", frame("EVENTS", good, forged))
write("client", "invalid_relay_batch", "batch-of-257", frame("EVENTS", *([good] * 257)))
write("client", "invalid_relay_authentication", "auth-wrong-kind", frame("AUTH", auth_wrong_kind))
write("client", "invalid_relay_authentication", "auth-forged", frame("AUTH", forged))
# relay → client
write("relay", "invalid_relay_frame", "ok-uppercase-id", frame("OK", good["id"].upper(), True, ""))
write("relay", "invalid_relay_frame", "ok-not-bool", frame("OK", good["id"], "true", ""))
write("relay", "invalid_relay_frame", "event-forged", frame("EVENT", "s", forged))
write("relay", "invalid_relay_frame", "count-negative", frame("COUNT", "c", {"count": -1}))
write("relay", "invalid_relay_frame", "count-short-hll", frame("COUNT", "c", {"count": 1, "hll": "00"}))
write("relay", "invalid_relay_frame", "not-an-array", '{"EVENT":1}')
write("relay", "invalid_relay_authentication", "auth-empty-challenge", frame("AUTH", ""))
write("relay", "invalid_relay_authentication", "auth-number-challenge", frame("AUTH", 42))
print(f"bad inputs: {len(os.listdir(out))} files in {out}")
os.remove(key)
