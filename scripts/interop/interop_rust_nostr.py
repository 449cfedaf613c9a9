#!/usr/bin/env python3
"""Signing interop both ways between Softchat and rust-nostr (nostr-sdk's Python bindings).

Run by scripts/interop/interop-events with the peers venv (scripts/interop/peers setup):
  1. events signed by nostr_sdk (tricky contents: quotes, backslashes, newlines, tabs,
     non-ASCII, emoji, U+2028, other control characters) must verify with `softchat event verify`;
  2. events signed by `softchat event sign` must verify with nostr_sdk's Event.verify();
  3. tampered copies must be rejected by both.
Prints "N passed, M failed" and exits non-zero on any failure.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

import nostr_sdk as ns

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from checks import Tally  # noqa: E402

SOFTCHAT = sys.argv[1] if len(sys.argv) > 1 else ".build/debug/softchat"
rng = random.Random(20261129)
tally = Tally("interop")
check = tally.check


PIECES = ["hello", "\"quoted\"", "back\\slash", "line\nbreak", "tab\there", "cr\rlf", "café", "東京", "🤙",
          "\u2028", "\u2029", "\b\f", "\u0001", "\u001f", "\u007f", "/slash/", "<html>", "{json:[1]}", " "]


def content():
    return "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 12)))


def softchat(args, stdin):
    return subprocess.run([SOFTCHAT] + args, input=stdin, capture_output=True, text=True)


def tamper(ev):
    bad = dict(ev)
    bad["content"] = bad["content"] + "x"
    return bad


# 1. rust-nostr signs, Softchat verifies.
keys = ns.Keys.generate()
theirs = []
for i in range(200):
    tags = [ns.Tag.parse(["t", "interop"])]
    if i % 3 == 0:
        tags.append(ns.Tag.parse(["p", keys.public_key().to_hex()]))
    if i % 5 == 0:
        tags.append(ns.Tag.parse(["subject", content()]))
    ev = ns.EventBuilder(ns.Kind(1 if i % 2 else 14), content()).tags(tags).finalize(keys)
    theirs.append(json.loads(ev.as_json()))
lines = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in theirs)
res = softchat(["event", "verify", "--json"], lines)
results = [json.loads(l) for l in res.stdout.split("\n")[:-1]]
check(len(results) == len(theirs), f"softchat answered {len(results)} lines for {len(theirs)} events")
for ev, r in zip(theirs, results):
    check(r.get("valid") is True and r.get("id") == ev["id"], f"rust-nostr event {ev['id']} did not verify here: {r}")
check(res.returncode == 0, f"softchat event verify exit {res.returncode}")

# ASCII-escaped spelling (\u00e9 for é) of the same events must verify too.
lines_ascii = "".join(json.dumps(e, ensure_ascii=True) + "\n" for e in theirs)
res = softchat(["event", "verify", "--json"], lines_ascii)
check(res.returncode == 0 and all(json.loads(l)["valid"] for l in res.stdout.split("\n")[:-1]),
      "re-spelled (\\uXXXX) rust-nostr events did not all verify")

bad_lines = "".join(json.dumps(tamper(e)) + "\n" for e in theirs[:50])
res = softchat(["event", "verify", "--json"], bad_lines)
bad_results = [json.loads(l) for l in res.stdout.split("\n")[:-1]]
check(len(bad_results) == 50 and all(r["valid"] is False and r["error"]["code"] == "invalid_relay_frame" for r in bad_results),
      "tampered rust-nostr events were not all rejected with invalid_relay_frame")
check(res.returncode == 1, f"softchat event verify on tampered events exit {res.returncode} (want 1)")

# 2. Softchat signs, rust-nostr verifies.
with tempfile.TemporaryDirectory() as tmp:
    key = os.path.join(tmp, "softchat.key")
    res = softchat(["keygen", "--out", key], "")
    check(res.returncode == 0, f"keygen failed: {res.stderr}")
    pubkey = res.stdout.strip()
    drafts = []
    for i in range(200):
        tags = [["t", "interop"]]
        if i % 4 == 0:
            tags.append(["p", pubkey, "wss://relay.example", content()])
        drafts.append({"kind": 1 if i % 2 else 14, "created_at": 1_764_000_000 + i, "tags": tags, "content": content()})
    res = softchat(["event", "sign", "--key", key], "".join(json.dumps(d) + "\n" for d in drafts))
    check(res.returncode == 0, f"softchat event sign exit {res.returncode}: {res.stderr}")
    ours = res.stdout.split("\n")[:-1]
    check(len(ours) == len(drafts), f"softchat signed {len(ours)} of {len(drafts)} drafts")
    for line, draft in zip(ours, drafts):
        try:
            ev = ns.Event.from_json(line)
            check(ev.verify(), f"rust-nostr rejects softchat event {line[:120]}")
            check(ev.content() == draft["content"] and ev.author().to_hex() == pubkey, "content or author changed")
        except Exception as exc:  # nostr_sdk raises on malformed or invalid events
            check(False, f"rust-nostr could not parse softchat event: {exc}: {line[:120]}")
    for line in ours[:50]:
        bad = json.dumps(tamper(json.loads(line)))
        try:
            ok = ns.Event.from_json(bad).verify()
        except Exception:
            ok = False
        check(not ok, "rust-nostr accepted a tampered softchat event")

tally.finish()
