#!/usr/bin/env python3
"""NIP-77 negentropy interop, both ways, on sets with differences on both sides:

  * Softchat's client (`softchat sync`) against rust-nostr's LocalRelay (scripts/interop/peers, a
    negentropy responder): the account must end with its own events plus every event the relay
    holds for the filter, by the relay's full REQ listing (scripts/interop/neg_peer.py fetch-ids), and
    report the method "negentropy" (or "paging" when the account held nothing).
  * rust-nostr's client (`Client.sync`, direction both, from the Python bindings) against
    Softchat's test relay (`softchat relay`): what it fetched and what it sent must be exactly
    the two differences, and both sides must end with the union.
  * Fallback: Softchat's client against nostr-relay (no NIP-77) and against a test relay that
    answers NEG-OPEN with a NOTICE: synced by paging, recorded in the account as unsupported.
Set sizes 0, 1, 40, 2,000 and 10,000 (and 100,000 with --big). Prints
"interop-negentropy: N passed, M failed"; exits non-zero on any failure.
Usage: interop_negentropy.py SOFTCHAT_BINARY [--big]   (from the repository root; peers started here)
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from checks import Tally, peers  # noqa: E402

SOFTCHAT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else ".build/debug/softchat")
BIG = "--big" in sys.argv
PY = peers.VENV_PYTHON
NEG_PEER = os.path.abspath("scripts/interop/neg_peer.py")
tally = Tally("interop-negentropy", show_passes=True)
check = tally.check


def neg_peer(*args, timeout=900):
    r = subprocess.run([PY, NEG_PEER, *args], capture_output=True, text=True, timeout=timeout)
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"error": f"neg_peer {args[0]} exit {r.returncode}: {r.stdout[-500:]} {r.stderr[-1500:]}"}


def lines(path):
    with open(path) as f:
        return [l for l in f.read().split("\n") if l]


def write(path, rows):
    with open(path, "w") as f:
        f.write("".join(r + "\n" for r in rows))


def ids_of(rows):
    return {json.loads(r)["id"] for r in rows}


def account_ids(db):
    c = sqlite3.connect(db)
    try:
        return {row[0] for row in c.execute("select id from events")}
    finally:
        c.close()


def ingest(db, rows):
    if not rows:
        subprocess.run([SOFTCHAT, "account", "check", "--db", db], capture_output=True, text=True)
        return True
    r = subprocess.run([SOFTCHAT, "account", "ingest", "--db", db], input="".join(x + "\n" for x in rows),
                       capture_output=True, text=True, timeout=900)
    return r.returncode == 0


def sync(relay, db, filt, extra=(), timeout=600):
    r = subprocess.run([SOFTCHAT, "sync", "--relay", relay, "--db", db, "--filter", json.dumps(filt), "--json",
                        "--timeout", str(timeout), *extra], capture_output=True, text=True, timeout=timeout + 60)
    try:
        return json.loads(r.stdout.strip().split("\n")[-1])
    except (json.JSONDecodeError, IndexError):
        return {"error": r.stdout[-500:] + r.stderr[-1000:]}


def split(all_rows, n):
    """The relay holds every event but each 10th from the 3rd; the account holds every event but
    each 7th from the 2nd (and every 10th-from-3rd one the relay lacks)."""
    rows = all_rows[:n]
    relay = [r for i, r in enumerate(rows) if i % 10 != 3]
    local = [r for i, r in enumerate(rows) if i % 7 != 1]
    return relay, local


class RelayProcess:
    """`softchat relay --preload FILE [extra]`: its URL, stopped by closing its stdin."""

    def __init__(self, preload, extra=()):
        self.p = subprocess.Popen([SOFTCHAT, "relay", "--preload", preload, *extra], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.url = self.p.stdout.readline().strip()

    def stop(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def main():
    work = tempfile.mkdtemp(prefix="softchat-interop-neg-")
    lmdb = os.path.join(work, "lmdb")
    os.makedirs(lmdb)
    sizes = [0, 1, 40, 2_000, 10_000] + ([100_000] if BIG else [])
    seed = int(time.time()) % 100_000
    corpus = os.path.join(work, "all.jsonl")
    g = neg_peer("gen", "--count", str(max(sizes)), "--seed", str(seed), "--out", corpus, "--verify-every", "0")
    check("error" not in g, f"generated {max(sizes)} signed events ({g.get('error', '')[:300]})")
    all_rows = lines(corpus)
    filt = {"#t": [f"neg-{seed}"]}
    try:
        open_url = peers.start("open")

        # 1. Softchat's client against LocalRelay. The sets are nested prefixes of one corpus
        # under one tag, so each size runs on a fresh relay.
        for n in sizes:
            relay_rows, local_rows = split(all_rows, n)
            peers.stop("local")
            shutil.rmtree(lmdb)
            os.makedirs(lmdb)
            local_url = peers.start("local", env={"PEERS_LOCAL_ARGS": f"--rate 100000:10000000 --lmdb {lmdb}"})
            if relay_rows:
                f = os.path.join(work, f"relay-{n}.jsonl")
                write(f, relay_rows)
                loaded = neg_peer("load", "--relay", local_url, "--events", f)
                check(loaded.get("accepted") == len(relay_rows), f"LocalRelay {n}: loaded {len(relay_rows)} ({loaded.get('accepted')}, {loaded.get('error', '')[:200]})")
            db = os.path.join(work, f"local-{n}.db")
            check(ingest(db, local_rows), f"LocalRelay {n}: account holds {len(local_rows)}")
            t0 = time.time()
            out = sync(local_url, db, filt)
            seconds = time.time() - t0
            listed = neg_peer("fetch-ids", "--relay", local_url, "--filter", json.dumps(filt))
            relay_ids = set(listed.get("ids", []))
            check(relay_ids == ids_of(relay_rows), f"LocalRelay {n}: the full REQ listing is the relay's set ({len(relay_ids)})")
            held = account_ids(db)
            want = ids_of(local_rows) | relay_ids
            method = out.get("methods", {}).get(local_url)
            expected = "negentropy" if local_rows else "paging"
            check(out.get("synced") is True and held == want and method == expected,
                  f"Softchat → LocalRelay, {n} events: synced by {method} in {seconds:.1f} s; account = own ∪ relay "
                  f"({len(held)} of {len(want)}; {len(want - held)} missing, {len(held - want)} extra) {out.get('error', '')[:300]}")

        # 2. rust-nostr's client against Softchat's test relay.
        for n in sizes:
            relay_rows, local_rows = split(all_rows, n)
            f = os.path.join(work, f"softchat-relay-{n}.jsonl")
            write(f, relay_rows)
            lf = os.path.join(work, f"rust-local-{n}.jsonl")
            write(lf, local_rows)
            relay = RelayProcess(f)
            try:
                d = neg_peer("sync", "--relay", relay.url, "--events", lf, "--filter", json.dumps(filt), "--direction", "both", "--local-ids")
                r_ids, l_ids = ids_of(relay_rows), ids_of(local_rows)
                ok = ("error" not in d and set(d.get("received", [])) == r_ids - l_ids and set(d.get("sent", [])) == l_ids - r_ids
                      and set(d.get("local_missing", [])) == r_ids - l_ids and set(d.get("remote_missing", [])) == l_ids - r_ids
                      and set(d.get("local_ids_after", [])) == r_ids | l_ids)
                after = neg_peer("fetch-ids", "--relay", relay.url, "--filter", json.dumps(filt))
                check(ok and set(after.get("ids", [])) == r_ids | l_ids,
                      f"rust-nostr → Softchat's relay, {n} events: fetched {len(d.get('received', []))}/{len(r_ids - l_ids)}, "
                      f"sent {len(d.get('sent', []))}/{len(l_ids - r_ids)}, both sides the union ({len(after.get('ids', []))}) "
                      f"in {d.get('seconds', 0):.2f} s {d.get('error', '')[:300]}")
            finally:
                relay.stop()

        # 3. Relays without NIP-77.
        relay_rows, local_rows = split(all_rows, 2_000)
        f = os.path.join(work, "notice.jsonl")
        write(f, relay_rows)
        relay = RelayProcess(f, ["--negentropy", "notice"])
        try:
            db = os.path.join(work, "notice.db")
            ingest(db, local_rows)
            out = sync(relay.url, db, filt)
            c = sqlite3.connect(db)
            row = c.execute("select supported from relay_negentropy where relay_url = ?", (relay.url,)).fetchone()
            c.close()
            # Paging without a cursor covers the whole window: the union again.
            check(out.get("synced") is True and out.get("methods", {}).get(relay.url) == "paging" and row == (0,)
                  and account_ids(db) == ids_of(local_rows) | ids_of(relay_rows),
                  f"a relay answering NEG-OPEN with a NOTICE: paged, recorded unsupported ({out}, {row})")
        finally:
            relay.stop()
        db = os.path.join(work, "open.db")
        ingest(db, all_rows[:50])
        out = sync(open_url, db, filt, timeout=120)
        c = sqlite3.connect(db)
        row = c.execute("select supported, reason from relay_negentropy where relay_url = ?", (open_url,)).fetchone()
        c.close()
        check(out.get("synced") is True and out.get("methods", {}).get(open_url) == "paging" and row is not None and row[0] == 0,
              f"nostr-relay (no NIP-77): paged and recorded unsupported ({out}, {row})")
    finally:
        peers.stop("local", "open")
        shutil.rmtree(work, ignore_errors=True)
    tally.finish()


if __name__ == "__main__":
    main()
