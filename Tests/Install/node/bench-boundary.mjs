// The cost of handing a verified event back to the native library, per event, in one run:
// `filter.matches(event)` and `session.publish([event])` with the event as the library returned
// it (its proof recognised: the id re-hashed, no signature check) and with the same event made
// by hand, without its proof (verified in full, which every crossing did before the proof).
// Prints one JSON line. Environment: SOFTCHAT_BENCH_EVENTS (default 2,000).
import { RelayFilter, RelaySession, SoftchatIdentity } from "softchat";

const count = Number(process.env.SOFTCHAT_BENCH_EVENTS ?? 2000);
const identity = SoftchatIdentity.generate();
const sealed = Array.from({ length: count }, (_, i) =>
  identity.sign({ pubkey: null, createdAt: 1760000000 + i, kind: 1, tags: [["t", "bench"], ["p", "ab".repeat(32)]], content: `a chat message of ordinary length, number ${i}` }));
const handMade = sealed.map(({ proof, ...fields }) => fields);
const filter = RelayFilter.fromJson('{"kinds":[1],"#t":["bench"]}');

function matches(events) {
  const start = process.hrtime.bigint();
  let matched = 0;
  for (const e of events) if (filter.matches(e)) matched += 1;
  if (matched !== events.length) throw new Error(`matched ${matched} of ${events.length}`);
  return Number(process.hrtime.bigint() - start) / 1000 / events.length;
}

function publish(events) {
  let session = null;
  let spent = 0n;
  for (const [i, e] of events.entries()) {
    // A session holds at most 1,024 publishes awaiting their OK: a fresh one every 500.
    if (i % 500 === 0) {
      session = new RelaySession();
      session.connect();
      session.transportConnected();
    }
    const start = process.hrtime.bigint();
    session.publish([e]);
    spent += process.hrtime.bigint() - start;
    for (const frame of session.drainOutbound()) session.confirmSent(frame.deliveryEventIds);
  }
  return Number(spent) / 1000 / events.length;
}

// Three rounds, alternating, the best of each kept (the least disturbed by the machine).
const best = { matchesSealed: Infinity, matchesHandMade: Infinity, publishSealed: Infinity, publishHandMade: Infinity };
for (let round = 0; round < 3; round++) {
  best.matchesHandMade = Math.min(best.matchesHandMade, matches(handMade));
  best.matchesSealed = Math.min(best.matchesSealed, matches(sealed));
  best.publishHandMade = Math.min(best.publishHandMade, publish(handMade));
  best.publishSealed = Math.min(best.publishSealed, publish(sealed));
}
const round2 = (x) => Math.round(x * 100) / 100;
console.log(JSON.stringify({
  events: count,
  matchesMicroseconds: { before: round2(best.matchesHandMade), after: round2(best.matchesSealed), speedup: round2(best.matchesHandMade / best.matchesSealed) },
  publishMicroseconds: { before: round2(best.publishHandMade), after: round2(best.publishSealed), speedup: round2(best.publishHandMade / best.publishSealed) },
}));
