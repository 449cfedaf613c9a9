#!/usr/bin/env python3
"""First sync from rust-nostr's LocalRelay into a fresh store: Softchat beside rust-nostr's client.

usage: <peers venv python> scripts/bench/peers_sync_bench.py SOFTCHAT [--events N] [--reps R] [--data DIR]

scripts/bench/bench-peers --sync runs it. One corpus of N signed kind-1 events (default 100,000;
written once to DIR/events-<N>.jsonl) is saved into an LMDB store, and one LocalRelay
(nostr-sdk's, scripts/interop/peers_local_relay.py, rate limit lifted) serves it. Then, alternating,
R times each (default 2):

  * rust-nostr: nostr-sdk's Client with a fresh NostrLmdb database, REQ pages of 500 newest
    first (LocalRelay refuses NIP-77 over this many items, and 0.45's Client.sync fails against
    it past 100 missing events, see scripts/interop/neg_peer.py), saved by the client, timed from
    building the client to the last page;
  * Softchat: `SOFTCHAT sync --relay URL --db fresh.sqlite --filter F`, a whole process, timed
    from its start to its exit.

Each run must end holding all N events (counted in its own store). Prints one line per run and
the medians with their ratio (rust-nostr's time / Softchat's: above 1 means Softchat is faster),
and with --out writes them as JSON. Nothing here is part of the test command: it needs minutes
of an idle machine.
"""
import argparse
import asyncio
import datetime
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version

import nostr_sdk as ns

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_bench  # noqa: E402  (the corpus writer shared with scripts/bench/bench-peers)

HERE = os.path.dirname(os.path.abspath(__file__))
FILTER = '{"kinds":[1]}'


def write_corpus(path, count):
    import coincurve
    import hashlib
    import random
    keys = [coincurve.PrivateKey(hashlib.sha256(f"peers-bench-author-{i}".encode()).digest()) for i in range(50)]
    authors = [(k, k.public_key_xonly.format().hex()) for k in keys]
    peers_bench.write_corpus(path, count, 200, authors, random.Random(77), int(time.time()))


async def prefill(lmdb_dir, corpus):
    ns.uniffi_set_event_loop(asyncio.get_running_loop())
    db = await ns.NostrLmdb.open(lmdb_dir)
    with open(corpus) as f:
        for line in f:
            await db.save_event(ns.Event.from_json(line))
    return await db.count(ns.Filter().kind(ns.Kind(1)))


async def rust_nostr_sync(url, store):
    ns.uniffi_set_event_loop(asyncio.get_running_loop())
    t0 = time.perf_counter()
    db = await ns.NostrLmdb.open(store)
    client = ns.ClientBuilder().database(db).build()
    await client.add_relay(ns.RelayUrl.parse(url))
    await client.connect()
    # LocalRelay refuses NIP-77 over this many items ("rate-limited: too many negentropy items"),
    # so rust-nostr's first sync is REQ paging, as a user would write it: newest first, 500 a
    # page (LocalRelay's cap), each page's `until` one second before the oldest event of the
    # last (the corpus dates one event a second); the client saves what it receives.
    flt = ns.Filter().kind(ns.Kind(1))
    until = None
    while True:
        page = flt.limit(500) if until is None else flt.until(ns.Timestamp.from_secs(until)).limit(500)
        events = await client.fetch_events(ns.ReqTarget.single(ns.RelayUrl.parse(url), [page]), timeout=datetime.timedelta(seconds=60))
        got = list(events)
        if not got:
            break
        until = min(e.created_at().as_secs() for e in got) - 1
    seconds = time.perf_counter() - t0
    held = await db.count(ns.Filter().kind(ns.Kind(1)))
    await client.shutdown()
    return seconds, held


def softchat_sync(softchat, url, path):
    t0 = time.perf_counter()
    done = subprocess.run([softchat, "sync", "--relay", url, "--db", path, "--filter", FILTER, "--json"],
                          capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"softchat sync failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    held = db.execute("SELECT COUNT(*) FROM events WHERE kind = 1").fetchone()[0]
    db.close()
    return seconds, held


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("softchat")
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", ".peers", "data"))
    ap.add_argument("--out")
    a = ap.parse_args()
    os.makedirs(a.data, exist_ok=True)
    corpus = os.path.join(a.data, f"events-{a.events}.jsonl")
    if not os.path.exists(corpus):
        t0 = time.perf_counter()
        write_corpus(corpus, a.events)
        print(f"corpus: {a.events} events written in {time.perf_counter() - t0:.1f} s", flush=True)
    work = tempfile.mkdtemp(prefix="softchat-peers-sync-")
    relay = None
    try:
        relay_store = os.path.join(work, "relay-lmdb")
        os.makedirs(relay_store)
        # In a child process, so the relay opens the store alone.
        held = subprocess.run([sys.executable, __file__, "--prefill", relay_store, corpus],
                              capture_output=True, text=True, check=True).stdout.strip()
        print(f"LocalRelay's store holds {held} events", flush=True)
        with socket.socket() as probe:  # LocalRelay prints the port it was given, so give it a free one
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        relay = subprocess.Popen([sys.executable, os.path.join(HERE, "..", "interop", "peers_local_relay.py"), "--port", str(port), "--lmdb", relay_store,
                                  "--rate", "1000000:100000000"], stdout=subprocess.PIPE, text=True)
        line = relay.stdout.readline().strip()
        url = line.split()[-1]
        print(f"{line}", flush=True)
        runs = {"rust-nostr": [], "softchat": []}
        for rep in range(a.reps):
            store = os.path.join(work, f"sdk-{rep}")
            os.makedirs(store)
            seconds, count = asyncio.run(rust_nostr_sync(url, store))
            print(f"rust-nostr (nostr-sdk {version('nostr-sdk')}, NostrLmdb): {seconds:.2f} s, holds {count}", flush=True)
            if count != a.events:
                sys.exit(f"rust-nostr's sync holds {count} of {a.events}")
            runs["rust-nostr"].append(seconds)
            seconds, count = softchat_sync(a.softchat, url, os.path.join(work, f"softchat-{rep}.sqlite"))
            print(f"softchat sync: {seconds:.2f} s, holds {count}", flush=True)
            if count != a.events:
                sys.exit(f"softchat's sync holds {count} of {a.events}")
            runs["softchat"].append(seconds)
        theirs, ours = statistics.median(runs["rust-nostr"]), statistics.median(runs["softchat"])
        print(f"first sync of {a.events} events from LocalRelay: rust-nostr {theirs:.2f} s, softchat {ours:.2f} s, "
              f"ratio {theirs / ours:.2f} (medians of {a.reps})")
        if a.out:
            with open(a.out, "w") as f:
                json.dump({"nostr_sdk": version("nostr-sdk"), "events": a.events, "runs_s": runs, "ratio": theirs / ours}, f, indent=1)
    finally:
        if relay:
            relay.terminate()
            relay.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--prefill":
        print(asyncio.run(prefill(sys.argv[2], sys.argv[3])))
    else:
        main()
