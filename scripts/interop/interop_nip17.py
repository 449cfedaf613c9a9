#!/usr/bin/env python3
"""NIP-17 private messages between Softchat and rust-nostr (nostr-sdk 0.45.1's Python bindings:
nip59_make_gift_wrap, UnwrappedGift, nip44_encrypt/nip44_decrypt) over rust-nostr's LocalRelay,
each side with its kind-10050 inbox list on the relay. Run with the peers venv's Python
(scripts/interop/peers setup), from the repository root:

  1. rust-nostr → Softchat: a kind-14 rumor gift-wrapped by nip59_make_gift_wrap appears in
     `softchat dm list` with its sender, recipients and text;
  2. Softchat → rust-nostr: a message from `softchat dm send` is unwrapped by UnwrappedGift with
     the right sender, recipients and text, and its wrap's tags and kinds are NIP-59's;
  3. a group message from `softchat dm send` to three rust-nostr keys reaches all three (each
     through its own wrap), and the sender's second device (another account, same key) lists it;
  4. a rust-nostr group message to Softchat and two others lists in Softchat with all recipients;
  5. NIP-44 both ways: 1's two layers are rust-nostr's encryption opened by the Softchat core, and
     a Softchat wrap's two layers are opened here by rust-nostr's bare nip44_decrypt;
  6. a send to a key with no inbox list is refused (recipient_has_no_inbox_relays) and queues nothing.
Prints "interop-nip17: N passed, M failed"; exits non-zero on any failure.
usage: .peers/venv/bin/python scripts/interop/interop_nip17.py [SOFTCHAT_BINARY]
"""
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

import nostr_sdk as ns
import websockets

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from checks import Tally, peers  # noqa: E402

SOFTCHAT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/debug/softchat")
tally = Tally("interop-nip17", show_passes=True)
check = tally.check


def softchat(*args, timeout=120):
    return subprocess.run([SOFTCHAT, *args], capture_output=True, text=True, timeout=timeout)


async def publish(url, events):
    async with websockets.connect(url, max_size=None) as ws:
        for e in events:
            await ws.send(json.dumps(["EVENT", json.loads(e.as_json())]))
            answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if answer[0] != "OK" or not answer[2]:
                raise RuntimeError(f"relay refused {e.id().to_hex()}: {answer}")


async def fetch(url, filt):
    async with websockets.connect(url, max_size=None) as ws:
        await ws.send(json.dumps(["REQ", "f", filt]))
        out = []
        while True:
            m = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if m[0] == "EOSE":
                return [ns.Event.from_json(json.dumps(e)) for e in out]
            if m[0] == "EVENT":
                out.append(m[2])


def inbox_list(keys, url):
    return ns.EventBuilder(ns.Kind(10050), "").tags([ns.Tag.parse(["relay", url])]).finalize(keys)


async def unwrap_all(url, keys):
    """Every wrap for `keys` on the relay, unwrapped by rust-nostr: (sender hex, rumor)."""
    wraps = await fetch(url, {"kinds": [1059], "#p": [keys.public_key().to_hex()]})
    out = []
    for w in wraps:
        g = ns.UnwrappedGift.from_gift_wrap(keys, w)
        out.append((g.sender().to_hex(), g.rumor(), w))
    return out


def p_tags(rumor):
    return sorted(t.to_vec()[1] for t in rumor.tags() if t.to_vec()[0] == "p")


async def main():
    work = tempfile.mkdtemp(prefix="softchat-interop-nip17-")
    url = peers.start("local", env={"PEERS_LOCAL_ARGS": "--rate 100000:1000000"})
    try:
        key = os.path.join(work, "me.key")
        out = softchat("keygen", "--out", key)
        me = json.loads(out.stdout)["publicKey"] if out.stdout.startswith("{") else out.stdout.split()[0]
        secret = open(key).read().strip()
        check(ns.Keys.parse(secret).public_key().to_hex() == me, "rust-nostr derives the Softchat key's public key")
        db, db2 = os.path.join(work, "me.db"), os.path.join(work, "second-device.db")
        r1, r2, r3 = ns.Keys.generate(), ns.Keys.generate(), ns.Keys.generate()
        await publish(url, [inbox_list(k, url) for k in (r1, r2, r3)])
        # Softchat publishes its own list on the first `dm list --relay`.
        res = softchat("dm", "list", "--key", key, "--db", db, "--relay", url, "--json", "--timeout", "20")
        check(res.returncode == 0 and res.stdout == "", f"dm list on an empty inbox exits 0 and lists nothing ({res.returncode}: {res.stderr[-300:]})")
        lists = await fetch(url, {"kinds": [10050], "authors": [me]})
        check(len(lists) == 1 and [t.to_vec() for t in lists[0].tags()] == [["relay", url]],
              f"Softchat published its kind-10050 list naming the relay ({[e.as_json() for e in lists]})")

        # 1. rust-nostr → Softchat.
        text1 = "from rust-nostr: \"quoted\" \\ back\nline ☃ 🤙"
        rumor = ns.EventBuilder(ns.Kind(14), text1).tags([ns.Tag.parse(["p", me])]).finalize_unsigned(r1.public_key()).ensure_id()
        wrap = ns.nip59_make_gift_wrap(r1, ns.PublicKey.parse(me), rumor)
        await publish(url, [wrap])
        res = softchat("dm", "list", "--key", key, "--db", db, "--relay", url, "--json", "--timeout", "20")
        got = [json.loads(l) for l in res.stdout.splitlines()]
        check(res.returncode == 0 and len(got) == 1, f"dm list shows the one message from rust-nostr ({res.returncode}: {res.stdout[-300:]} {res.stderr[-300:]})")
        if got:
            m = got[0]
            check(m["from"] == r1.public_key().to_hex() and m["to"] == [me] and m["content"] == text1
                  and m["id"] == rumor.id().to_hex() and m["created_at"] == rumor.created_at().as_secs(),
                  f"…with rust-nostr's rumor id, sender, recipient, time and exact text ({m})")

        # 2. Softchat → rust-nostr.
        text2 = "from softchat: é 東京 \"x\" \t tab"
        res = softchat("dm", "send", "--to", r1.public_key().to_hex(), "--message", text2, "--key", key, "--db", db, "--relay", url, "--json", "--timeout", "20")
        sent = json.loads(res.stdout) if res.stdout.startswith("{") else {}
        check(res.returncode == 0 and sent.get("accepted") == 2, f"dm send: both wraps (recipient's, self-copy) accepted ({res.stdout[-400:]} {res.stderr[-300:]})")
        unwrapped = await unwrap_all(url, r1)
        mine = [(s, r, w) for s, r, w in unwrapped if r.content() == text2]
        check(len(mine) == 1, f"rust-nostr unwraps exactly one wrap holding the message ({len(unwrapped)} wraps for r1)")
        if mine:
            s, r, w = mine[0]
            check(s == me and r.author().to_hex() == me and p_tags(r) == [r1.public_key().to_hex()] and r.kind().as_u16() == 14,
                  f"…with sender {me[:12]}…, recipient r1, kind 14")
            check(r.id().to_hex() == sent.get("id"), "…and the rumor id softchat reported")
            check(w.author().to_hex() != me and w.kind().as_u16() == 1059 and [t.to_vec() for t in w.tags()] == [["p", r1.public_key().to_hex()]]
                  and time.time() - 2 * 86400 - 60 <= w.created_at().as_secs() <= time.time() + 1,
                  "…the wrap is signed by a one-time key, p-tags only the recipient, created_at within two days back")
            # 5. NIP-44 on the bare layers: rust-nostr's nip44_decrypt opens the wrap, then the seal.
            seal_json = ns.nip44_decrypt(r1.secret_key(), w.author(), w.content())
            seal = ns.Event.from_json(seal_json)
            check(seal.verify() and seal.kind().as_u16() == 13 and seal.author().to_hex() == me, "nip44_decrypt opens the wrap to a seal signed by the sender")
            rumor_json = json.loads(ns.nip44_decrypt(r1.secret_key(), seal.author(), seal.content()))
            check(rumor_json["content"] == text2 and "sig" not in rumor_json, "nip44_decrypt opens the seal to the unsigned rumor")

        # 3. A group message from Softchat to three rust-nostr keys, and the second device.
        text3 = "group hello from softchat"
        group = [k.public_key().to_hex() for k in (r1, r2, r3)]
        res = softchat("dm", "send", *sum((["--to", g] for g in group), []), "--message", text3, "--key", key, "--db", db, "--relay", url, "--json", "--timeout", "20")
        sent3 = json.loads(res.stdout) if res.stdout.startswith("{") else {}
        check(res.returncode == 0 and sent3.get("accepted") == 4, f"group send: four wraps accepted ({res.stdout[-300:]} {res.stderr[-300:]})")
        for name, k in (("r1", r1), ("r2", r2), ("r3", r3)):
            hits = [(s, r) for s, r, _ in await unwrap_all(url, k) if r.content() == text3]
            check(len(hits) == 1 and hits[0][0] == me and p_tags(hits[0][1]) == sorted(group),
                  f"{name} unwraps the group message once, from the sender, to all three ({len(hits)})")
        res = softchat("dm", "list", "--key", key, "--db", db2, "--relay", url, "--json", "--timeout", "20")
        second = [json.loads(l) for l in res.stdout.splitlines()]
        # Listed oldest first; messages of one second come in id order, so compare as sets.
        check(res.returncode == 0 and sorted(m["content"] for m in second) == sorted([text1, text2, text3])
              and next((m for m in second if m["content"] == text3), {}).get("to") == sorted(group),
              f"the sender's second device lists all three messages, the group one to all three ({[m['content'] for m in second]})")

        # 4. A rust-nostr group message to Softchat and two others.
        text4 = "group from rust-nostr"
        rumor4 = ns.EventBuilder(ns.Kind(14), text4).tags([ns.Tag.parse(["p", x]) for x in (me, group[1], group[2])]).finalize_unsigned(r1.public_key())
        wraps4 = [ns.nip59_make_gift_wrap(r1, ns.PublicKey.parse(x), rumor4) for x in (me, group[1], group[2])]
        await publish(url, wraps4)
        res = softchat("dm", "list", "--key", key, "--db", db, "--relay", url, "--json", "--timeout", "20", "--with", r1.public_key().to_hex())
        direct = [json.loads(l)["content"] for l in res.stdout.splitlines()]
        check(sorted(direct) == sorted([text1, text2]), f"dm list --with r1 shows the one-to-one room only ({direct})")
        res = softchat("dm", "list", "--key", key, "--db", db, "--json", "--timeout", "20")
        every = [json.loads(l) for l in res.stdout.splitlines()]
        g4 = [m for m in every if m["content"] == text4]
        check(len(g4) == 1 and g4[0]["from"] == r1.public_key().to_hex() and g4[0]["to"] == sorted([me, group[1], group[2]]),
              f"rust-nostr's group message lists once with its three recipients ({g4})")
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            kinds = sorted({k for (k,) in c.execute("SELECT kind FROM events")})
            wraps_seen = c.execute("SELECT COUNT(*) FROM gift_wraps").fetchone()[0]
        check(14 not in kinds, f"the account stores no kind-14 event in the clear (kinds {kinds})")

        # 6. No inbox list: refused, nothing queued.
        stranger = ns.Keys.generate().public_key().to_hex()
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            before = c.execute("SELECT COUNT(*) FROM publish_intents").fetchone()[0]
        res = softchat("dm", "send", "--to", stranger, "--message", "x", "--key", key, "--db", db, "--relay", url, "--json", "--timeout", "10")
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            after = c.execute("SELECT COUNT(*) FROM publish_intents").fetchone()[0]
        check(res.returncode == 1 and "recipient_has_no_inbox_relays" in res.stdout + res.stderr and before == after,
              f"a send to a key without an inbox list is refused with recipient_has_no_inbox_relays, nothing queued ({res.returncode}, {before}→{after})")
        check(wraps_seen >= 3, f"every wrap addressed to the account has one recorded outcome ({wraps_seen})")
    finally:
        peers.stop("local")
    tally.finish()


asyncio.run(main())
