#!/usr/bin/env python3
"""Interop of the managed transport with two real third-party relays (scripts/interop/peers).

For nostr-relay (Python, SQLite) and rust-nostr's LocalRelay (LMDB, so it survives a restart):
  * publish 1,000 events in batches through `softchat publish`, killing and restarting the relay
    mid-way; in the end every intent is terminal, the 1,000 are accepted, and a second account
    syncing with `softchat sync` holds each of them exactly once;
  * events the relay rejects (nostr-relay: content over 4,096 characters, answered with an
    empty-id OK; LocalRelay: events over 64 KiB) end `rejected` without stalling the run;
  * NIP-42 against both relays' auth-required modes (nostr-relay challenges on connect and
    never acknowledges a good AUTH; LocalRelay challenges lazily with auth-required).
Prints "interop-relays: N passed, M failed"; exits non-zero on any failure.
Usage: interop_relays.py SOFTCHAT_BINARY   (run from the repository root; peers started here)
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from checks import Tally, peers, run_softchat, sign_events  # noqa: E402

SOFTCHAT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/debug/softchat")
WRITER_KEY = peers.WRITER_SECRET  # the NIP-42 test writer: roles rw on `auth`, test only
tally = Tally("interop-relays", show_passes=True)
check = tally.check
softchat = partial(run_softchat, SOFTCHAT)
sign = partial(sign_events, SOFTCHAT)


def status(db):
    r = softchat(["account", "status", "--db", db])
    return json.loads(r.stdout) if r.returncode == 0 else None


def run_relay(name, url, env, big_content, work):
    print(f"== {name} {url}")
    key = os.path.join(work, f"{name}.key")
    softchat(["keygen", "--out", key])
    tag = f"softchat-{name}-{random.randrange(1 << 30)}"
    now = int(time.time())
    drafts = [{"kind": 1, "created_at": now - 2000 + i, "tags": [["t", tag]], "content": f"interop {i} of 1000"} for i in range(1000)]
    big = [{"kind": 1, "created_at": now - 1, "tags": [["t", tag]], "content": "x" * big_content + str(i)} for i in range(3)]
    lines = sign(key, drafts) + sign(key, big)
    ids = [json.loads(l)["id"] for l in lines[:1000]]
    db = os.path.join(work, f"{name}-a.db")
    events_file = os.path.join(work, f"{name}-events.jsonl")
    with open(events_file, "w") as f:
        f.write("\n".join(lines) + "\n")
    log_file = os.path.join(work, f"{name}-publish.log")
    with open(events_file) as stdin, open(log_file, "w") as stdout:
        publisher = subprocess.Popen([SOFTCHAT, "publish", "--relay", url, "--key", key, "--db", db, "--json", "--timeout", "150"],
                                     stdin=stdin, stdout=stdout, stderr=subprocess.STDOUT, text=True)
    # Kill and restart the relay once a part of the work is accepted.
    deadline = time.time() + 60
    restarted = False
    while time.time() < deadline and publisher.poll() is None:
        s = status(db)
        if s and s["intents"]["accepted"] >= 200:
            port = peers.running(name)["port"]
            peers.stop(name)
            time.sleep(0.5)
            peers.start(name, env=env, port=port)  # the same URL: the publisher reconnects to it
            restarted = True
            break
        time.sleep(0.05)
    check(restarted, f"{name}: relay killed and restarted mid-way")
    publisher.wait(timeout=200)
    out = open(log_file).read()
    try:
        final = json.loads(out.strip().split("\n")[-1])
    except ValueError:
        final = {"output": out[-500:]}
    check(final.get("done") is True, f"{name}: every intent terminal ({final})")
    check(final.get("accepted") == 1000, f"{name}: 1,000 accepted (got {final.get('accepted')})")
    check(final.get("rejected") == 3, f"{name}: the 3 oversized events rejected (got {final.get('rejected')})")
    check(publisher.returncode == 1, f"{name}: publish exits 1 when some intents were rejected (exit {publisher.returncode})")
    sdb = os.path.join(work, f"{name}-b.db")
    r = softchat(["sync", "--relay", url, "--db", sdb, "--filter", json.dumps({"kinds": [1], "#t": [tag]}), "--json", "--timeout", "120"])
    result = json.loads(r.stdout.strip().split("\n")[-1]) if r.stdout.strip() else {}
    check(result.get("synced") is True and result.get("events") == 1000,
          f"{name}: a second account synced all 1,000 (got {result}) {r.stderr[-300:]}")
    # Each event exactly once in the second account, and the relay gave no event twice as new.
    q = subprocess.run(["python3", "-c", f"import sqlite3;c=sqlite3.connect('{sdb}');print(c.execute(\"select count(*), count(distinct id) from events\").fetchone())"],
                       capture_output=True, text=True)
    check(q.stdout.strip() == "(1000, 1000)", f"{name}: second account holds 1,000 distinct events ({q.stdout.strip()})")
    # The same account again, holding 1,003 terminal intents: publish must wait for the NEW event
    # (it used to count the old terminal intents and exit 0 before sending it), and report it alone.
    fresh = sign(key, [{"kind": 1, "created_at": int(time.time()), "tags": [["t", tag + "-again"]], "content": "one more"}])
    r = softchat(["publish", "--relay", url, "--key", key, "--db", db, "--json", "--timeout", "60"], fresh[0] + "\n")
    final = json.loads(r.stdout.strip().split("\n")[-1]) if r.stdout.strip() else {}
    check(r.returncode == 0 and final.get("done") is True and final.get("accepted") == 1 and final.get("rejected") == 0,
          f"{name}: publish with a reused account reports its own new event accepted ({final}, exit {r.returncode})")
    check(len(r.stdout.strip().split("\n")) == 1, f"{name}: publish prints only its result on stdout ({r.stdout[:200]!r})")
    # The sync starts in a later second than the event's created_at: nostr-relay reads `until`
    # exclusively (created_at < until) without saying so in NIP-11, so a window ending in the very
    # second the event was stamped would leave it to the next sync (a known limitation; see the
    # sync-engine guide). What this check is about is publish: the relay held it when publish returned.
    time.sleep(max(0.0, json.loads(fresh[0])["created_at"] + 1.05 - time.time()))
    r = softchat(["sync", "--relay", url, "--db", os.path.join(work, f"{name}-c.db"), "--filter",
                  json.dumps({"kinds": [1], "#t": [tag + "-again"]}), "--json", "--timeout", "60"])
    result = json.loads(r.stdout.strip().split("\n")[-1]) if r.stdout.strip() else {}
    check(result.get("events") == 1, f"{name}: the relay holds the new event before publish reported done ({result})")


def run_auth(name, url, work):
    print(f"== {name} {url} (NIP-42)")
    key = os.path.join(work, f"{name}.key")
    with open(key, "w") as f:
        f.write(WRITER_KEY + "\n")
    os.chmod(key, 0o600)
    tag = f"softchat-{name}-{random.randrange(1 << 30)}"
    now = int(time.time())
    lines = sign(key, [{"kind": 1, "created_at": now - i, "tags": [["t", tag]], "content": f"auth {i}"} for i in range(20)])
    db = os.path.join(work, f"{name}-a.db")
    r = softchat(["publish", "--relay", url, "--key", key, "--db", db, "--json", "--timeout", "60"], "\n".join(lines) + "\n")
    final = json.loads(r.stdout.strip().split("\n")[-1]) if r.stdout.strip() else {}
    check(r.returncode == 0 and final.get("accepted") == 20, f"{name}: 20 events published after NIP-42 ({final})")
    sdb = os.path.join(work, f"{name}-b.db")
    r = softchat(["sync", "--relay", url, "--db", sdb, "--key", key, "--filter", json.dumps({"kinds": [1], "#t": [tag]}), "--json", "--timeout", "60"])
    result = json.loads(r.stdout.strip().split("\n")[-1]) if r.stdout.strip() else {}
    check(result.get("events") == 20, f"{name}: 20 events synced after NIP-42 ({result})")


def main():
    work = tempfile.mkdtemp(prefix="softchat-interop-")
    lmdb = os.path.join(work, "lmdb")
    os.makedirs(lmdb)
    local_env = {"PEERS_LOCAL_ARGS": f"--rate 100000:10000000 --lmdb {lmdb}"}
    try:
        peers.stop("open", "local", "auth", "local-auth")
        open_url, auth_url, local_auth_url = peers.start("open", "auth", "local-auth")
        local_url = peers.start("local", env=local_env)
        run_relay("open", open_url, {}, 4100, work)
        run_relay("local", local_url, local_env, 70000, work)
        run_auth("auth", auth_url, work)
        run_auth("local-auth", local_auth_url, work)
    finally:
        peers.stop("open", "local", "auth", "local-auth")
        shutil.rmtree(work, ignore_errors=True)
    tally.finish()


if __name__ == "__main__":
    main()
