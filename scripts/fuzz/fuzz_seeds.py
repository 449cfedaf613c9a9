#!/usr/bin/env python3
"""Writes the fuzz seed corpora into OUTDIR/<target>/: the NIP-01 fixtures of
Tests/Fixtures/nostr-sdk-ios and synthetic inputs for each parser.
usage: fuzz_seeds.py OUTDIR"""
import glob
import json
import os
import re
import sys

out = sys.argv[1]
F = "Tests/Fixtures/nostr-sdk-ios"
fixtures = {os.path.basename(p)[:-5]: open(p).read() for p in glob.glob(F + "/*.json")}


def w(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def compact(text):
    return json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))


good = ["test_event", "simple_note", "text_note", "metadata_json_stringified", "reaction", "text_note_root_reply",
        "deletion", "relay_list_metadata", "seal", "legacy_encrypted_direct_message", "authentication_event"]
for n in good:
    w("event", n, compact(fixtures[n]))
    w("json", n, fixtures[n])
for n in ["req", "close_request", "count_request", "event_request", "auth_request"]:
    w("client-frame", n, compact(fixtures[n]))
w("client-frame", "events_batch", json.dumps(["EVENTS", json.loads(fixtures["test_event"]), json.loads(fixtures["simple_note"])], separators=(",", ":")))
w("client-frame", "req_filters", json.dumps(["REQ", "chat", {"kinds": [14], "#p": ["ab" * 32], "since": 1, "until": 2, "limit": 100}, {"ids": ["abc"]}], separators=(",", ":")))
for n in ["event", "ok_fail_reason", "ok_success", "ok_success_reason", "ok_success_reason_prefix_no_message", "ok_unknown_reason",
          "eose", "closed", "notice", "auth_challenge", "count_response"]:
    w("relay-frame", n, compact(fixtures[n]))
w("relay-frame", "count_hll", json.dumps(["COUNT", "c", {"count": 5, "approximate": True, "hll": "00" * 256}]))
for n in ["filter", "filter_all_fields", "filter_with_extra_fields"]:
    w("filter", n, compact(fixtures[n]))
w("filter", "tags", json.dumps({"kinds": [1, 14], "#e": ["ab" * 32], "#t": ["x"], "authors": ["abc"], "since": 5, "limit": 0}))
w("nip11", "relay_info", re.sub(r",(\s*[}\]])", r"\1", fixtures["relay_info"]))
w("nip11", "minimal", json.dumps({"name": "x", "supported_nips": [1, 11, 42], "limitation": {"max_message_length": 524288, "auth_required": True}}))
w("websocket", "text", bytes([0x81, 5]) + b"hello")
w("websocket", "fragmented_ping", bytes([0x01, 3]) + b"hel" + bytes([0x89, 2, 0x70, 0x71, 0x80, 2]) + b"lo")
w("websocket", "len16", bytes([0x81, 126, 0x01, 0x2C]) + b"a" * 300)
w("websocket", "close", bytes([0x88, 5, 0x03, 0xE8]) + b"bye")
event_frame = compact(fixtures["event"]).replace('"some-subscription-id"', '"s"')
w("session", "conversation", "\n".join([event_frame, '["EOSE","s"]', '["NOTICE","hi"]', '["AUTH","ch"]',
                                        '["CLOSED","s","auth-required: x"]', compact(fixtures["ok_success"])]))
# Negentropy v1 messages: an initial split (16 fingerprints), an id list, skips and bounds with id
# prefixes, and the NIP-77 frames that carry them.
def varint(n):
    out = [n & 0x7F]
    n >>= 7
    while n:
        out.insert(0, 0x80 | (n & 0x7F))
        n >>= 7
    return bytes(out)
fp = bytes(range(16))
split = bytes([0x61]) + b"".join(varint(1 + 1000 * i) + b"\x00" + b"\x01" + fp for i in range(15)) + b"\x00\x00\x01" + fp
w("negentropy", "split", split)
w("negentropy", "idlist", bytes([0x61, 0x00, 0x00, 0x02, 0x02]) + bytes(range(32)) + bytes(range(32, 64)))
w("negentropy", "prefixes", bytes([0x61]) + varint(1_700_000_001) + bytes([0x03, 0xAB, 0xCD, 0xEF, 0x00]) + varint(1) + bytes([0x20]) + bytes(range(32)) + b"\x01" + fp)
w("negentropy", "empty", bytes([0x61]))
w("negentropy", "version2", bytes([0x62]))
w("relay-frame", "neg_msg", json.dumps(["NEG-MSG", "n", split.hex()], separators=(",", ":")))
w("relay-frame", "neg_err", json.dumps(["NEG-ERR", "n", "blocked: too big", 100000], separators=(",", ":")))
w("client-frame", "neg_open", json.dumps(["NEG-OPEN", "n", {"kinds": [1059], "#p": ["ab" * 32]}, split.hex()], separators=(",", ":")))
w("client-frame", "neg_close", json.dumps(["NEG-CLOSE", "n"], separators=(",", ":")))
# giftwrap: mode 0 is a payload under the first encrypt_decrypt vector's key (NIP-44's vectors);
# modes 1 and 2 are a rumor and a seal as a wrap from alice to bob holds them.
v2 = json.load(open("Tests/Fixtures/nip44/nip44.vectors.json"))["v2"]
w("giftwrap", "payload", b"\x00" + v2["valid"]["encrypt_decrypt"][0]["payload"].encode())
for i, v in enumerate(v2["invalid"]["decrypt"][:4]):
    w("giftwrap", f"bad-payload-{i}", b"\x00" + v["payload"].encode())
rumor = {"id": "00" * 32, "pubkey": "ab" * 32, "created_at": 1700000000, "kind": 14, "tags": [["p", "cd" * 32], ["subject", "hi"]], "content": "hello"}
w("giftwrap", "rumor", b"\x01" + json.dumps({k: v for k, v in rumor.items() if k != "id"}, separators=(",", ":")).encode())
w("giftwrap", "seal", b"\x02" + compact(fixtures["seal"]).encode())
print(f"fuzz seeds: {sum(len(fs) for _, _, fs in os.walk(out))} files in {out}")
