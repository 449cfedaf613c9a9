#!/usr/bin/env python3
"""One rust-nostr LocalRelay (nostr-sdk 0.45 Python bindings) on 127.0.0.1, until SIGTERM/SIGINT.
scripts/interop/peers runs it with the peers venv's Python for `local` and `local-auth`.

  --port N                 port (required; 0 = any, printed)
  --nip42 read|write|both  require NIP-42 AUTH for these (default: none)
  --lmdb DIR               store in NostrLmdb at DIR instead of memory (survives a restart)
  --rate MAX_REQS:NOTES    RateLimit(max_reqs, notes_per_minute); LocalRelay's default allows 60
                           EVENTs a minute per connection ("rate-limited: slow down")
  --max-filter-limit N, --default-filter-limit N
                           (both 500 by default; higher values do not lift the 500-events-per-REQ
                           cap, lower ones tighten it)
"""
import argparse
import asyncio
import signal

import nostr_sdk as ns


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--nip42", choices=("read", "write", "both"))
    ap.add_argument("--lmdb")
    ap.add_argument("--rate")
    ap.add_argument("--max-filter-limit", type=int)
    ap.add_argument("--default-filter-limit", type=int)
    a = ap.parse_args()
    # Callbacks implemented in Python (here: NostrLmdb handed to the builder) run on this loop;
    # without it they fail with "no running event loop" and the relay never answers.
    ns.uniffi_set_event_loop(asyncio.get_running_loop())

    b = ns.LocalRelayBuilder().addr("127.0.0.1").port(a.port)
    if a.lmdb:
        b = b.database(await ns.NostrLmdb.open(a.lmdb))
    if a.rate:
        reqs, notes = (int(x) for x in a.rate.split(":"))
        b = b.rate_limit(ns.RateLimit(max_reqs=reqs, notes_per_minute=notes))
    if a.max_filter_limit:
        b = b.max_filter_limit(a.max_filter_limit)
    if a.default_filter_limit:
        b = b.default_filter_limit(a.default_filter_limit)
    if a.nip42:
        b = b.nip42(ns.LocalRelayBuilderNip42(mode=getattr(ns.LocalRelayBuilderNip42Mode, a.nip42.upper())))
    relay = b.build()
    await relay.run()
    print("LocalRelay on", await relay.url(), flush=True)

    done = asyncio.Event()
    for s in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(s, done.set)
    await done.wait()
    relay.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
