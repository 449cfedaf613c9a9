#!/usr/bin/env python3
"""rust-nostr's side of scripts/bench/bench-peers (run with the peers venv's Python):

  peers_bench.py corpus DIR
      DIR/events-20k.jsonl (20,000 kind-1 events, 200-character content), DIR/events-1k-50kb.jsonl
      (1,000 events, 51,200 characters): NIP-01 lines signed with libsecp256k1 (coincurve) by
      50 authors, sha256("peers-bench-author-<i>"); every event tagged ["t","bench"], ~30% with a
      "p" and ~20% with an "e" tag; ~10% of contents end in a quote, a backslash, a newline, "é"
      and an emoji; created_at counts up to now. Every 50th event is checked with nostr-sdk.
  peers_bench.py sdk --data DIR [--reps 3] [--fast-lower] [--out FILE.json]
      nostr-sdk's Event.from_json(line).verify() over each file, median of --reps runs; prints a
      line per corpus, and with --out writes {"nostr_sdk", "python", "fast_lower", "results":
      [{"corpus", "name", "n", "median_s", "rate_per_s", "runs_s"}]}.
      --fast-lower: the shipped uniffi glue copies each string argument into Rust one byte at a
      time in a Python loop, which dominates from_json on long lines; this replaces that copy
      with one memmove, to show the cost on the Rust side.
"""
import argparse
import ctypes
import hashlib
import json
import os
import platform
import random
import statistics
import sys
import time
from importlib.metadata import version

import coincurve
import nostr_sdk as ns

CORPORA = (("events-20k.jsonl", 20_000, 200), ("events-1k-50kb.jsonl", 1_000, 50 * 1024))
WORDS = "nostr relay event note zap sats key sign verify filter client subscribe timeline reply thread".split()
TAIL = ' "q"\n\\ é 🤙'


def content(rng, size, special):
    words, length = [], 0
    while length < size:
        words.append(rng.choice(WORDS))
        length += len(words[-1]) + 1
    text = " ".join(words)[:size]
    return text[:size - len(TAIL)] + TAIL if special else text


def write_corpus(path, count, size, authors, rng, now):
    ids = []
    with open(path, "w") as f:
        for i in range(count):
            key, pubkey = authors[rng.randrange(len(authors))]
            tags = [["t", "bench"]]
            if rng.random() < 0.3:
                tags.append(["p", authors[rng.randrange(len(authors))][1]])
            if ids and rng.random() < 0.2:
                tags.append(["e", ids[rng.randrange(len(ids))]])
            text, created_at = content(rng, size, rng.random() < 0.1), now - (count - i)
            serial = json.dumps([0, pubkey, created_at, 1, tags, text], separators=(",", ":"), ensure_ascii=False)
            digest = hashlib.sha256(serial.encode()).digest()
            line = json.dumps({"id": digest.hex(), "pubkey": pubkey, "created_at": created_at, "kind": 1, "tags": tags,
                               "content": text, "sig": key.sign_schnorr(digest, os.urandom(32)).hex()},
                              separators=(",", ":"), ensure_ascii=False)
            if i % 50 == 0 and not ns.Event.from_json(line).verify():
                sys.exit(f"corpus: event {i} of {path} does not verify with nostr-sdk")
            ids.append(digest.hex())
            f.write(line + "\n")


def corpus(directory):
    os.makedirs(directory, exist_ok=True)
    keys = [coincurve.PrivateKey(hashlib.sha256(f"peers-bench-author-{i}".encode()).digest()) for i in range(50)]
    authors = [(k, k.public_key_xonly.format().hex()) for k in keys]
    rng, now = random.Random(42), int(time.time())
    for name, count, size in CORPORA:
        write_corpus(os.path.join(directory, name), count, size, authors, rng, now)
        print(f"{directory}/{name}: {count} events, {size} B content")


def fast_lower():
    from nostr_sdk import nostr_sdk as glue

    def write(self, value):
        with self._reserve(len(value)):
            ctypes.memmove(ctypes.addressof(self.rbuf.data.contents) + self.rbuf.len, bytes(value), len(value))

    glue._UniffiRustBufferBuilder.write = write


def sdk(a):
    if a.fast_lower:
        fast_lower()
    results = []
    for name, _, _ in CORPORA:
        with open(os.path.join(a.data, name)) as f:
            lines = f.read().splitlines()
        runs = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            ok = sum(ns.Event.from_json(line).verify() for line in lines)
            runs.append(time.perf_counter() - t0)
            assert ok == len(lines), f"{name}: {len(lines) - ok} events failed to verify"
        median = statistics.median(runs)
        results.append({"corpus": name, "name": "Event.from_json + verify()", "n": len(lines), "median_s": median,
                        "rate_per_s": len(lines) / median, "runs_s": [round(r, 4) for r in runs]})
        print(f"{name:22s} Event.from_json + verify(){' [fast-lower]' if a.fast_lower else ''}: "
              f"{len(lines) / median:10,.0f} /s (median of {a.reps})", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"nostr_sdk": version("nostr-sdk"), "python": platform.python_version(),
                       "fast_lower": a.fast_lower, "results": results}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description="rust-nostr's side of scripts/bench/bench-peers")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("corpus").add_argument("dir")
    s = sub.add_parser("sdk")
    s.add_argument("--data", required=True)
    s.add_argument("--reps", type=int, default=3)
    s.add_argument("--fast-lower", action="store_true")
    s.add_argument("--out")
    a = ap.parse_args()
    corpus(a.dir) if a.cmd == "corpus" else sdk(a)


if __name__ == "__main__":
    main()
