#!/usr/bin/env python3
"""make-session-regressions: writes Tests/SessionRegressions/*.jsonl, one `softchat replay` script
per RelaySession rule of issue 17, each line a host call with an optional "expect" that
scripts/check/check-session-regressions checks against what `softchat replay` prints for it.

Events are signed once here with a fixed test key (never use it anywhere else) by
`softchat event sign`; the scripts are checked in, so the test command only replays them.
usage: scripts/check/make-session-regressions.py [path/to/softchat]
"""
import hashlib, json, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOFTCHAT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/softchat")
OUT = os.path.join(ROOT, "Tests/SessionRegressions")
T0 = 1764000000
RELAY = "wss://relay.example.com"

work = tempfile.mkdtemp()
key = os.path.join(work, "key")
with open(key, "w") as f:
    f.write(hashlib.sha256(b"softchat session regressions key").hexdigest() + "\n")
os.chmod(key, 0o600)


def sign(unsigned):
    text = "".join(json.dumps(u) + "\n" for u in unsigned)
    p = subprocess.run([SOFTCHAT, "event", "sign", "--key", key], input=text, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in p.stdout.splitlines()]


def notes(n, start, content=lambda i: f"note {i}", kind=14):
    return sign([{"kind": kind, "created_at": T0 + i, "tags": [], "content": content(i)} for i in range(start, start + n)])


def auth(challenge, relay=RELAY, created_at=T0):
    return sign([{"kind": 22242, "created_at": created_at, "tags": [["relay", relay], ["challenge", challenge]], "content": ""}])[0]


def frame(*elements):
    return json.dumps(list(elements), separators=(",", ":"))


def ok(event_id, accepted, text=""):
    return {"call": "receive", "text": frame("OK", event_id, accepted, text)}


def write(name, doc, lines):
    """The scenario's prose rides on its configure line ("about"; replay ignores it)."""
    lines[0] = {"call": "configure", "about": " ".join(doc.split()), **{k: v for k, v in lines[0].items() if k != "call"}}
    with open(os.path.join(OUT, name + ".jsonl"), "w") as f:
        for line in lines:
            f.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")


def connected(**config):
    return [{"call": "configure", **config}, {"call": "connect"}, {"call": "transportConnected", "now": T0}]


# 1. EVENTS frames stay within the frame bound (and the relay's max_message_length).
big = notes(256, 0, content=lambda i: f"{i:04d} " + "x" * 2095)
ids = [e["id"] for e in big]
write("events-frame-bound", """
An EVENTS batch of 256 events of ~2.1 KB each (~626 KB as one frame) is packed by bytes: every
drained frame fits relay.wire's 512 KiB frame bound, and each event is in exactly one frame.
With the relay's NIP-11 max_message_length (64 KiB), every frame fits that instead.
""", connected() + [
    {"call": "publish", "events": big, "expect": {"noError": True}},
    {"call": "drainOutbound", "expect": {"maxFrameBytes": 524288, "eventsOnce": ids, "verbs": ["EVENTS", "EVENTS"]}},
])
write("events-max-message-length", """
With maxMessageBytes (the relay's NIP-11 max_message_length) at 65,536, the same 256 events go
out in frames of at most 64 KiB, each event in exactly one frame; an event that cannot fit any
frame is refused with invalid_relay_batch and changes nothing.
""", connected(maxMessageBytes=65536) + [
    {"call": "publish", "events": big, "expect": {"noError": True}},
    {"call": "drainOutbound", "expect": {"maxFrameBytes": 65536, "eventsOnce": ids}},
    {"call": "snapshot", "expect": {"snapshot": {"pendingPublishes": 256}}},
])
huge = notes(1, 900, content=lambda i: "y" * 70000)
write("event-too-large-for-the-relay", """
An event whose EVENT frame is larger than the relay's max_message_length is refused at publish
(invalid_relay_batch) instead of being sent to be refused or cut.
""", connected(maxMessageBytes=65536) + [
    {"call": "publish", "events": huge, "expect": {"error": "invalid_relay_batch"}},
    {"call": "snapshot", "expect": {"snapshot": {"pendingPublishes": 0}}},
])

# 2. Timed-out deliveries leave the pending bound.
batches = [notes(256, 1000 + 256 * b) for b in range(4)]
lines = connected(supportsEventsBatch=True, acknowledgementTimeoutSeconds=10)
for b in batches:
    lines.append({"call": "publish", "events": b, "expect": {"noError": True}})
lines.append({"call": "publish", "events": notes(1, 5000), "expect": {"error": "relay_session_queue_full"}})
for b in batches:
    lines.append({"call": "drainOutbound", "max": 1, "expect": {"eventsOnce": [e["id"] for e in b]}})
    lines.append({"call": "confirmSent", "eventIds": [e["id"] for e in b], "now": T0 + 1})
lines.append({"call": "handleTimeout", "now": T0 + 11, "expect": {"decisionCount": 1024, "allDecisions": ["retryable", "timeout"]}})
lines.append({"call": "snapshot", "expect": {"snapshot": {"pendingPublishes": 0}}})
lines.append({"call": "publish", "events": batches[0], "expect": {"noError": True}})
write("timeouts-free-the-publish-bound", """
Four batches of 256 published, written and never answered time out; they leave the session as
retryable (the host re-publishes them from durable intent), so the 1,024-publish bound is free
again instead of answering relay_session_queue_full for the life of the session.
""", lines)

# 3. Per-event deadlines; late OKs; OKs before confirmSent; unnamed OKs never land on another event.
a, b, c = notes(3, 6000)
write("per-event-deadlines", """
Each event's acknowledgement deadline runs from its own confirmSent: at t+10 only the event
written at t times out, not the one written at t+8. A terminal OK that arrives after the timeout
still settles the event (accepted stays accepted); an OK that arrives before confirmSent settles
its event too.
""", connected(supportsEventsBatch=False, acknowledgementTimeoutSeconds=10) + [
    {"call": "publish", "events": [a, b, c]},
    {"call": "drainOutbound", "max": 2, "expect": {"eventsOnce": [a["id"], b["id"]]}},
    {"call": "confirmSent", "eventIds": [a["id"]], "now": T0},
    {"call": "confirmSent", "eventIds": [b["id"]], "now": T0 + 8},
    {"call": "pollTimeout", "expect": {"timeout": T0 + 10}},
    {"call": "handleTimeout", "now": T0 + 10, "expect": {"decisions": [[a["id"], "retryable", "timeout"]]}},
    {"call": "pollTimeout", "expect": {"timeout": T0 + 18}},
    {**ok(a["id"], True), "expect": {"decisions": [[a["id"], "accepted", "accepted"]]}},
    {"call": "drainOutbound", "expect": {"eventsOnce": [c["id"]]}},
    {**ok(c["id"], True), "expect": {"decisions": [[c["id"], "accepted", "accepted"]]}},
    {"call": "confirmSent", "eventIds": [c["id"]], "now": T0 + 9, "expect": {"noError": True}},
    {**ok(b["id"], True), "expect": {"decisions": [[b["id"], "accepted", "accepted"]]}},
    {"call": "snapshot", "expect": {"snapshot": {"pendingPublishes": 0}}},
])
x, y = notes(2, 6100)
write("unnamed-ok-after-timeout", """
nostr-relay answers in order and rejects with an empty id. When x times out and its late
unnamed rejection arrives, it is applied to x (the oldest unanswered write), never to y.
""", connected(supportsEventsBatch=False, correlateUnnamedAcknowledgements=True, acknowledgementTimeoutSeconds=10) + [
    {"call": "publish", "events": [x, y]},
    {"call": "drainOutbound", "expect": {"eventsOnce": [x["id"], y["id"]]}},
    {"call": "confirmSent", "eventIds": [x["id"]], "now": T0},
    {"call": "confirmSent", "eventIds": [y["id"]], "now": T0 + 5},
    {"call": "handleTimeout", "now": T0 + 10, "expect": {"decisions": [[x["id"], "retryable", "timeout"]]}},
    {**ok("", False, "invalid: bad signature"), "expect": {"decisions": [[x["id"], "rejected", "invalid"]]}},
    {"call": "snapshot", "expect": {"snapshot": {"pendingPublishes": 1}}},
    {**ok(y["id"], True), "expect": {"decisions": [[y["id"], "accepted", "accepted"]]}},
])

# 4. NIP-42 answered again on a new connection when the relay reuses its challenge.
first = auth("reused-challenge")
write("nip42-challenge-reused-on-a-new-connection", """
A relay that reuses its challenge on a new connection is asked and answered again there: the
answered challenges are remembered per connection.
""", connected(relayUrl=RELAY) + [
    {"call": "receive", "text": frame("AUTH", "reused-challenge"), "expect": {"kinds": ["authenticationRequested"]}},
    {"call": "authenticate", "event": first, "now": T0, "expect": {"noError": True}},
    {**ok(first["id"], True), "expect": {"kinds": ["authenticated"]}},
    {"call": "transportLost", "now": T0 + 1},
    {"call": "connect"},
    {"call": "transportConnected", "now": T0 + 2},
    {"call": "receive", "text": frame("AUTH", "reused-challenge"), "expect": {"kinds": ["authenticationRequested"]}},
    {"call": "authenticate", "event": first, "now": T0 + 2, "expect": {"noError": True}},
    {"call": "drainOutbound", "expect": {"verbs": ["AUTH"]}},
])

# 5. auth-required CLOSED after our AUTH was accepted is sent again; other prefixes by their rule.
ans = auth("c-dm")
write("closed-auth-required-after-auth", """
A DM subscription closed with auth-required after our AUTH was accepted is sent again once
(LocalRelay and strfry do this when the REQ raced the AUTH); a second auth-required close is
not retried. Frames queued behind our AUTH wait for its OK.
""", connected(relayUrl=RELAY) + [
    {"call": "receive", "text": frame("AUTH", "c-dm")},
    {"call": "authenticate", "event": ans, "now": T0},
    {"call": "subscribe", "id": "dm", "filters": [{"kinds": [1059], "#p": [ans["pubkey"]]}]},
    {"call": "drainOutbound", "expect": {"verbs": ["AUTH"]}},
    {"call": "confirmSent", "eventIds": [], "now": T0},
    {**ok(ans["id"], True), "expect": {"kinds": ["authenticated"]}},
    {"call": "drainOutbound", "expect": {"verbs": ["REQ"]}},
    {"call": "confirmSent", "eventIds": []},
    {"call": "receive", "text": frame("CLOSED", "dm", "auth-required: this is a DM"),
     "expect": {"kinds": ["subscriptionClosed"], "retryDelayMilliseconds": 0}},
    {"call": "drainOutbound", "expect": {"verbs": ["REQ"]}},
    {"call": "confirmSent", "eventIds": []},
    {"call": "receive", "text": frame("CLOSED", "dm", "auth-required: still no"),
     "expect": {"kinds": ["subscriptionClosed"], "retryDelayMilliseconds": None}},
    {"call": "drainOutbound", "expect": {"verbs": []}},
])
write("closed-prefixes", """
A CLOSED is retried on the session's backoff schedule where its prefix allows it (error:,
rate-limited:), and not where it does not (blocked:, restricted:, invalid:).
""", connected(reconnectBaseDelaySeconds=1) + [
    {"call": "subscribe", "id": "a", "filters": [{"kinds": [1]}]},
    {"call": "subscribe", "id": "b", "filters": [{"kinds": [1]}]},
    {"call": "drainOutbound", "expect": {"verbs": ["REQ", "REQ"]}},
    {"call": "confirmSent", "eventIds": []},
    {"call": "confirmSent", "eventIds": []},
    {"call": "receive", "text": frame("CLOSED", "a", "error: shutting down idle subscriptions"), "now": T0 + 1,
     "expect": {"kinds": ["subscriptionClosed"], "retryDelayMilliseconds": 1000}},
    {"call": "receive", "text": frame("CLOSED", "b", "blocked: not on the whitelist"), "now": T0 + 1,
     "expect": {"kinds": ["subscriptionClosed"], "retryDelayMilliseconds": None}},
    {"call": "pollTimeout", "expect": {"timeout": T0 + 2}},
    {"call": "handleTimeout", "now": T0 + 2, "expect": {"kinds": []}},
    {"call": "drainOutbound", "expect": {"verbs": ["REQ"]}},
    {"call": "confirmSent", "eventIds": []},
    {"call": "receive", "text": frame("CLOSED", "a", "rate-limited: slow down"), "now": T0 + 3,
     "expect": {"kinds": ["subscriptionClosed"], "retryDelayMilliseconds": 2000}},
    {"call": "pollTimeout", "expect": {"timeout": T0 + 5}},
])

# 6. AUTH events for another relay, another challenge or another time are refused. (NIP-42 over
# noise:// URLs is pinned in Swift: it needs createNip42Authentication, which replay cannot call.)
write("auth-for-another-relay", """
The session is configured with its relay URL: an AUTH event naming another relay, answering an
old challenge, or created outside the window around now is refused with
invalid_relay_authentication and nothing is sent; the right one (URL compared normalized) goes.
""", connected(relayUrl=RELAY) + [
    {"call": "receive", "text": frame("AUTH", "c-now")},
    {"call": "authenticate", "event": auth("c-now", relay="wss://evil.example.com"), "now": T0, "expect": {"error": "invalid_relay_authentication"}},
    {"call": "authenticate", "event": auth("c-old"), "now": T0, "expect": {"error": "invalid_relay_authentication"}},
    {"call": "authenticate", "event": auth("c-now", created_at=T0 - 3600), "now": T0, "expect": {"error": "invalid_relay_authentication"}},
    {"call": "drainOutbound", "expect": {"verbs": []}},
    {"call": "authenticate", "event": auth("c-now", relay="WSS://Relay.Example.com:443/"), "now": T0, "expect": {"noError": True}},
    {"call": "drainOutbound", "expect": {"verbs": ["AUTH"]}},
])
# 7. close() on an active session with deliveries refuses until cancel().
d1, d2 = notes(2, 7000)
write("close-with-deliveries", """
close() on a session that still holds deliveries refuses with invalid_relay_session (nothing is
orphaned); cancel() returns a retryable/cancelled decision for every held delivery (in flight
and pending, in publish order) and closeTransport; then close() succeeds.
""", connected() + [
    {"call": "publish", "events": [d1]},
    {"call": "drainOutbound"},
    {"call": "confirmSent", "eventIds": [d1["id"]], "now": T0},
    {"call": "publish", "events": [d2]},
    {"call": "close", "expect": {"error": "invalid_relay_session"}},
    {"call": "cancel", "expect": {"kinds": ["deliveryChanged", "deliveryChanged", "closeTransport"],
                                   "decisions": [[d1["id"], "retryable", "cancelled"], [d2["id"], "retryable", "cancelled"]]}},
    {"call": "close", "expect": {"noError": True}},
    {"call": "snapshot", "expect": {"snapshot": {"state": "closed", "pendingPublishes": 0}}},
])

# 8. COUNTs can be cancelled; their ids are not subscription ids.
write("count-cancel", """
A subscribe under the id of a pending COUNT is refused; cancelCount drops the COUNT (a CLOSE
goes out when it was already sent) and a late answer is only a notice.
""", connected() + [
    {"call": "count", "id": "n", "filters": [{"kinds": [14]}]},
    {"call": "subscribe", "id": "n", "filters": [{"kinds": [14]}], "expect": {"error": "invalid_relay_session"}},
    {"call": "drainOutbound", "expect": {"verbs": ["COUNT"]}},
    {"call": "confirmSent", "eventIds": []},
    {"call": "cancelCount", "id": "n", "expect": {"noError": True}},
    {"call": "cancelCount", "id": "n", "expect": {"error": "invalid_relay_session"}},
    {"call": "drainOutbound", "expect": {"verbs": ["CLOSE"]}},
    {"call": "receive", "text": frame("COUNT", "n", {"count": 3}), "expect": {"kinds": ["notice"]}},
    {"call": "subscribe", "id": "n", "filters": [{"kinds": [14]}], "expect": {"noError": True}},
])
print(f"make-session-regressions: wrote {len([f for f in os.listdir(OUT) if f.endswith('.jsonl')])} scripts to {OUT}")
