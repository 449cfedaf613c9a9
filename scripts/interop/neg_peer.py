#!/usr/bin/env python3
"""rust-nostr's side of the NIP-77 (negentropy) interop tests and benchmarks.

Run with the peers venv (python3 scripts/interop/peers setup; nostr-sdk 0.45.1 = uniffi bindings of
rust-nostr, websockets, coincurve) from the repository root:
  ./.peers/venv/bin/python scripts/interop/neg_peer.py SUBCOMMAND ...
Every subcommand prints ONE JSON object on stdout; progress and diagnostics go to stderr; the
exit status is 1 when the operation failed (the JSON then has an "error" key).

  gen --count N --seed S --out FILE.jsonl [--kind 1] [--base-time T] [--authors 20]
      [--verify-every 10]
      N signed NIP-01 events, one JSON object a line, a pure function of (N, S, kind, T,
      authors): secret keys sha256("neg-peer-<S>-author-<i>"), content from the seed (a few
      percent with '"', '\\', newline, 'é', an emoji), created_at spread uniformly over the 30
      days before T, ~15% copying an earlier event's created_at (ties), every event tagged
      ["t","neg-<S>"] so a filter {"#t":["neg-<S>"]} selects exactly one generated set. Ids are
      computed here (SHA-256 of the NIP-01 serialisation) and signed with libsecp256k1 through
      coincurve with aux = sha256("neg-peer-aux" || id), so files are byte-identical between runs;
      every K-th event is checked with nostr_sdk Event.verify() (K = --verify-every, 1 = all,
      0 = none). A shorter --count with the same seed gives a prefix of the longer file.
      T defaults to today 00:00 UTC. Subsets for the tests: awk 'NR % 100' (drops 1%), head, tail.
  load --relay URL --events FILE [--window 1000] [--via ws|sdk]
      Publishes FILE: ws = pipelined EVENT frames over one WebSocket, at most --window waiting
      for their OK; sdk = nostr_sdk Client.send_event, --window concurrent. LocalRelay needs its
      60-EVENTs/min limit lifted (scripts/interop/peers starts `local` with --rate 100000:10000000).
      -> {"sent","accepted","duplicates","rejected","rejections":{msg: n},"seconds","rate_per_s"}
      (LocalRelay answers a duplicate with OK true "duplicate: ..." -> counted in both).
  sync --relay URL --events FILE --filter JSON [--direction down|up|both] [--dry-run] [--local-ids]
      rust-nostr's client does its NIP-77 sync: a NostrLmdb in a temporary folder is preloaded with
      FILE (NostrLmdb.save_event, nothing is sent), handed to ClientBuilder.database(), connected
      to URL, then Client.sync(filter, [URL], SyncOptions().direction(D)). Default direction: down
      (rust-nostr's default). -> {"received": [ids fetched], "sent": [ids uploaded and OK'd],
      "local_missing": [ids the relay had, local not], "remote_missing": [ids local had, relay
      not], "send_failures": {id: msg}, "seconds" (the Client.sync call only), "preload_seconds",
      "local_count_before", "local_count_after" (all events in the local db), "local_ids_after"
      (with --local-ids)}. local_missing/remote_missing are rust-nostr's report.remote/.local and
      are filled even when the direction (or --dry-run) leaves them untransferred.
  bench --relay URL --events-local FILE --filter JSON [--direction down] [--repeat 5] [--dry-run]
      The same preload + connect once, then K Client.sync calls; with direction down the received
      events are deleted from the local db after each run so every run starts from the same sets
      (up/both change the relay: later runs are only comparable if nothing was sent, or use
      --dry-run = reconciliation only). -> {"median_seconds","runs_seconds","min_seconds",
      "received_per_run","sent_per_run","local_missing","remote_missing" (counts, run 1),
      "local_count","preload_seconds","connect_seconds"}
  fetch-ids --relay URL --filter JSON [--page 500]
      All ids the relay holds for the filter by plain REQs paged with until (LocalRelay caps a
      REQ at 500 events; until is inclusive there, so each page re-reads the boundary second and
      duplicates are dropped; more than --page events in one second is reported as an error).
      -> {"ids": [sorted], "count", "pages", "relay_count" (NIP-45 COUNT answer or null), "seconds"}
  probe --relay URL [--filter JSON] [--events FILE] [--big N]
      Raw NIP-77 frames on fresh WebSockets, to see how a relay answers: a well-formed NEG-OPEN
      (one Fingerprint range over FILE's items matching nothing in particular: the filter's set is
      the relay's), an empty-set NEG-OPEN for a filter that matches nothing, malformed hex, an odd
      hex length, protocol version 0x62, a NEG-MSG for an unknown subscription, a NEG-OPEN whose
      IdList is empty (the relay then lists its ids: shows its frame size limit), and with --big N
      an initial IdList of N random ids (incoming message size). Negentropy messages are decoded.
      -> {"relay", "cases": [{"case","sent","received":[...],"decoded":[...],"closed"}]}

Example, against the `local` peer (LocalRelay; for more than 75,000 events start it with
PEERS_LOCAL_ARGS="--rate 100000:10000000 --lmdb DIR": its in-memory default keeps 75,000 at most):
  python3 scripts/interop/peers start local; . .peers/peers.env     # PEERS_URL_LOCAL=ws://127.0.0.1:PORT
  P=./.peers/venv/bin/python; S=scripts/interop/neg_peer.py
  $P $S gen --count 2000 --seed 7 --out /tmp/all.jsonl
  $P $S load --relay $PEERS_URL_LOCAL --events /tmp/relay.jsonl
  $P $S sync --relay $PEERS_URL_LOCAL --events /tmp/local.jsonl --filter '{"#t":["neg-7"]}' --direction both
  $P $S fetch-ids --relay $PEERS_URL_LOCAL --filter '{"#t":["neg-7"]}'
"""
import argparse
import asyncio
import ctypes
import datetime
import hashlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import coincurve
import nostr_sdk as ns
import websockets
import websockets.exceptions

pc = time.perf_counter
DAY = 86400
WORDS = ("relay sync range bound fingerprint reconcile event note author filter tag id set split "
         "message item timestamp negentropy window page").split()
ESCAPES = ' "quoted" back\\slash\nnext line é 🤙'  # what JSON and NIP-01 serialisation must escape


def log(*a):
    print("neg_peer:", *a, file=sys.stderr, flush=True)


def emit(obj, ok=True):
    print(json.dumps(obj), flush=True)
    sys.exit(0 if ok else 1)


def fast_lower():
    """The shipped uniffi glue copies every string argument into Rust one byte at a time in a
    Python loop (scripts/bench/peers_bench.py --fast-lower); one memmove instead.
    Only speed changes: Event.from_json of a 100k-line file is ~2x faster."""
    from nostr_sdk import nostr_sdk as low

    def write(self, value):
        n = len(value)
        with self._reserve(n):
            ctypes.memmove(ctypes.cast(self.rbuf.data, ctypes.c_void_p).value + self.rbuf.len, value, n)

    low._UniffiRustBufferBuilder.write = write


def read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


# ---------------------------------------------------------------- gen

def text_of(rng, size, escapes):
    """About `size` characters of words drawn with `rng`; with `escapes`, ending in characters
    that need escaping or are not ASCII."""
    words, length = [], 0
    while length < size:
        words.append(rng.choice(WORDS))
        length += len(words[-1]) + 1
    text = " ".join(words)[:size]
    return text + ESCAPES if escapes else text


def nip01_id(pubkey, created_at, kind, tags, content):
    ser = json.dumps([0, pubkey, created_at, kind, tags, content], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(ser.encode()).digest()


def cmd_gen(a):
    if a.count < 0 or a.authors < 1:
        sys.exit("gen: --count must be >= 0 and --authors >= 1")
    if a.kind in (0, 3) or 10000 <= a.kind < 20000 or 30000 <= a.kind < 40000:
        log(f"warning: kind {a.kind} is replaceable/addressable: relays keep one per author (and d tag)")
    if 20000 <= a.kind < 30000:
        log(f"warning: kind {a.kind} is ephemeral: relays do not store it")
    base = a.base_time if a.base_time is not None else int(time.time()) // DAY * DAY
    rng = random.Random(f"neg-peer:{a.seed}")
    secrets = [hashlib.sha256(f"neg-peer-{a.seed}-author-{i}".encode()).digest() for i in range(a.authors)]
    sks = [coincurve.PrivateKey(s) for s in secrets]
    pks = [k.public_key_xonly.format().hex() for k in sks]
    tag = f"neg-{a.seed}"
    created, verified = [], 0
    t0 = pc()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        for i in range(a.count):
            who = rng.randrange(a.authors)
            if created and rng.random() < 0.15:
                ca = created[rng.randrange(len(created))]
            else:
                ca = base - 1 - rng.randrange(30 * DAY)
            created.append(ca)
            tags = [["t", tag]]
            if rng.random() < 0.3:
                tags.append(["p", pks[rng.randrange(a.authors)]])
            content = f"neg {a.seed}/{i}: " + text_of(rng, rng.randrange(20, 160), rng.random() < 0.05)
            eid = nip01_id(pks[who], ca, a.kind, tags, content)
            sig = sks[who].sign_schnorr(eid, hashlib.sha256(b"neg-peer-aux" + eid).digest())
            line = json.dumps({"id": eid.hex(), "pubkey": pks[who], "created_at": ca, "kind": a.kind, "tags": tags,
                               "content": content, "sig": sig.hex()}, separators=(",", ":"), ensure_ascii=False)
            if a.verify_every and i % a.verify_every == 0:
                ev = ns.Event.from_json(line)
                if not ev.verify() or ev.id().to_hex() != eid.hex():
                    sys.exit(f"gen: event {i} does not verify with nostr_sdk: {line}")
                verified += 1
            f.write(line + "\n")
    dt = pc() - t0
    emit({"out": a.out, "count": a.count, "seed": a.seed, "kind": a.kind, "base_time": base, "authors": a.authors,
          "tag": ["t", tag], "filter": {"kinds": [a.kind], "#t": [tag]},
          "distinct_created_at": len(set(created)), "oldest": min(created, default=None),
          "newest": max(created, default=None), "verified_with_nostr_sdk": verified,
          "seconds": round(dt, 3), "rate_per_s": round(a.count / dt) if dt else None})


# ---------------------------------------------------------------- load

def new_tally():
    return {"accepted": 0, "duplicates": 0, "rejected": 0, "rejections": {}, "unanswered": 0}


async def load_chunk(url, lines, window):
    """One WebSocket: pipelined EVENTs, at most `window` waiting for their OK."""
    tally = new_tally()
    pending = set()
    room = asyncio.Semaphore(window)
    async with websockets.connect(url, max_size=None, compression=None, open_timeout=10) as ws:
        async def reader():
            async for raw in ws:
                m = json.loads(raw)
                if m[0] == "OK" and m[1] in pending:
                    pending.discard(m[1])
                    room.release()
                    if m[2]:
                        tally["accepted"] += 1
                        tally["duplicates"] += m[3].startswith("duplicate")
                    else:
                        tally["rejected"] += 1
                        tally["rejections"][m[3]] = tally["rejections"].get(m[3], 0) + 1
                    if not pending and sent_all:
                        return
                elif m[0] == "NOTICE":
                    log("NOTICE", m[1:])

        sent_all = False
        task = asyncio.create_task(reader())
        for line in lines:
            acquire = asyncio.ensure_future(room.acquire())
            await asyncio.wait([acquire, task], return_when=asyncio.FIRST_COMPLETED)
            if task.done():  # connection gone: the reader ended early
                acquire.cancel()
                break
            pending.add(json.loads(line)["id"])
            await ws.send('["EVENT",' + line + "]")
        sent_all = True
        if pending and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=60)
            except asyncio.TimeoutError:
                log(f"{len(pending)} EVENTs got no OK within 60 s")
        if task.done() and not task.cancelled() and task.exception():
            log(f"connection lost: {task.exception()!r}")
        task.cancel()
    tally["unanswered"] = len(lines) - tally["accepted"] - tally["rejected"]
    return tally


async def load_ws(url, lines, window, per_connection=5000, connections=2):
    """LocalRelay (nostr-sdk 0.45) drops a connection that sent more than ~6,000 messages within
    a minute ("too many client messages", TCP closed without a close frame), so every chunk of
    `per_connection` events gets its own WebSocket; `connections` chunks run at once."""
    total = new_tally()
    chunks = [lines[i:i + per_connection] for i in range(0, len(lines), per_connection)]
    gate = asyncio.Semaphore(connections)

    async def run(chunk):
        async with gate:
            try:
                t = await load_chunk(url, chunk, window)
            except (OSError, websockets.exceptions.WebSocketException) as e:
                log(f"chunk of {len(chunk)} failed: {e!r}")
                t = dict(new_tally(), unanswered=len(chunk))
            for k in ("accepted", "duplicates", "rejected", "unanswered"):
                total[k] += t[k]
            for k, v in t["rejections"].items():
                total["rejections"][k] = total["rejections"].get(k, 0) + v
    await asyncio.gather(*(run(c) for c in chunks))
    return total


async def load_sdk(url, lines, window, per_connection=5000, connections=1):
    """nostr_sdk Client.send_event (waits for each OK), `window` at once; a new Client (so a
    new connection) per `per_connection` events, for LocalRelay's message limit (see load_ws)."""
    total = new_tally()
    total["duplicates"] = None  # SendEventOutput does not show the OK message of a success
    for i in range(0, len(lines), per_connection):
        client = ns.Client()
        await client.add_relay(ns.RelayUrl.parse(url))
        await client.try_connect(datetime.timedelta(seconds=10))
        events = [ns.Event.from_json(line) for line in lines[i:i + per_connection]]
        for j in range(0, len(events), window):
            outs = await asyncio.gather(*(client.send_event(e) for e in events[j:j + window]), return_exceptions=True)
            for o in outs:
                reasons = [str(o)] if isinstance(o, Exception) else list(o.failed.values())
                if not isinstance(o, Exception) and o.success:
                    total["accepted"] += 1
                else:
                    total["rejected"] += 1
                    for msg in reasons:
                        total["rejections"][msg] = total["rejections"].get(msg, 0) + 1
        await client.shutdown()
    return total


def cmd_load(a):
    lines = read_lines(a.events)
    t0 = pc()
    fn = load_ws if a.via == "ws" else load_sdk
    t = asyncio.run(fn(a.relay, lines, a.window, a.per_connection, a.connections))
    dt = pc() - t0
    out = {"sent": len(lines), **t, "via": a.via, "seconds": round(dt, 3),
           "rate_per_s": round(len(lines) / dt) if dt else None}
    emit(out, ok=t["unanswered"] == 0)


# ---------------------------------------------------------------- sync / bench (rust-nostr client)

DEFAULT_LMDB_PARENT = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
DIRECTIONS = {"down": ns.SyncDirection.DOWN, "up": ns.SyncDirection.UP, "both": ns.SyncDirection.BOTH}


async def preload(path, folder):
    db = await ns.NostrLmdb.open(folder)
    lines = read_lines(path)
    t0 = pc()
    for i in range(0, len(lines), 1000):
        evs = [ns.Event.from_json(line) for line in lines[i:i + 1000]]
        await asyncio.gather(*(db.save_event(e) for e in evs))
    dt = pc() - t0
    n = await db.count(ns.Filter())
    log(f"preloaded {n} events ({len(lines)} lines) into NostrLmdb {folder} in {dt:.1f} s")
    return db, n, dt


class ConnectError(Exception):
    pass


async def connect(db, url):
    client = ns.ClientBuilder().database(db).build()
    relay_url = ns.RelayUrl.parse(url)
    await client.add_relay(relay_url)
    t0 = pc()
    out = await client.try_connect(datetime.timedelta(seconds=10))
    if not out.success:
        raise ConnectError(f"cannot connect to {url}: {dict((str(u), m) for u, m in out.failed.items())}")
    return client, relay_url, pc() - t0


def parse_filters(text):
    """--filter: one JSON filter object, or a JSON array of them (synced one after the other)."""
    v = json.loads(text)
    return [ns.Filter.from_json(json.dumps(f)) for f in (v if isinstance(v, list) else [v])]


async def transfer_manually(client, db, url, m, direction, batch=500):
    """What Client.sync would transfer, done with Client.fetch_events (REQ of <= `batch` ids) and
    Client.send_event: the workaround for rust-nostr 0.45's down-sync failure against LocalRelay
    when more than 100 events are missing (LIMITS in the module docstring)."""
    got, put, fails = set(), set(), {}
    if direction in ("down", "both"):
        need = sorted(m["local_missing"])
        for i in range(0, len(need), batch):
            flt = ns.Filter().ids([ns.EventId.parse(x) for x in need[i:i + batch]])
            evs = await client.fetch_events(ns.ReqTarget.single(url, [flt]), timeout=datetime.timedelta(seconds=60))
            got |= {e.id().to_hex() for e in evs}
    if direction in ("up", "both"):
        have = sorted(m["remote_missing"])
        for i in range(0, len(have), batch):
            evs = [await db.event_by_id(ns.EventId.parse(x)) for x in have[i:i + batch]]
            outs = await asyncio.gather(*(client.send_event(e, target=ns.SendEventTarget.to([url]))
                                          for e in evs if e), return_exceptions=True)
            for e, o in zip([e for e in evs if e], outs):
                if isinstance(o, Exception) or not o.success:
                    fails[e.id().to_hex()] = str(o) if isinstance(o, Exception) else str(list(o.failed.values()))
                else:
                    put.add(e.id().to_hex())
    return got, put, fails


async def sync_filters(client, db, url, filters, a):
    """One Client.sync per filter, in order, over the same connection (with --transfer manual:
    a dry-run Client.sync, then transfer_manually). Returns the merged report (sets of EventId
    hex), the seconds of each filter, and the relay failures."""
    merged = {"received": set(), "sent": set(), "local_missing": set(), "remote_missing": set(), "send_failures": {}}
    secs, failed = [], {}
    opts = ns.SyncOptions().direction(DIRECTIONS[a.direction]).initial_timeout(
        datetime.timedelta(seconds=a.initial_timeout))
    if a.dry_run or a.transfer == "manual":
        opts = opts.dry_run()
    for flt in filters:
        t0 = pc()
        res = await client.sync(flt, _with=[url], opts=opts)  # raises NostrSdkError (timeout, NEG-ERR, ...)
        r = res.report
        m = {"local_missing": {i.to_hex() for i in r.remote},   # on the relay, not here
             "remote_missing": {i.to_hex() for i in r.local}}   # here, not on the relay
        merged["received"] |= {i.to_hex() for i in r.received}
        merged["sent"] |= {i.to_hex() for i in r.sent}
        for fs in r.send_failures.values():
            for f in fs:
                merged["send_failures"][f.id.to_hex()] = f.error
        failed.update({str(u): msg for u, msg in res.failed.items()})
        if a.transfer == "manual" and not a.dry_run and not failed:
            got, put, fails = await transfer_manually(client, db, url, m, a.direction)
            merged["received"] |= got
            merged["sent"] |= put
            merged["send_failures"].update(fails)
        merged["local_missing"] |= m["local_missing"]
        merged["remote_missing"] |= m["remote_missing"]
        secs.append(round(pc() - t0, 4))
        if failed:
            break
    return merged, secs, failed


async def sync_main(a):
    ns.uniffi_set_event_loop(asyncio.get_running_loop())  # NostrLmdb in the client = Python callbacks
    filters = parse_filters(a.filter)
    folder = tempfile.mkdtemp(prefix="neg-peer-lmdb-", dir=a.lmdb_dir)
    try:
        db, before, pre = await preload(a.events, folder)
        client, url, _ = await connect(db, a.relay)
        t0 = pc()
        try:
            m, secs, failed = await sync_filters(client, db, url, filters, a)
        except Exception as e:  # noqa: BLE001 — NostrSdkError
            return {"error": f"{type(e).__name__}: {e}", "seconds": round(pc() - t0, 4)}
        dt = pc() - t0
        out = {k: (sorted(v) if isinstance(v, set) else v) for k, v in m.items()}
        out.update({"failed": failed, "seconds": round(dt, 4), "seconds_per_filter": secs,
                    "preload_seconds": round(pre, 3), "local_count_before": before,
                    "local_count_after": await db.count(ns.Filter())})
        if failed:
            out["error"] = f"relay failed: {failed}"
        if a.local_ids:
            out["local_ids_after"] = sorted(e.id().to_hex() for e in await db.query(ns.Filter()))
        await client.shutdown()
        return out
    finally:
        if not a.keep_db:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            log(f"local db kept in {folder}")


def cmd_sync(a):
    try:
        out = asyncio.run(sync_main(a))
    except ConnectError as e:
        out = {"error": str(e)}
    emit(out, ok="error" not in out)


async def bench_items(a):
    """--source items: no client database. The (id, created_at) of FILE's events matching each
    filter are handed to Relay.sync(filter, items, opts) (rust-nostr then skips its database
    query); received events are counted, not stored, so every run starts from the same sets.
    Only down (and --dry-run) is meaningful: an upload would look the events up in the client's
    (empty) database."""
    filters = parse_filters(a.filter)
    t0 = pc()
    evs = [ns.Event.from_json(line) for line in read_lines(a.events_local)]
    items = [[ns.NegentropyItem(id=e.id(), timestamp=e.created_at()) for e in evs if f.match_event(e)] for f in filters]
    pre = pc() - t0
    log(f"{len(evs)} local events, items per filter {[len(i) for i in items]} ({pre:.1f} s)")
    # Each Relay.sync call first copies its items into Rust in a Python loop (uniffi lowering);
    # timed once here so that the Rust-side time can be told apart.
    from nostr_sdk import nostr_sdk as low
    lowering = 0.0
    for its in items:
        t0 = pc()
        buf = low._UniffiFfiConverterOptionalSequenceTypeNegentropyItem.lower(its)
        lowering += pc() - t0
        buf.free()
    client = ns.Client()
    relay_url = ns.RelayUrl.parse(a.relay)
    await client.add_relay(relay_url)
    t0 = pc()
    out = await client.try_connect(datetime.timedelta(seconds=10))
    conn = pc() - t0
    if not out.success:
        raise ConnectError(f"cannot connect to {a.relay}: {dict((str(u), m) for u, m in out.failed.items())}")
    relay = await client.relay(relay_url)
    opts = ns.SyncOptions().direction(DIRECTIONS[a.direction]).initial_timeout(
        datetime.timedelta(seconds=a.initial_timeout))
    if a.dry_run:
        opts = opts.dry_run()
    runs, per_filter, recv, sent, first = [], [], [], [], None
    for k in range(a.repeat):
        secs, m = [], {"received": 0, "sent": 0, "local_missing": 0, "remote_missing": 0}
        t0 = pc()
        for f, its in zip(filters, items):
            t1 = pc()
            try:
                r = await relay.sync(f, items=its, opts=opts)
            except Exception as e:  # noqa: BLE001
                return {"error": f"run {k + 1}: {type(e).__name__}: {e}", "runs_seconds": runs}
            secs.append(round(pc() - t1, 4))
            m["received"] += len(r.received)
            m["sent"] += len(r.sent)
            m["local_missing"] += len(r.remote)
            m["remote_missing"] += len(r.local)
        runs.append(round(pc() - t0, 4))
        per_filter.append(secs)
        first = first or m
        recv.append(m["received"])
        sent.append(m["sent"])
        log(f"run {k + 1}/{a.repeat}: {runs[-1]:.3f} s {secs}, {m}")
    await client.shutdown()
    return {"median_seconds": round(statistics.median(runs), 4), "min_seconds": min(runs), "runs_seconds": runs,
            "seconds_per_filter": per_filter, "received_per_run": recv, "sent_per_run": sent,
            "local_missing": first["local_missing"], "remote_missing": first["remote_missing"],
            "items_lowering_seconds": round(lowering, 4),
            "median_seconds_without_lowering": round(statistics.median(runs) - lowering, 4),
            "local_count": len(evs), "items_per_filter": [len(i) for i in items], "source": "items",
            "direction": a.direction, "dry_run": a.dry_run, "preload_seconds": round(pre, 3),
            "connect_seconds": round(conn, 4)}


async def bench_main(a):
    ns.uniffi_set_event_loop(asyncio.get_running_loop())
    if a.source == "items":
        return await bench_items(a)
    filters = parse_filters(a.filter)
    folder = tempfile.mkdtemp(prefix="neg-peer-lmdb-", dir=a.lmdb_dir)
    try:
        db, count, pre = await preload(a.events_local, folder)
        client, url, conn = await connect(db, a.relay)
        runs, per_filter, recv, sent, first = [], [], [], [], None
        for k in range(a.repeat):
            t0 = pc()
            try:
                m, secs, failed = await sync_filters(client, db, url, filters, a)
            except Exception as e:  # noqa: BLE001
                return {"error": f"run {k + 1}: {type(e).__name__}: {e}", "runs_seconds": runs}
            runs.append(round(pc() - t0, 4))
            per_filter.append(secs)
            if failed:
                return {"error": f"run {k + 1}: relay failed: {failed}", "runs_seconds": runs}
            first = first or m
            recv.append(len(m["received"]))
            sent.append(len(m["sent"]))
            log(f"run {k + 1}/{a.repeat}: {runs[-1]:.3f} s {secs}, received {recv[-1]}, sent {sent[-1]}, "
                f"local missing {len(m['local_missing'])}, remote missing {len(m['remote_missing'])}")
            if m["received"] and not a.dry_run:  # restore the local set for the next run
                await db.delete_events(ns.Filter().ids([ns.EventId.parse(i) for i in m["received"]]))
            if m["sent"] and k + 1 < a.repeat:
                log("warning: events were uploaded; later runs start from a changed relay set")
        await client.shutdown()
        return {"median_seconds": round(statistics.median(runs), 4), "min_seconds": min(runs), "runs_seconds": runs,
                "seconds_per_filter": per_filter, "received_per_run": recv, "sent_per_run": sent,
                "local_missing": len(first["local_missing"]), "remote_missing": len(first["remote_missing"]),
                "local_count": count, "local_count_after": await db.count(ns.Filter()),
                "source": "db", "transfer": a.transfer, "direction": a.direction, "dry_run": a.dry_run,
                "preload_seconds": round(pre, 3), "connect_seconds": round(conn, 4)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def cmd_bench(a):
    if a.repeat < 1:
        sys.exit("bench: --repeat must be >= 1")
    try:
        out = asyncio.run(bench_main(a))
    except ConnectError as e:
        out = {"error": str(e)}
    emit(out, ok="error" not in out)


# ---------------------------------------------------------------- fetch-ids (plain REQ)

async def recv_until(ws, pred, timeout):
    """Frames until pred(frame) is true or timeout; returns (frames, matched)."""
    frames = []
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return frames, False
        try:
            raw = await asyncio.wait_for(ws.recv(), timeout=left)
        except asyncio.TimeoutError:
            return frames, False
        frames.append(raw)
        if pred(raw):
            return frames, True


async def fetch_ids_main(a):
    base = json.loads(a.filter)
    if not isinstance(base, dict):
        raise SystemExit("fetch-ids: --filter must be one JSON object")
    base.pop("limit", None)
    seen, pages, until = set(), 0, base.get("until")
    t0 = pc()
    async with websockets.connect(a.relay, max_size=None, compression=None, open_timeout=10) as ws:
        while True:
            f = dict(base, limit=a.page)
            if until is not None:
                f["until"] = until
            sub = f"ids{pages}"
            await ws.send(json.dumps(["REQ", sub, f]))
            evs = []
            frames, ok = await recv_until(ws, lambda raw: json.loads(raw)[0] in ("EOSE", "CLOSED", "NOTICE") and
                                          (json.loads(raw)[0] == "NOTICE" or json.loads(raw)[1] == sub), a.timeout)
            for raw in frames:
                m = json.loads(raw)
                if m[0] == "EVENT" and m[1] == sub:
                    evs.append(m[2])
                elif m[0] in ("CLOSED", "NOTICE") and m[-1]:
                    return {"error": f"relay answered {raw}", "ids": sorted(seen), "pages": pages}
            if not ok:
                return {"error": f"no EOSE for {sub} within {a.timeout} s", "ids": sorted(seen), "pages": pages}
            await ws.send(json.dumps(["CLOSE", sub]))
            pages += 1
            new = {e["id"] for e in evs} - seen
            seen |= new
            if len(evs) < a.page:
                break
            oldest = min(e["created_at"] for e in evs)
            if not new:
                return {"error": f"more than {a.page} events at created_at {oldest}: until-paging cannot go on",
                        "ids": sorted(seen), "pages": pages}
            until = oldest
        count = None
        await ws.send(json.dumps(["COUNT", "cnt", base]))
        frames, ok = await recv_until(ws, lambda raw: json.loads(raw)[0] == "COUNT", 2)
        if ok:
            count = json.loads(frames[-1])[2].get("count")
    return {"ids": sorted(seen), "count": len(seen), "pages": pages, "relay_count": count, "seconds": round(pc() - t0, 3)}


def cmd_fetch_ids(a):
    out = asyncio.run(fetch_ids_main(a))
    emit(out, ok="error" not in out)


# ---------------------------------------------------------------- probe (raw NIP-77 frames)

def varint(n):
    out = [n & 0x7F]
    n >>= 7
    while n:
        out.append(0x80 | (n & 0x7F))
        n >>= 7
    return bytes(reversed(out))


def fingerprint(ids):
    s = sum(int.from_bytes(i, "little") for i in ids) % (1 << 256)
    return hashlib.sha256(s.to_bytes(32, "little") + varint(len(ids))).digest()[:16]


def msg_fingerprint_all(ids):
    """0x61 + one Range up to infinity (bound = varint 0, prefix length 0), mode 1 = Fingerprint."""
    return bytes([0x61]) + varint(0) + varint(0) + varint(1) + fingerprint(ids)


def msg_idlist_all(ids):
    """0x61 + one Range up to infinity, mode 2 = IdList of all ids."""
    return bytes([0x61]) + varint(0) + varint(0) + varint(2) + varint(len(ids)) + b"".join(ids)


def decode_neg(hexmsg):
    """Negentropy v1 message -> short summary: version, and per range the upper bound, mode and
    payload size (fingerprints shown, ids counted)."""
    try:
        b = bytes.fromhex(hexmsg)
    except ValueError as e:
        return f"not hex: {e}"
    if not b:
        return "empty"
    pos, last_ts, ranges = 1, 0, []

    def rd_varint():
        nonlocal pos
        n = 0
        while True:
            c = b[pos]
            pos += 1
            n = (n << 7) | (c & 0x7F)
            if not c & 0x80:
                return n

    try:
        while pos < len(b):
            enc = rd_varint()
            ts = "inf" if enc == 0 else last_ts + enc - 1
            if enc:
                last_ts = ts
            plen = rd_varint()
            prefix = b[pos:pos + plen].hex()
            pos += plen
            mode = rd_varint()
            bound = f"{ts}" + (f"/{prefix}" if plen else "")
            if mode == 0:
                ranges.append(f"<{bound} Skip")
            elif mode == 1:
                ranges.append(f"<{bound} Fingerprint {b[pos:pos + 16].hex()}")
                pos += 16
            elif mode == 2:
                n = rd_varint()
                ranges.append(f"<{bound} IdList {n} ids")
                pos += 32 * n
            else:
                ranges.append(f"<{bound} mode {mode}?")
                break
    except IndexError:
        ranges.append("(truncated)")
    head = f"version 0x{b[0]:02x}, {len(b)} bytes, {len(ranges)} ranges"
    if len(ranges) > 6:
        ranges = ranges[:3] + [f"... {len(ranges) - 5} more ..."] + ranges[-2:]
    return head + (": " + "; ".join(ranges) if ranges else "")


def short(frame, keep=300):
    return frame if len(frame) <= keep else frame[:keep] + f"...(+{len(frame) - keep} chars, total {len(frame)})"


async def probe_case(url, name, frames_out, wait=3.0, settle=0.5):
    """Sends the frames on a fresh connection; collects answers until `wait` s have passed (or
    `settle` s after the last NEG answer)."""
    res = {"case": name, "sent": [short(f) for f in frames_out], "received": [], "decoded": [], "closed": None}
    try:
        async with websockets.connect(url, max_size=None, compression=None, open_timeout=10) as ws:
            t0 = pc()
            for f in frames_out:
                await ws.send(f)
            end = time.monotonic() + wait
            while time.monotonic() < end:
                try:
                    raw = await asyncio.wait_for(ws.recv(), timeout=end - time.monotonic())
                except asyncio.TimeoutError:
                    break
                res["received"].append(short(raw))
                res.setdefault("first_answer_ms", round(1000 * (pc() - t0), 2))
                try:
                    m = json.loads(raw)
                    if m[0] == "NEG-MSG":
                        res["decoded"].append(decode_neg(m[2]))
                        res.setdefault("neg_msg_chars", []).append(len(raw))
                    if m[0] in ("NEG-MSG", "NEG-ERR", "NOTICE", "CLOSED"):
                        end = min(end, time.monotonic() + settle)
                except (ValueError, IndexError, TypeError):
                    pass
    except websockets.exceptions.ConnectionClosed as e:
        res["closed"] = f"code {e.rcvd.code if e.rcvd else None} {e.rcvd.reason if e.rcvd else ''!r} (close frame " \
                        f"{'received' if e.rcvd else 'NOT received: TCP dropped, 1006'})"
    except OSError as e:
        res["closed"] = f"connect failed: {e}"
    if not res["received"] and res["closed"] is None:
        res["received"] = [f"(nothing within {wait} s)"]
    return res


async def probe_many(url, name, frames_out, quiet=1.5):
    """Many frames on one connection; answers counted by type, the first frame of each type kept."""
    res = {"case": name, "sent": [short(frames_out[0], 200), f"... {len(frames_out)} frames"], "counts": {},
           "first": {}, "closed": None}
    try:
        async with websockets.connect(url, max_size=None, compression=None, open_timeout=10) as ws:
            for f in frames_out:
                await ws.send(f)
            while True:
                try:
                    raw = await asyncio.wait_for(ws.recv(), timeout=quiet)
                except asyncio.TimeoutError:
                    break
                m = json.loads(raw)
                key = m[0] if m[0] == "NEG-MSG" else f"{m[0]} {m[-1]}"
                res["counts"][key] = res["counts"].get(key, 0) + 1
                if key not in res["first"]:
                    res["first"][key] = {"frame": short(raw, 200), "answer_no": sum(res["counts"].values())}
    except websockets.exceptions.ConnectionClosed as e:
        res["closed"] = f"code {e.rcvd.code if e.rcvd else None} (close frame " \
                        f"{'received' if e.rcvd else 'NOT received: TCP dropped, 1006'})"
    return res


async def probe_main(a):
    flt = json.loads(a.filter)
    items = []
    if a.events:
        items = [(e["created_at"], bytes.fromhex(e["id"])) for e in map(json.loads, read_lines(a.events))]
    ids = [i for _, i in sorted(items)]
    nothing = {"kinds": [1], "#t": [f"neg-probe-nothing-{random.randrange(1 << 40)}"]}
    rnd = random.Random(1)
    C = []
    C.append(await probe_case(a.relay, f"well-formed NEG-OPEN, one Fingerprint range over {len(ids)} local items",
                              [json.dumps(["NEG-OPEN", "p1", flt, msg_fingerprint_all(ids).hex()])]))
    C.append(await probe_case(a.relay, "NEG-OPEN, empty local set as '61' (no ranges), filter matching nothing",
                              [json.dumps(["NEG-OPEN", "p2", nothing, "61"])]))
    C.append(await probe_case(a.relay, "NEG-OPEN, empty local set as Fingerprint(empty), filter matching nothing",
                              [json.dumps(["NEG-OPEN", "p3", nothing, msg_fingerprint_all([]).hex()])]))
    C.append(await probe_case(a.relay, "NEG-OPEN '61' (no ranges = implicit Skip of everything) for the filter",
                              [json.dumps(["NEG-OPEN", "p1s", flt, "61"])]))
    C.append(await probe_case(a.relay, f"NEG-OPEN, Fingerprint over {len(ids)} local items, filter matching nothing",
                              [json.dumps(["NEG-OPEN", "p1n", nothing, msg_fingerprint_all(ids).hex()])]))
    C.append(await probe_case(a.relay, "NEG-OPEN, empty-IdList range over the filter: relay lists its ids",
                              [json.dumps(["NEG-OPEN", "p4", flt, msg_idlist_all([]).hex()])]))
    C.append(await probe_case(a.relay, "NEG-OPEN, malformed hex 'zz'", [json.dumps(["NEG-OPEN", "p5", flt, "zz"])]))
    C.append(await probe_case(a.relay, "NEG-OPEN, odd-length hex '610'", [json.dumps(["NEG-OPEN", "p6", flt, "610"])]))
    C.append(await probe_case(a.relay, "NEG-OPEN, truncated message '6100000101' (fingerprint cut)",
                              [json.dumps(["NEG-OPEN", "p7", flt, "6100000101"])]))
    C.append(await probe_case(a.relay, "NEG-OPEN, protocol version 0x62",
                              [json.dumps(["NEG-OPEN", "p8", flt, "62" + msg_fingerprint_all(ids).hex()[2:]])]))
    C.append(await probe_case(a.relay, "NEG-MSG for a subscription never opened",
                              [json.dumps(["NEG-MSG", "never", msg_fingerprint_all([]).hex()])]))
    C.append(await probe_case(a.relay, "NEG-CLOSE for a subscription never opened", [json.dumps(["NEG-CLOSE", "never"])]))
    C.append(await probe_case(a.relay, "NEG-OPEN with 3 elements (no initial message)",
                              [json.dumps(["NEG-OPEN", "p9", flt])]))
    C.append(await probe_case(a.relay, "NEG-OPEN with a 300-character subscription id",
                              [json.dumps(["NEG-OPEN", "s" * 300, nothing, "61"])]))
    C.append(await probe_many(a.relay, f"{a.many} NEG-OPENs (distinct ids, never closed) on one connection",
                              [json.dumps(["NEG-OPEN", f"m{i}", nothing, "61"]) for i in range(a.many)]))
    C.append(await probe_many(a.relay, f"{a.many} NEG-OPEN + NEG-CLOSE pairs on one connection",
                              [json.dumps(x) for i in range(a.many) for x in
                               (["NEG-OPEN", f"c{i}", nothing, "61"], ["NEG-CLOSE", f"c{i}"])]))
    if a.big:
        big = [rnd.randbytes(32) for _ in range(a.big)]
        C.append(await probe_case(a.relay, f"NEG-OPEN, initial IdList of {a.big} random ids "
                                  f"({len(msg_idlist_all(big)) * 2} hex chars)",
                                  [json.dumps(["NEG-OPEN", "p10", flt, msg_idlist_all(big).hex()])], wait=15))
    return {"relay": a.relay, "filter": flt, "cases": C}


def cmd_probe(a):
    emit(asyncio.run(probe_main(a)))


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description="rust-nostr (nostr-sdk 0.45.1) side of the NIP-77 interop tests",
                                 epilog="see the module docstring (head of this file) for the output formats")
    sp = ap.add_subparsers(dest="cmd", required=True)

    g = sp.add_parser("gen", help="deterministic signed events")
    g.add_argument("--count", type=int, required=True)
    g.add_argument("--seed", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--kind", type=int, default=1)
    g.add_argument("--base-time", type=int, default=None)
    g.add_argument("--authors", type=int, default=20)
    g.add_argument("--verify-every", type=int, default=10)
    g.set_defaults(fn=cmd_gen)

    lo = sp.add_parser("load", help="publish events to a relay")
    lo.add_argument("--relay", required=True)
    lo.add_argument("--events", required=True)
    lo.add_argument("--window", type=int, default=1000)
    lo.add_argument("--via", choices=("ws", "sdk"), default="ws")
    lo.add_argument("--per-connection", type=int, default=5000,
                    help="events per WebSocket (LocalRelay drops a connection after ~6,000 messages/minute)")
    lo.add_argument("--connections", type=int, default=2, help="WebSockets at once (ws)")
    lo.set_defaults(fn=cmd_load)

    for name, fn in (("sync", cmd_sync), ("bench", cmd_bench)):
        s = sp.add_parser(name, help="rust-nostr Client.sync (NIP-77)" + (" timings" if name == "bench" else ""))
        s.add_argument("--relay", required=True)
        s.add_argument("--events" if name == "sync" else "--events-local", required=True)
        s.add_argument("--filter", required=True)
        s.add_argument("--direction", choices=sorted(DIRECTIONS), default="down")
        s.add_argument("--dry-run", action="store_true", help="SyncOptions.dry_run(): reconcile, transfer nothing")
        s.add_argument("--initial-timeout", type=float, default=10,
                       help="SyncOptions.initial_timeout: seconds to wait for the first NEG answer (default 10)")
        s.add_argument("--transfer", choices=("sync", "manual"), default="sync",
                       help="sync: Client.sync moves the events; manual: dry-run Client.sync, then "
                            "Client.fetch_events by ids (<= 500 a REQ) / Client.send_event")
        s.add_argument("--lmdb-dir", default=DEFAULT_LMDB_PARENT,
                       help="parent folder of the temporary NostrLmdb (default: /dev/shm when writable, so "
                            "fsync does not dominate; else $TMPDIR)")
        if name == "sync":
            s.add_argument("--local-ids", action="store_true", help="also print local_ids_after")
            s.add_argument("--keep-db", action="store_true")
        else:
            s.add_argument("--repeat", type=int, default=5)
            s.add_argument("--source", choices=("db", "items"), default="db",
                           help="db: Client with the preloaded NostrLmdb, Client.sync; items: no database, "
                                "Relay.sync(filter, items) with FILE's (id, created_at) (down/dry-run only)")
        s.set_defaults(fn=fn)

    f = sp.add_parser("fetch-ids", help="all ids the relay holds for a filter (paged REQ)")
    f.add_argument("--relay", required=True)
    f.add_argument("--filter", required=True)
    f.add_argument("--page", type=int, default=500)
    f.add_argument("--timeout", type=float, default=30)
    f.set_defaults(fn=cmd_fetch_ids)

    p = sp.add_parser("probe", help="raw NEG-OPEN/NEG-MSG frames and the relay's answers")
    p.add_argument("--relay", required=True)
    p.add_argument("--filter", default='{"kinds":[1]}')
    p.add_argument("--events", default=None, help="local items for the well-formed NEG-OPEN (default: none)")
    p.add_argument("--big", type=int, default=0, help="also send an initial IdList of N random ids")
    p.add_argument("--many", type=int, default=300, help="NEG-OPENs for the subscription-count cases")
    p.set_defaults(fn=cmd_probe)

    a = ap.parse_args()
    if os.environ.get("NEG_PEER_LOG"):  # e.g. NEG_PEER_LOG=debug: rust-nostr's tracing log on stderr
        # rust-nostr's logger writes to fd 1: point fd 1 at stderr, keep the JSON on the real stdout
        sys.stdout = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        ns.init_logger(getattr(ns.LogLevel, os.environ["NEG_PEER_LOG"].upper()))
    fast_lower()
    try:
        a.fn(a)
    except (OSError, websockets.exceptions.WebSocketException, asyncio.TimeoutError) as e:
        emit({"error": f"{type(e).__name__}: {e}"}, ok=False)


if __name__ == "__main__":
    main()
