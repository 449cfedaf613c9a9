#!/usr/bin/env python3
"""Ingest as the store grows: Softchat's `account ingest` beside rust-nostr's NostrLmdb, on the same
signed events, in one run.

usage: <peers venv python> scripts/bench/peers_ingest_bench.py SOFTCHAT [--sizes 10000,100000]
           [--shuffled] [--queries] [--data DIR] [--out FILE]

scripts/bench/bench-peers --ingest runs it. One corpus of the largest size of signed kind-1 events
(50 authors, ~200 B content; written once to DIR/ingest-<N>.jsonl by the corpus writer
bench-peers shares) is cut into windows of 10,000. Both stores start empty and take the windows
in order, alternating window by window so a slow moment of the machine falls on both:

  * Softchat: `SOFTCHAT account ingest --db FILE --batch 256` with the window on stdin, one
    process per window (parse, verify id and signature, store durably in batches of 256),
    timed from the process's start to its exit;
  * rust-nostr (nostr-sdk's Python bindings): in this process, the window's lines parsed with
    `Event.from_json` before the clock starts (the bindings' parse is Python's cost, not the
    store's), then per group of 256 `verify()` each and `NostrLmdb.save_event` all at once
    (asyncio.gather), timed over the window. Softchat's figure includes its parse and a process
    start per window; both are against it.

With --shuffled the same events arrive in a fixed random order (dated out of order, as a sync
that pages newest first and several relays deliver them), which scatters inserts across both
stores' time indexes.

With --queries, once both stores hold every event, each answers two chat reads, the newest 50
kind-1 events of a conversation ({"authors":[A],"#p":[B]}, about 120 matches at a million) and
of a person's mentions ({"#p":[B]}, about 6,000), 200 times after one untimed read: Softchat in
one process (`softchat-dev bench query`, beside SOFTCHAT), rust-nostr's `NostrLmdb.query` in
this one (its figure includes the bindings handing the 50 events to Python; Softchat's includes
decoding them from the stored JSON). Medians and p99 in milliseconds, and the ratio of medians.

For each size the row gives the rate of the window that ends there (the events stored then),
both figures and their ratio (Softchat's rate / rust-nostr's: above 1 means Softchat is faster),
and each store's last window against its first. Each store must end holding every event.
"""
import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version

import nostr_sdk as ns

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_sync_bench  # noqa: E402  (its corpus writer: the same authors and content)

WINDOW = 10_000
GROUP = 256


def softchat_window(softchat, db, lines):
    t0 = time.perf_counter()
    done = subprocess.run([softchat, "account", "ingest", "--db", db, "--batch", str(GROUP)], input="".join(lines),
                          text=True, capture_output=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"softchat account ingest failed: {done.stderr.strip()[:400]}")
    return seconds


async def lmdb_window(db, lines):
    # Parsed before the clock starts: the Python bindings' Event.from_json (about 10,000/s here)
    # is not rust-nostr's store; verify() and save_event are timed, as the account issue timed them.
    events = [ns.Event.from_json(line) for line in lines]
    t0 = time.perf_counter()
    for start in range(0, len(events), GROUP):
        group = events[start:start + GROUP]
        if not all(e.verify() for e in group):
            sys.exit("rust-nostr: an event of the corpus failed verify()")
        await asyncio.gather(*(db.save_event(e) for e in group))
    return time.perf_counter() - t0


async def lmdb_query(db, flt, repeats=200):
    await db.query(flt)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        await db.query(flt)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"median_ms": times[len(times) // 2], "p99_ms": times[min(len(times) - 1, len(times) * 99 // 100)],
            "events": len(await db.query(flt))}


def softchat_query(softchat, db, flt_json, repeats=200):
    dev = os.path.join(os.path.dirname(os.path.abspath(softchat)), "softchat-dev")
    done = subprocess.run([dev, "bench", "query", "--db", db, "--filter", flt_json, "--limit", "50", "--repeat", str(repeats)],
                          text=True, capture_output=True)
    if done.returncode != 0:
        sys.exit(f"softchat-dev bench query failed: {done.stderr.strip()[:400]}")
    return json.loads(done.stdout)


async def queries(softchat, ours_db, lmdb, corpus_lines):
    """The two chat reads on both stores: rows of (name, softchat, rust-nostr)."""
    # A and B: the author and the person of the first event that names someone.
    first = next(json.loads(l) for l in corpus_lines if any(t[0] == "p" for t in json.loads(l)["tags"]))
    a = first["pubkey"]
    b = next(t[1] for t in first["tags"] if t[0] == "p")
    rows = []
    for name, ours_filter, theirs in [
        ("a conversation, newest 50 (authors A, #p B)", {"kinds": [1], "authors": [a], "#p": [b]},
         ns.Filter().kind(ns.Kind(1)).author(ns.PublicKey.parse(a)).pubkey(ns.PublicKey.parse(b)).limit(50)),
        ("a person's mentions, newest 50 (#p B)", {"kinds": [1], "#p": [b]},
         ns.Filter().kind(ns.Kind(1)).pubkey(ns.PublicKey.parse(b)).limit(50)),
    ]:
        o = softchat_query(softchat, ours_db, json.dumps(ours_filter))
        t = await lmdb_query(lmdb, theirs)
        if o["events"] != t["events"]:
            sys.exit(f"{name}: softchat returned {o['events']} events, rust-nostr {t['events']}")
        rows.append({"query": name, "softchat": o, "rust_nostr": t, "ratio": t["median_ms"] / o["median_ms"]})
    return rows


def softchat_count(softchat, db):
    done = subprocess.run([softchat, "account", "status", "--db", db], text=True, capture_output=True, check=True)
    return done.stdout.strip()


async def main_async(a):
    ns.uniffi_set_event_loop(asyncio.get_running_loop())
    sizes = sorted(int(s) for s in a.sizes.split(","))
    if any(s % WINDOW for s in sizes):
        sys.exit(f"sizes must be multiples of {WINDOW}")
    total = sizes[-1]
    os.makedirs(a.data, exist_ok=True)
    corpus = os.path.join(a.data, f"ingest-{total}.jsonl")
    if not os.path.exists(corpus):
        peers_sync_bench.write_corpus(corpus, total)
    with open(corpus) as f:
        lines = f.readlines()
    if len(lines) < total:
        sys.exit(f"{corpus}: {len(lines)} lines, {total} wanted")
    lines = lines[:total]
    if a.shuffled:
        random.Random(7).shuffle(lines)
    work = tempfile.mkdtemp(prefix="softchat-peers-ingest-")
    try:
        ours_db = os.path.join(work, "softchat.sqlite")
        lmdb = await ns.NostrLmdb.open(os.path.join(work, "lmdb"))
        ours, theirs = [], []
        for w in range(total // WINDOW):
            window = lines[w * WINDOW:(w + 1) * WINDOW]
            ours.append(softchat_window(a.softchat, ours_db, window))
            theirs.append(await lmdb_window(lmdb, window))
            stored = (w + 1) * WINDOW
            if stored in sizes or (w + 1) % 10 == 0:
                print(f"  {stored:>9,} stored: softchat {WINDOW / ours[-1]:8,.0f}/s  rust-nostr {WINDOW / theirs[-1]:8,.0f}/s",
                      flush=True)
        held = await lmdb.count(ns.Filter().kind(ns.Kind(1)))
        if held != total:
            sys.exit(f"rust-nostr holds {held} of {total}")
        status = softchat_count(a.softchat, ours_db)
        if f'"events":{total}' not in status.replace(" ", ""):
            sys.exit(f"softchat does not hold {total} events: {status[:300]}")
        rows = []
        order = "in a fixed random order" if a.shuffled else "in date order"
        print(f"\nnostr-sdk {version('nostr-sdk')}; windows of {WINDOW:,}; events {order}; both stores hold {total:,} events")
        print(f"{'stored':>10s} {'softchat/s':>11s} {'rust-nostr/s':>13s} {'ratio':>6s}")
        for size in sizes:
            i = size // WINDOW - 1
            o, t = WINDOW / ours[i], WINDOW / theirs[i]
            rows.append({"stored": size, "softchat_per_s": o, "rust_nostr_per_s": t, "ratio": o / t})
            print(f"{size:>10,} {o:>11,.0f} {t:>13,.0f} {o / t:>6.2f}")
        last_first = {"softchat": ours[0] / ours[-1], "rust_nostr": theirs[0] / theirs[-1]}
        print(f"last window against the first: softchat {last_first['softchat']:.2f}, rust-nostr {last_first['rust_nostr']:.2f}")
        query_rows = await queries(a.softchat, ours_db, lmdb, lines) if a.queries else []
        if query_rows:
            print(f"\nchat reads at {total:,} stored, 200 each, medians (p99) in ms; ratio of medians (rust-nostr / softchat)")
        for r in query_rows:
            o, t = r["softchat"], r["rust_nostr"]
            print(f"  {r['query']}: {o['events']} events; softchat {o['median_ms']:.3f} ({o['p99_ms']:.3f}), "
                  f"rust-nostr {t['median_ms']:.3f} ({t['p99_ms']:.3f}); ratio {r['ratio']:.2f}")
        if a.out:
            with open(a.out, "w") as f:
                json.dump({"nostr_sdk": version("nostr-sdk"), "window": WINDOW, "rows": rows, "last_over_first": last_first,
                           "queries": query_rows}, f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("softchat")
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--shuffled", action="store_true")
    p.add_argument("--queries", action="store_true")
    p.add_argument("--data", default=".peers/data")
    p.add_argument("--out")
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
