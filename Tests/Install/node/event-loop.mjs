// The event loop while Softchat's blocking calls run (issue: Node's event loop stopped on every
// account call). A 10 ms interval records the largest gap between its ticks while the account is
// checked and scanned page by page and a connected transport is stopped: first with the
// synchronous forms (the gap is the calls' length), then with the Promise forms, which run on
// worker threads. Prints one JSON line. Environment: SOFTCHAT_DB (an account holding the events
// tagged "loop"), SOFTCHAT_RELAY (ws URL).
import { SoftchatAccount, SoftchatIdentity } from "softchat";

const filter = JSON.stringify({ kinds: [1], "#t": ["loop"] });
const now = Math.floor(Date.now() / 1000) + 1_000_000_000;

function monitor() {
  let last = performance.now();
  let max = 0;
  const timer = setInterval(() => {
    const t = performance.now();
    max = Math.max(max, t - last);
    last = t;
  }, 10);
  return () => {
    clearInterval(timer);
    return Math.max(max, performance.now() - last);
  };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 30));

async function scan(account, promises) {
  let before = null;
  let seen = 0;
  do {
    const page = promises ? await account.queryEventsAsync([filter], 1000, now, before) : account.queryEvents([filter], 1000, now, before);
    seen += page.events.length;
    before = page.next;
  } while (before !== null);
  return seen;
}

async function readyTransport(account, identity) {
  const transport = account.startManagedTransport({ relayUrls: [process.env.SOFTCHAT_RELAY] }, identity);
  for await (const change of transport.states()) {
    if (change.kind === "relay" && change.phase === "ready") break;
  }
  return transport;
}

async function measure(promises) {
  const account = promises ? await SoftchatAccount.openAsync(process.env.SOFTCHAT_DB) : SoftchatAccount.open(process.env.SOFTCHAT_DB);
  const identity = SoftchatIdentity.generate();
  await tick();
  let done = monitor();
  const report = promises ? await account.checkAsync(now) : account.check(now);
  const scanned = await scan(account, promises);
  const queryGap = done();
  const transport = await readyTransport(account, identity);
  await tick();
  done = monitor();
  if (promises) await transport.stop();
  else transport.close();
  const stopGap = done();
  account.close();
  return { events: report.events, scanned, queryGapMs: Math.round(queryGap), stopGapMs: Math.round(stopGap) };
}

const blocking = await measure(false);
const promises = await measure(true);
console.log(JSON.stringify({ language: "node", blocking, promises }));
const ok = promises.scanned === promises.events && promises.queryGapMs < 100 && promises.stopGapMs < 100;
process.exit(ok ? 0 : 1);
