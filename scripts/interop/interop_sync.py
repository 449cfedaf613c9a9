#!/usr/bin/env python3
"""Sync against rust-nostr's LocalRelay (scripts/interop/peers; it caps every REQ at 500 events) and
nostr-relay (it reads `until` exclusively without saying so).

  * A cut anywhere in a 1,200-event sync: a TCP proxy in front of the relay cuts the connection
    after a given share of the sync's bytes and refuses reconnections, so `softchat sync` ends
    without finishing; it must then report synced:false and leave the durable cursor where it
    was. A second `softchat sync` through the same relay URL (the proxy now passes everything)
    must end with all 1,200 events held, each once.
  * Events that reach the relay late: after a sync, events backdated within the horizon (a kind-1
    note two minutes old; a kind-1059 gift wrap dated a day ago, as NIP-59 does on purpose) are
    published; the next sync of the same account brings them.
Prints "interop-sync: N passed, M failed"; exits non-zero on any failure.
Usage: interop_sync.py SOFTCHAT_BINARY   (run from the repository root; peers started here)
"""
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import random
from functools import partial

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from checks import Tally, peers, run_softchat, sign_events  # noqa: E402

SOFTCHAT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/debug/softchat")
tally = Tally("interop-sync", show_passes=True)
check = tally.check
softchat = partial(run_softchat, SOFTCHAT)
sign = partial(sign_events, SOFTCHAT)


class CutProxy:
    """Forwards TCP to the relay. Counts what the relay sends on WebSocket connections (NIP-11
    fetches pass uncounted); once `cut_after` bytes went through, closes that connection and
    refuses every later one until `heal()`."""

    def __init__(self, upstream_port, cut_after=None):
        self.upstream_port = upstream_port
        self.cut_after = cut_after
        self.sent = 0
        self.refusing = False
        self.cuts = 0
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.running = True
        threading.Thread(target=self.accept_loop, daemon=True).start()

    @property
    def url(self):
        return f"ws://127.0.0.1:{self.port}"

    def heal(self):
        with self.lock:
            self.refusing = False
            self.cut_after = None

    def stop(self):
        self.running = False
        self.listener.close()

    def accept_loop(self):
        while self.running:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                refusing = self.refusing
            if refusing:
                client.close()
                continue
            threading.Thread(target=self.serve, args=(client,), daemon=True).start()

    def serve(self, client):
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        except OSError:
            client.close()
            return
        first = client.recv(65536)
        counted = b"upgrade: websocket" in first.lower()
        upstream.sendall(first)
        done = threading.Event()

        def pump(src, dst, count):
            try:
                while not done.is_set():
                    data = src.recv(65536)
                    if not data:
                        break
                    if count:
                        with self.lock:
                            limit = self.cut_after
                            if limit is not None and self.sent + len(data) >= limit:
                                part = max(0, limit - self.sent)
                                self.sent = limit
                                self.refusing = True
                                self.cuts += 1
                                cut = True
                            else:
                                self.sent += len(data)
                                cut = False
                        if cut:
                            dst.sendall(data[:part])
                            break
                    dst.sendall(data)
            except OSError:
                pass
            done.set()
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        t = threading.Thread(target=pump, args=(upstream, client, counted), daemon=True)
        t.start()
        pump(client, upstream, False)
        t.join(timeout=5)
        client.close()
        upstream.close()


def sync(url, db, flt, timeout):
    r = softchat(["sync", "--relay", url, "--db", db, "--filter", json.dumps(flt), "--json", "--timeout", str(timeout)])
    try:
        return json.loads(r.stdout.strip().split("\n")[-1]), r
    except ValueError:
        return {}, r


def sync_each(url, db, filters, timeout):
    """`softchat sync --each`: one subscription per filter."""
    r = softchat(["sync", "--relay", url, "--db", db, "--filter", json.dumps(filters), "--each", "--json",
                  "--timeout", str(timeout)])
    try:
        return json.loads(r.stdout.strip().split("\n")[-1]), r
    except ValueError:
        return {}, r


def distinct(db):
    c = sqlite3.connect(db)
    try:
        return c.execute("select count(*), count(distinct id) from events").fetchone()
    finally:
        c.close()


def cursor(db):
    c = sqlite3.connect(db)
    try:
        return c.execute("select newest_created_at from sync_cursors where subscription_id = 'sync'").fetchone()
    finally:
        c.close()


def main():
    work = tempfile.mkdtemp(prefix="softchat-interop-sync-")
    lmdb = os.path.join(work, "lmdb")
    os.makedirs(lmdb)
    local_env = {"PEERS_LOCAL_ARGS": f"--rate 100000:10000000 --lmdb {lmdb}"}
    try:
        peers.stop("local")
        relay = peers.start("local", env=local_env)
        relay_port = peers.running("local")["port"]
        key = os.path.join(work, "writer.key")
        softchat(["keygen", "--out", key])
        tag = f"softchat-sync-{random.randrange(1 << 30)}"
        now = int(time.time())
        # 1,200 events, three per second: runs of equal created_at cross the 500-event pages.
        drafts = [{"kind": 1, "created_at": now - 1000 + i // 3, "tags": [["t", tag]], "content": f"history {i}"} for i in range(1200)]
        lines = sign(key, drafts)
        ids = {json.loads(l)["id"] for l in lines}
        r = softchat(["publish", "--relay", relay, "--key", key, "--db", os.path.join(work, "writer.db"), "--json", "--timeout", "120"],
                     "\n".join(lines) + "\n")
        check(r.returncode == 0, f"1,200 events published to LocalRelay ({r.stdout.strip()[-200:]})")
        flt = {"kinds": [1], "#t": [tag]}

        # The bytes of a whole sync, through a proxy that never cuts.
        probe = CutProxy(relay_port)
        result, _ = sync(probe.url, os.path.join(work, "probe.db"), flt, 60)
        total = probe.sent
        probe.stop()
        check(result.get("synced") is True and result.get("events") == 1200, f"an uncut sync holds 1,200 ({result}, {total} bytes)")

        # Cuts early, inside pages, near the page boundaries (500 and 1,000 events), near the end.
        for share in (0.03, 0.25, 0.41, 0.43, 0.6, 0.83, 0.85, 0.97):
            db = os.path.join(work, f"cut-{share}.db")
            proxy = CutProxy(relay_port, cut_after=int(total * share))
            first, r1 = sync(proxy.url, db, flt, 6)
            held_first = distinct(db)[0]
            check(proxy.cuts == 1 and first.get("synced") is False and held_first < 1200,
                  f"cut at {share:.0%}: the cut sync says it is not synced ({first}, cuts {proxy.cuts})")
            check(cursor(db) is None, f"cut at {share:.0%}: the durable cursor did not move ({cursor(db)})")
            proxy.heal()
            second, r2 = sync(proxy.url, db, flt, 60)
            count, unique = distinct(db)
            c = sqlite3.connect(db)
            held = {row[0] for row in c.execute("select id from events")}
            c.close()
            check(second.get("synced") is True and count == 1200 and unique == 1200 and held == ids,
                  f"cut at {share:.0%}: resumed through the same URL, all 1,200 held once ({second}, {count}/{unique}, "
                  f"first run held {held_first}) {r2.stderr[-200:]}")
            proxy.stop()

        # Late arrivals within the horizon reach the next sync.
        reader = os.path.join(work, "reader.db")
        late_tag = tag + "-late"
        notes = {"kinds": [1], "#t": [late_tag]}
        wraps = {"kinds": [1059], "#t": [late_tag]}
        first, _ = sync(relay, reader, [notes, wraps], 30)
        check(first.get("synced") is True and first.get("events") == 0, f"late: the first sync holds nothing yet ({first})")
        now = int(time.time())
        recipient = json.loads(lines[0])["pubkey"]  # LocalRelay wants one recipient on a gift wrap
        late = sign(key, [
            {"kind": 1, "created_at": now - 120, "tags": [["t", late_tag]], "content": "written two minutes ago, published now"},
            {"kind": 1059, "created_at": now - 86_400, "tags": [["p", recipient], ["t", late_tag]], "content": "a gift wrap dated a day back"},
            {"kind": 1059, "created_at": now - 40 * 3600, "tags": [["p", recipient], ["t", late_tag]], "content": "another, 40 hours back"},
        ])
        r = softchat(["publish", "--relay", relay, "--key", key, "--db", os.path.join(work, "writer.db"), "--json", "--timeout", "60"],
                     "\n".join(late) + "\n")
        check(r.returncode == 0, f"late: three backdated events published after the sync ({r.stdout.strip()})")
        second, _ = sync(relay, reader, [notes, wraps], 30)
        late_ids = {json.loads(l)["id"] for l in late}
        c = sqlite3.connect(reader)
        held = {row[0] for row in c.execute("select id from events")}
        c.close()
        check(second.get("synced") is True and late_ids <= held,
              f"late: the next sync brings all three backdated events ({second}, {len(late_ids & held)}/3)")
        # One event too large for any frame to the relay (600 KB against 512 KiB) used to fail
        # its whole claimed batch, claimed again every second: nothing behind it was ever sent.
        big, small = sign(key, [{"kind": 1, "created_at": now, "tags": [["t", tag]], "content": "x" * 600_000},
                                {"kind": 1, "created_at": now, "tags": [["t", tag]], "content": "behind the big one"}])
        pub_db = os.path.join(work, "big.db")
        started = time.monotonic()
        r = softchat(["publish", "--relay", relay, "--key", key, "--db", pub_db, "--json", "--timeout", "10"], big + "\n" + small + "\n")
        took = time.monotonic() - started
        c = sqlite3.connect(pub_db)
        states = dict(((row[0], (row[1], row[2], row[3])) for row in
                       c.execute("select event_id, state, category, message from publish_intents")))
        c.close()
        big_id, small_id = json.loads(big)["id"], json.loads(small)["id"]
        refused = states.get(big_id, ("", "", ""))
        check(refused[0] == "rejected" and refused[1] == "invalid" and "524288" in refused[2]
              and states.get(small_id, ("",))[0] == "accepted" and took < 10,
              f"a 600 KB event is rejected (invalid, naming the limit) and the small one behind it accepted, in {took:.1f} s "
              f"({refused[:2]}, {refused[2][-120:]!r}, small {states.get(small_id, ('',))[0]})")

        peers.stop("local")

        # nostr-relay reads `until` exclusively and says so nowhere (NIP-11 names only its
        # software): the same 1,200 events, three a second, pages ending inside a second.
        # Assuming NIP-01's inclusive reading held 1,198 and reported synced.
        exclusive = peers.start("open")
        r = softchat(["publish", "--relay", exclusive, "--key", key, "--db", os.path.join(work, "writer-open.db"), "--json",
                      "--timeout", "300"], "\n".join(lines) + "\n")
        check(r.returncode == 0, f"nostr-relay: 1,200 events published ({r.stdout.strip()[-200:]})")
        db = os.path.join(work, "open.db")
        result, r = sync(exclusive, db, flt, 120)
        count, unique = distinct(db)
        c = sqlite3.connect(db)
        held = {row[0] for row in c.execute("select id from events")}
        c.close()
        check(result.get("synced") is True and result.get("events") == 1200 and held == ids,
              f"nostr-relay (until read exclusively, unannounced): all 1,200 held ({result}, {count}/{unique}) {r.stderr[-200:]}")

        # Forty subscriptions (ten stored events each) through one managed transport. nostr-relay
        # keeps 32 subscriptions per connection, says so nowhere and refuses past it with a NOTICE
        # alone: each subscription used to open three REQs at once, and 12 subscriptions held 84 of
        # 120 events after 60 s. The live REQs now travel together and the rest wait for a slot.
        many_tag = tag + "-many"
        many = sign(key, [{"kind": 1, "created_at": now - 500 + i, "tags": [["t", f"{many_tag}-{s}"]], "content": f"s{s} e{i}"}
                          for s in range(40) for i in range(10)])
        r = softchat(["publish", "--relay", exclusive, "--key", key, "--db", os.path.join(work, "writer-many.db"), "--json",
                      "--timeout", "120"], "\n".join(many) + "\n")
        check(r.returncode == 0, f"nostr-relay: 400 events for 40 subscriptions published ({r.stdout.strip()[-200:]})")
        filters = [{"kinds": [1], "#t": [f"{many_tag}-{s}"]} for s in range(40)]
        db = os.path.join(work, "many.db")
        started = time.monotonic()
        result, r = sync_each(exclusive, db, filters, 120)
        took = time.monotonic() - started
        count, unique = distinct(db)
        check(result.get("synced") is True and count == 400 and unique == 400,
              f"nostr-relay: 40 subscriptions, every one synced, all 400 events held in {took:.1f} s ({result}, {count}/{unique}) "
              f"{r.stderr[-200:]}")

        # nostr-relay with rate limits (per IP: EVENT 5/s and 100/min): every EVENT past them is
        # answered `OK false "rate-limited: slow down"` and the relay sleeps longer after each
        # one. 300 events must all end accepted (a rate limit is "later", never a failure that
        # spends the retry budget), none rejected.
        peers.stop("open")
        limited = peers.start("ratelimit")
        paced = sign(key, [{"kind": 1, "created_at": now - 400 + i, "tags": [["t", tag + "-paced"]], "content": f"paced {i}"}
                           for i in range(300)])
        db = os.path.join(work, "writer-limited.db")
        started = time.monotonic()
        r = softchat(["publish", "--relay", limited, "--key", key, "--db", db, "--json", "--timeout", "900"],
                     "\n".join(paced) + "\n", timeout=960)
        took = time.monotonic() - started
        c = sqlite3.connect(db)
        ends = dict(((state, category), n) for state, category, n in
                    c.execute("select state, category, count(*) from publish_intents group by 1, 2"))
        limits = c.execute("select count(*) from publish_intents where attempts > 1").fetchone()[0]
        c.close()
        accepted = sum(n for (state, _), n in ends.items() if state == "accepted")
        check(r.returncode == 0 and accepted == 300 and not any(state == "rejected" for state, _ in ends),
              f"rate-limited nostr-relay: 300 events all accepted, none rejected, in {took:.0f} s "
              f"({limits} sent more than once; {ends}) {r.stdout.strip()[-160:]}")

        # Syncing them back from the same relay (REQ 5/s per IP): twenty subscriptions of fifteen
        # events each, live REQs, ahead REQs and pages well past five a second. nostr-relay drops
        # a REQ over its rate with a bare NOTICE "rate-limited" (no CLOSED, no EOSE): such a REQ
        # used to keep its slot for the connection's life (issue 45, path 3).
        paced_filters = [{"kinds": [1], "#t": [tag + "-paced"], "since": now - 400 + 15 * s, "until": now - 400 + 15 * s + 14}
                         for s in range(20)]
        db = os.path.join(work, "reader-limited.db")
        started = time.monotonic()
        result, r = sync_each(limited, db, paced_filters, 300)
        took = time.monotonic() - started
        count, unique = distinct(db)
        check(result.get("synced") is True and count == 300 and unique == 300,
              f"rate-limited nostr-relay: 20 subscriptions synced back, all 300 events held in {took:.1f} s "
              f"({result}, {count}/{unique}) {r.stderr[-200:]}")
        peers.stop("ratelimit")

        # nostr-relay refusing reads until NIP-42 (`query` needs role r): the writer key holds rw.
        # Twenty subscriptions, synced only after AUTH; their REQs before it are answered
        # `auth-required:` and asked again once the AUTH is accepted (issue 45, path 6).
        gated = peers.start("auth")
        writer = os.path.join(work, "writer.key")
        with open(writer, "w") as f:
            f.write(peers.WRITER_SECRET + "\n")
        os.chmod(writer, 0o600)
        gated_tag = tag + "-gated"
        gated_events = sign(writer, [{"kind": 1, "created_at": now - 300 + i, "tags": [["t", f"{gated_tag}-{i % 20}"]],
                                      "content": f"gated {i}"} for i in range(200)])
        r = softchat(["publish", "--relay", gated, "--key", writer, "--db", os.path.join(work, "writer-gated.db"), "--json",
                      "--timeout", "120"], "\n".join(gated_events) + "\n")
        check(r.returncode == 0, f"NIP-42 nostr-relay: 200 events published after AUTH ({r.stdout.strip()[-200:]})")
        db = os.path.join(work, "reader-gated.db")
        started = time.monotonic()
        r = softchat(["sync", "--relay", gated, "--db", db, "--key", writer, "--filter",
                      json.dumps([{"kinds": [1], "#t": [f"{gated_tag}-{s}"]} for s in range(20)]), "--each", "--json",
                      "--timeout", "120"])
        took = time.monotonic() - started
        try:
            result = json.loads(r.stdout.strip().split("\n")[-1])
        except ValueError:
            result = {}
        count, unique = distinct(db)
        check(result.get("synced") is True and count == 200 and unique == 200,
              f"NIP-42 nostr-relay refusing reads until AUTH: 20 subscriptions synced, all 200 held in {took:.1f} s "
              f"({result}, {count}/{unique}) {r.stderr[-200:]}")
    finally:
        peers.stop("local", "open", "ratelimit", "auth")
        shutil.rmtree(work, ignore_errors=True)
    tally.finish()


if __name__ == "__main__":
    main()
