#!/usr/bin/env python3
"""crash-recovery: a publishing process SIGKILLed mid-delivery, restarted, delivers everything at once.

An app enqueues 300 events for two real relays (rust-nostr's LocalRelay and nostr-relay, from
scripts/interop/peers: 600 intents) with `softchat publish`, is SIGKILLed while delivering, and is started
again on the same account (one new event, as an app would publish on its next start). The dead
process's leases still run for a minute, but its owner lock (DeliveryOwner) died with it: the
restarted process must claim that work at once, so within 10 s of the restart every intent of
the account is accepted, and `softchat account check` passes. Ten kills in a row, each on a
new batch in the same account.

Before owner locks, a claim that found everything under the dead process's unexpired leases
claimed nothing and the work waited for the leases to run out (80 to 160 of 600 intents still
pending or in flight 90 s after a restart).

Prints "crash-recovery: N passed, M failed"; exits non-zero on any failure.
Usage: crash_recovery.py SOFTCHAT_BINARY [--kills N]   (run from the repository root)
"""
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from checks import Tally, peers, run_softchat, sign_events  # noqa: E402

SOFTCHAT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else ".build/debug/softchat")
KILLS = int(sys.argv[sys.argv.index("--kills") + 1]) if "--kills" in sys.argv else 10
tally = Tally("crash-recovery", show_passes=True)
check = tally.check


def states(db):
    c = sqlite3.connect(db)
    try:
        return dict(c.execute("select state, count(*) from publish_intents group by state").fetchall())
    finally:
        c.close()


def main():
    work = tempfile.mkdtemp(prefix="softchat-crash-recovery-")
    rng = random.Random(int(os.environ.get("CRASH_RECOVERY_SEED", "0")) or None)
    try:
        peers.stop("local", "open")
        relays = [peers.start("local", env={"PEERS_LOCAL_ARGS": "--rate 100000:10000000"}), peers.start("open")]
        key = os.path.join(work, "app.key")
        run_softchat(SOFTCHAT, ["keygen", "--out", key])
        db = os.path.join(work, "app.db")
        publish = [SOFTCHAT, "publish", "--relay", ",".join(relays), "--key", key, "--db", db, "--json"]
        mid_flight = []
        for kill in range(KILLS):
            now = int(time.time())
            batch = sign_events(SOFTCHAT, key, [
                {"kind": 1, "created_at": now, "tags": [], "content": f"kill {kill} note {i}"} for i in range(300)])
            child_err = open(os.path.join(work, f"child-{kill}.err"), "w+")
            child = subprocess.Popen(publish + ["--timeout", "60"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=child_err, text=True)
            child.stdin.write("\n".join(batch) + "\n")
            child.stdin.close()
            # Kill once this batch is enqueued and its delivery has begun (some of it claimed or
            # accepted), after a random few milliseconds more.
            base = states(db) if os.path.exists(db) else {}
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                time.sleep(0.002)
                try:
                    s = states(db)
                except sqlite3.Error:
                    continue
                if sum(s.values()) >= sum(base.values()) + 600 and (
                        s.get("inFlight", 0) > 0 or s.get("accepted", 0) > base.get("accepted", 0)):
                    time.sleep(rng.random() * 0.05)
                    break
            waited = time.monotonic() - (deadline - 30)
            exited = child.poll()
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            before = states(db)
            child_err.seek(0)
            if sum(before.values()) < sum(base.values()) + 600:
                check(False, f"kill {kill + 1}: the publisher had not committed its 600 intents after {waited:.1f} s "
                             f"(exit {exited}, {before}): {child_err.read()[-400:]!r}")
            unfinished = sum(n for state, n in before.items() if state not in ("accepted", "rejected"))
            mid_flight.append(unfinished)
            # Restart: one new event, as the app's next start would publish.
            extra = sign_events(SOFTCHAT, key, [{"kind": 1, "created_at": now, "tags": [], "content": f"after kill {kill}"}])
            started = time.monotonic()
            r = subprocess.run(publish + ["--timeout", "30"], input="\n".join(extra) + "\n", capture_output=True, text=True)
            # Every intent of the account, the dead run's included, accepted within 10 s of the restart.
            after = states(db)
            while time.monotonic() - started < 10 and set(after) - {"accepted"}:
                time.sleep(0.1)
                after = states(db)
            took = time.monotonic() - started
            total = sum(after.values())
            check(r.returncode == 0 and set(after) == {"accepted"} and total == sum(before.values()) + 2 and took < 10,
                  f"kill {kill + 1}: killed with {unfinished} of 600 unfinished ({before}); after the restart every "
                  f"intent accepted in {took:.1f} s ({after}, {total} intents) {r.stderr[-200:]}")
            c = run_softchat(SOFTCHAT, ["account", "check", "--db", db])
            check(c.returncode == 0, f"kill {kill + 1}: account check passes ({c.stdout.strip()[-200:]})")
        check(sum(1 for n in mid_flight if n > 0) >= KILLS // 2,
              f"most kills landed mid-delivery (unfinished at each kill: {mid_flight})")
    finally:
        peers.stop("local", "open")
        shutil.rmtree(work, ignore_errors=True)
    tally.finish()


if __name__ == "__main__":
    main()
