// The TypeScript managed-transport program (scripts/facades/test-facades runs it against rust-nostr's
// LocalRelay from scripts/interop/peers): `account.startManagedTransport(...)`, its `states()` and
// `events()` as AsyncIterables, and `await transport.stop()`, with no frame handled in TypeScript.
// A writer account publishes 200 events through enqueueSigned (100, then 100 more while the
// driver has the relay killed), observes its states until every intent is terminal, and a second
// account reads the synced messages back through queryEvents, page by page.
//
// Driver protocol (stdin/stdout lines), as ManagedProgram.kt: HALF → DOWN, QUEUED → UP, then one
// line of JSON; exit 0 only if every check held. Environment: SOFTCHAT_RELAY, SOFTCHAT_WORK,
// SOFTCHAT_TAG.
import {
  SoftchatAccount, SoftchatError, SoftchatIdentity,
  type EventCursor, type EventWindowUpdate, type ManagedTransportActivity, type ManagedTransportStateChange, type VerifiedEvent,
  type PrivateMessage, type PrivateRoom, type PublishIntentStatus,
} from "../lib/index";

declare function require(id: string): any;
declare const process: { env: Record<string, string | undefined>; stdin: unknown; exit(code: number): never };
const readline = require("node:readline");

const failures: string[] = [];
function check(ok: boolean, what: string): void {
  if (!ok) failures.push(what);
}

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]() as AsyncIterator<string>;
async function expectLine(word: string): Promise<void> {
  const line = await lines.next();
  check(line.value === word, `driver said ${String(line.value)}, not ${word}`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function waitUntil(seconds: number, condition: () => boolean): Promise<boolean> {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await sleep(50);
  }
  return condition();
}

const now = (): number => Math.floor(Date.now() / 1000);

function codeOf(body: () => unknown): string {
  try {
    body();
  } catch (e) {
    return e instanceof SoftchatError ? e.code : `not a SoftchatError: ${String(e)}`;
  }
  return "none";
}

/** NIP-17 through the facade: a send to bob's inbox relays, bob unwrapping it once, his room and page. */
function privateMessages(work: string): void {
  const alice = SoftchatIdentity.generate();
  const bob = SoftchatIdentity.generate();
  const t = now();
  const inbox = (who: SoftchatIdentity, relay: string): VerifiedEvent =>
    who.sign({ pubkey: null, createdAt: t - 10, kind: 10050, tags: [["relay", relay]], content: "" });
  const sender = SoftchatAccount.open(`${work}/alice-dm.db`);
  const reader = SoftchatAccount.open(`${work}/bob-dm.db`);
  check(codeOf(() => sender.messages.send([bob.publicKeyHex], "hello", alice, t)) === "recipient_has_no_inbox_relays",
    "a send without the recipient's inbox list is refused with recipient_has_no_inbox_relays");
  sender.incoming.ingest([inbox(alice, "wss://alice.example"), inbox(bob, "wss://bob.example")], t);
  const sent = sender.messages.send([bob.publicKeyHex], "hello from typescript", alice, t);
  check(JSON.stringify(sent.deliveries.map((d) => [d.recipient, d.relayUrls])) ===
    JSON.stringify([[bob.publicKeyHex, ["wss://bob.example"]], [alice.publicKeyHex, ["wss://alice.example"]]]),
    `each wrap goes to its recipient's inbox relays: ${JSON.stringify(sent.deliveries)}`);
  const wraps = sender.queryEvents([JSON.stringify({ kinds: [1059] })], 10, t).events;
  check(wraps.length === 2, `two wraps stored (${wraps.length})`);
  check(reader.messages.unlock(bob, t) === 0, "unlocking an empty inbox unwraps nothing");
  reader.incoming.ingest(wraps, t);
  const rooms = reader.messages.rooms(bob.publicKeyHex, t, 10);
  check(rooms.length === 1 && rooms[0].latest?.content === "hello from typescript" && rooms[0].unread === 1,
    `bob's room shows the message, unread: ${JSON.stringify(rooms)}`);
  const page = reader.messages.messages(bob.publicKeyHex, [alice.publicKeyHex], t, 10);
  check(page.length === 1 && page[0].id === sent.message.id && page[0].sender === alice.publicKeyHex,
    `bob's page holds the message from alice: ${JSON.stringify(page)}`);
  check(reader.messages.messages(bob.publicKeyHex, [alice.publicKeyHex], t, 10, page[0].cursor).length === 0, "the next page is empty");
  reader.messages.markRead(bob.publicKeyHex, [alice.publicKeyHex]);
  check(reader.messages.rooms(bob.publicKeyHex, t, 10)[0].unread === 0, "marked read");
  sender.close();
  reader.close();
}

/** The Promise forms (`<name>Async`, run on worker threads): the same answers as the synchronous
 * forms, and the same SoftchatError codes as rejections. */
async function promiseForms(work: string): Promise<void> {
  const identity = SoftchatIdentity.generate();
  const account = await SoftchatAccount.openAsync(`${work}/promises.db`);
  const filter = JSON.stringify({ kinds: [1], "#t": ["promises"] });
  const t = now();
  const events = Array.from({ length: 30 }, (_, i) =>
    identity.sign({ pubkey: null, createdAt: t - 100 + i, kind: 1, tags: [["t", "promises"]], content: `promise ${i}` }));
  const outcome = await account.incoming.ingestAsync(events, t);
  check(outcome.receipt.insertedEventIds.length === 30, `ingestAsync inserted 30: ${JSON.stringify(outcome.receipt)}`);
  const viaPromise = await account.queryEventsAsync([filter], 10, t);
  const viaCall = account.queryEvents([filter], 10, t);
  check(JSON.stringify(viaPromise) === JSON.stringify(viaCall) && viaPromise.events.length === 10,
    "queryEventsAsync returns what queryEvents does");
  const second = await account.queryEventsAsync([filter], 10, t, viaPromise.next);
  check(second.events.length === 10 && second.events[0].id !== viaPromise.events[0].id, "queryEventsAsync pages with its cursor");
  const rejection = async (body: () => Promise<unknown>): Promise<string> => {
    try {
      await body();
    } catch (e) {
      return e instanceof SoftchatError ? e.code : `not a SoftchatError: ${String(e)}`;
    }
    return "none";
  };
  check(await rejection(() => account.queryEventsAsync([filter], 0, t)) === "invalid_relay_filter",
    "queryEventsAsync with a page of 0 rejects with invalid_relay_filter");
  check(await rejection(() => SoftchatAccount.openAsync(`${work}/no/such/folder/x.db`)) === "account_storage_failed",
    "openAsync of a path in a missing folder rejects with account_storage_failed");
  // Many at once on one account: each answered, none lost.
  const pages = await Promise.all(Array.from({ length: 16 }, () => account.queryEventsAsync([filter], 30, t)));
  check(pages.every((p) => p.events.length === 30), "16 concurrent queryEventsAsync calls each return the 30 events");
  const report = await account.checkAsync(t);
  check(report.ok && report.events === 30, `checkAsync: ${JSON.stringify(report.problems)}, ${report.events} events`);
  account.close();
}

/** Applies one update of an observed window to the reader's copy of it; false when a change does not fit. */
function applyUpdate(window: VerifiedEvent[], update: EventWindowUpdate): boolean {
  switch (update.kind) {
    case "snapshot":
    case "reload":
      window.splice(0, window.length, ...update.events);
      return true;
    case "changes":
      for (const change of update.changes) {
        if (change.kind === "inserted") window.splice(change.at, 0, change.event);
        else if (change.kind === "removed" && window[change.at]?.id === change.id) window.splice(change.at, 1);
        else return false;
      }
      return true;
    default:
      return false;
  }
}

/** Live queries through the facade: updates() as an AsyncIterable, off the event loop; close() ends it. */
async function liveQueries(work: string): Promise<void> {
  const account = SoftchatAccount.open(`${work}/live.db`);
  const author = SoftchatIdentity.generate();
  const t = now();
  const note = (i: number): VerifiedEvent => author.sign({ pubkey: null, createdAt: t - 100 + i, kind: 1, tags: [], content: `note ${i}` });
  account.incoming.ingest([note(0)], t);
  const filters = [JSON.stringify({ kinds: [1] })];
  const observation = account.observe(filters, 3);
  const window: VerifiedEvent[] = [];
  const kinds: string[] = [];
  let fits = true;
  const reading = (async () => {
    for await (const update of observation.updates()) {
      kinds.push(update.kind);
      fits = applyUpdate(window, update) && fits;
    }
  })();
  check(await waitUntil(5, () => kinds.length > 0), "live: the snapshot arrives");
  check(kinds[0] === "snapshot" && window.map((e) => e.content).join() === "note 0", `live: the first update is the snapshot (${kinds})`);
  account.incoming.ingest([1, 2, 3, 4].map(note), t);
  const fresh = account.queryEvents(filters, 3, t).events.map((e) => e.id).join();
  check(await waitUntil(5, () => window.map((e) => e.id).join() === fresh), `live: the changes rebuild a fresh read (${window.map((e) => e.content)})`);
  check(fits, "live: every change fits the window it applies to");
  check(observation.window().map((e) => e.id).join() === fresh, "live: window() is the same window");
  observation.close();
  await reading;  // the AsyncIterable ends after close()
  const seen = kinds.length;
  account.incoming.ingest([note(5)], t);
  await sleep(300);
  check(kinds.length === seen, "live: nothing after close()");
  check(codeOf(() => account.observe(filters, 0)) === "invalid_relay_filter", "live: a window of 0 is refused");
  account.close();
}

/**
 * Applies one update of an observed list of rows to the reader's copy: `list` names the
 * snapshot's field (rooms, messages, intents), `one` a change's row field (room, message,
 * intent). False when a change does not fit.
 */
function applyRows<Row>(rows: Row[], update: any, list: string, one: string, key: (row: Row) => string): boolean {
  if (update.kind === "snapshot" || update.kind === "reload") {
    rows.splice(0, rows.length, ...(update[list] as Row[]));
    return true;
  }
  for (const change of update.changes) {
    if (change.kind === "inserted" && change.at <= rows.length) rows.splice(change.at, 0, change[one]);
    else if (change.kind === "removed" && rows[change.at] && key(rows[change.at]) === change.key) rows.splice(change.at, 1);
    else if (change.kind === "moved" && rows[change.from] && key(rows[change.from]) === change.key) rows.splice(change.at, 0, rows.splice(change.from, 1)[0]);
    else if (change.kind === "updated" && rows[change.at] && key(rows[change.at]) === key(change[one])) rows[change.at] = change[one];
    else return false;
  }
  return true;
}

/** Reads every update of an observation into `rows` until it is closed; `fits` turns false on a change that does not fit. */
function readRows<Row>(updates: AsyncIterable<unknown>, rows: Row[], list: string, one: string, key: (row: Row) => string, state: { fits: boolean }): Promise<void> {
  return (async () => {
    for await (const update of updates) state.fits = applyRows(rows, update, list, one, key) && state.fits;
  })();
}

/** A chat screen through the facade: the room list, the open room and a sent message's delivery ticks, each an AsyncIterable. */
async function chatScreen(work: string): Promise<void> {
  const account = SoftchatAccount.open(`${work}/chat.db`);
  const alice = SoftchatIdentity.generate();
  const bob = SoftchatIdentity.generate();
  const t = now();
  const inbox = (who: SoftchatIdentity, relay: string): VerifiedEvent =>
    who.sign({ pubkey: null, createdAt: t - 10, kind: 10050, tags: [["relay", relay]], content: "" });
  account.incoming.ingest([inbox(alice, "wss://alice.example"), inbox(bob, "wss://bob.example")], t);
  const state = { fits: true };
  const roomList: PrivateRoom[] = [];
  const messages: PrivateMessage[] = [];
  const ticks: PublishIntentStatus[] = [];
  const roomsObservation = account.messages.observeRooms(alice.publicKeyHex, 10);
  const roomObservation = account.messages.observeMessages(alice.publicKeyHex, [bob.publicKeyHex], 20);
  const readers = [
    readRows(roomsObservation.updates(), roomList, "rooms", "room", (r) => r.members.join(","), state),
    readRows(roomObservation.updates(), messages, "messages", "message", (m) => m.id, state),
  ];
  const sent = account.messages.send([bob.publicKeyHex], "hello from typescript", alice, t);
  const deliveries = account.messages.observeDeliveries(sent.message.id, [...sent.message.recipients, sent.message.sender]);
  readers.push(readRows(deliveries.updates(), ticks, "intents", "intent", (i) => i.intentId, state));
  check(await waitUntil(5, () => messages.length === 1 && messages[0].id === sent.message.id), "chat: the sent message is in the open room");
  check(await waitUntil(5, () => roomList.length === 1 && roomList[0].latest?.content === "hello from typescript"), "chat: the room is in the room list");
  check(await waitUntil(5, () => ticks.length === 2 && ticks.every((i) => i.state === "pending")), `chat: two pending intents (${JSON.stringify(ticks.map((i) => i.state))})`);
  // Bob's relay takes its intent: the tick moves to in flight.
  const claim = account.delivery.claim("chat-lease", "wss://bob.example", t, 10)!;
  account.delivery.markSocketWritten(claim.claim, claim.payloads.map((p) => p.intentId));
  check(await waitUntil(5, () => ticks.find((i) => i.relayUrl === "wss://bob.example")?.state === "inFlight"), "chat: the claimed intent is in flight");
  check(state.fits, "chat: every change fits the list it applies to");
  check(JSON.stringify(roomObservation.window()) === JSON.stringify(messages), "chat: window() is the same list");
  for (const o of [roomsObservation, roomObservation, deliveries]) o.close();
  await Promise.all(readers);  // each AsyncIterable ends after close()
  check(codeOf(() => account.messages.observeRooms(alice.publicKeyHex, 0)) === "invalid_private_message", "chat: a list of 0 is refused");
  account.close();
}

async function main(): Promise<void> {
  const relay = process.env.SOFTCHAT_RELAY!;
  const work = process.env.SOFTCHAT_WORK!;
  const tag = process.env.SOFTCHAT_TAG!;
  const filter = JSON.stringify({ kinds: [1], "#t": [tag] });

  const writer = SoftchatAccount.open(`${work}/writer.db`);
  const reader = SoftchatAccount.open(`${work}/reader.db`);
  const identity = SoftchatIdentity.generate();
  reader.setSubscription("chat", [filter]);
  check(JSON.stringify(reader.subscriptions().map((s) => s.subscriptionId)) === '["chat"]', "the reader's policy holds its subscription");

  const writerTransport = writer.startManagedTransport({ relayUrls: [relay], acknowledgementTimeoutSeconds: 5 }, identity);
  const readerTransport = reader.startManagedTransport({ relayUrls: [relay], publishes: false });

  // Consumers of the AsyncIterables; they end once stop() has delivered the last update.
  const phases: string[] = [];
  let overallStopped = false;
  let accepted = 0;
  let rejected = 0;
  let received = 0;
  const writerStates = (async () => {
    for await (const change of writerTransport.states() as AsyncIterable<ManagedTransportStateChange>) {
      if (change.kind === "relay") phases.push(change.phase);
      if (change.kind === "overall" && change.phase === "stopped") overallStopped = true;
    }
  })();
  const writerEvents = (async () => {
    for await (const activity of writerTransport.events() as AsyncIterable<ManagedTransportActivity>) {
      if (activity.kind === "delivery" && activity.decision.state === "accepted") accepted += 1;
      if (activity.kind === "delivery" && activity.decision.state === "rejected") rejected += 1;
    }
  })();
  const readerEvents = (async () => {
    for await (const activity of readerTransport.events()) {
      if (activity.kind === "ingested") received += activity.result.accepted.length;
    }
  })();

  const start = now() - 300;
  const events: VerifiedEvent[] = [];
  for (let i = 0; i < 200; i++) {
    events.push(identity.sign({ pubkey: null, createdAt: start + Math.floor(i / 4), kind: 1, tags: [["t", tag]], content: `managed typescript ${i}` }));
  }
  const operations = events.map((_, i) => `typescript-${tag}-${i}`);
  for (let i = 0; i < 100; i++) writer.outgoing.enqueueSigned(operations[i], [events[i]], [relay], now());
  check(await waitUntil(60, () => accepted >= 100), `the first 100 accepted (saw ${accepted})`);
  console.log("HALF");
  await expectLine("DOWN");
  for (let i = 100; i < 200; i++) writer.outgoing.enqueueSigned(operations[i], [events[i]], [relay], now());
  console.log("QUEUED");
  await expectLine("UP");

  const states = () => operations.flatMap((op) => writer.delivery.intents(op)).map((s) => s.state);
  check(await waitUntil(90, () => states().every((s) => s === "accepted" || s === "rejected")), "every intent terminal");
  const final = states();
  check(final.length === 200 && final.every((s) => s === "accepted"), `all 200 intents accepted: ${JSON.stringify(final.filter((s) => s !== "accepted"))}`);
  check(phases.includes("backingOff") && phases.filter((p) => p === "ready").length >= 2, `states() saw the relay go away and come back: ${phases}`);
  const status = writerTransport.relays()[0];
  check(status.relayUrl === relay && status.accepted >= 200 && status.reconnects >= 1, `the writer's relay status counts it: ${JSON.stringify(status)}`);

  check(await waitUntil(90, () => reader.queryEvents([filter], 1000, now()).events.length === 200), "the reader holds 200 events");
  const paged: VerifiedEvent[] = [];
  let cursor: EventCursor | null = null;
  let pages = 0;
  do {
    const page: { events: VerifiedEvent[]; next: EventCursor | null } = reader.queryEvents([filter], 33, now(), cursor);
    paged.push(...page.events);
    cursor = page.next;
    pages += 1;
  } while (cursor !== null && pages < 20);
  const published = new Set(events.map((e) => e.id));
  check(paged.length === 200 && new Set(paged.map((e) => e.id)).size === 200 && paged.every((e) => published.has(e.id)), `pages hold the 200 published events once each (${paged.length})`);
  check(paged.every((e, i) => i === 0 || paged[i - 1].createdAt > e.createdAt || (paged[i - 1].createdAt === e.createdAt && paged[i - 1].id < e.id)), "pages are newest first, ties by id");
  check(pages === 7, `200 events in pages of 33 are 7 pages, not ${pages}`);
  check(paged.every((e) => e.created_at === e.createdAt), "events carry NIP-01's created_at beside createdAt");

  check(codeOf(() => reader.queryEvents([filter], 0, now())) === "invalid_relay_filter", "a page of 0 is refused with invalid_relay_filter");
  check(codeOf(() => writer.startManagedTransport({ relayUrls: ["http://not-a-relay"] })) === "invalid_relay_url",
    "a bad relay URL is refused with invalid_relay_url");
  check(codeOf(() => writer.startManagedTransport({ relayUrls: ["ws://relay.example/\r\nX-Injected: 1"] })) === "invalid_relay_url",
    "a relay URL with CR LF is refused with invalid_relay_url");

  await writerTransport.stop();
  await readerTransport.stop();
  await Promise.all([writerStates, writerEvents, readerEvents]);
  check(overallStopped, "states() ended with the overall stopped state");
  // Every update is delivered once stop() has returned and the iterators ended: one acceptance per intent.
  check(accepted === 200 && rejected === 0, `events() saw exactly 200 acceptances, no rejection (${accepted}, ${rejected})`);
  const writerCheck = writer.check(now());
  const readerCheck = reader.check(now());
  check(writerCheck.ok && writerCheck.liveLeases === 0, `the writer's check: ${writerCheck.problems}, leases ${writerCheck.liveLeases}`);
  check(writerCheck.intents.length === 1 && writerCheck.intents[0].state === "accepted" && writerCheck.intents[0].count === 200, `the writer's check counts 200 accepted: ${JSON.stringify(writerCheck.intents)}`);
  check(readerCheck.ok && readerCheck.events === 200, `the reader's check: ${readerCheck.problems}, ${readerCheck.events} events`);
  writer.close();
  reader.close();
  privateMessages(work);
  await liveQueries(work);
  await chatScreen(work);
  await promiseForms(work);
  console.log(JSON.stringify({ language: "typescript", accepted, received, pages, phases: phases.join(","), failures: failures.length }));
  for (const f of failures) console.error(`FAIL ${f}`);
  process.exit(failures.length === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(`FAIL ${String(e?.stack ?? e)}`);
  process.exit(1);
});
