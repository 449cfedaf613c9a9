// `node replay.js SCRIPT`: the session regression scripts (Tests/SessionRegressions/*.jsonl)
// through the TypeScript facade (the Node-API addon, or softchat.wasm with Tests/Web/use-wasm.js
// preloaded), one JSON line per call in the form `softchat replay` prints, so scripts/facades/test-facades
// and scripts/facades/test-wasm can compare the bindings line by line.
import {
  RelaySession, SignedNostrEvent, SoftchatError, RelayRecoveryContract, RelayPublishContract, RelaySessionContract,
  type RelaySessionConfig, type VerifiedEvent,
} from "../lib/index";

declare function require(id: string): any;
declare const process: { argv: string[]; stdout: { write(s: string): void } };
const fs = require("node:fs");

// The core's defaults that are not contract bounds (RelaySessionConfig.init in SoftchatCore); a
// drift shows as a difference from `softchat replay`.
function config(o: any): RelaySessionConfig {
  return {
    supportsEventsBatch: o.supportsEventsBatch ?? true,
    reconnectBaseDelaySeconds: o.reconnectBaseDelaySeconds ?? RelayRecoveryContract.bounds.reconnectBaseDelaySeconds.value,
    reconnectMaxDelaySeconds: o.reconnectMaxDelaySeconds ?? RelayRecoveryContract.bounds.reconnectMaxDelaySeconds.value,
    reconnectResetAfterSeconds: o.reconnectResetAfterSeconds ?? RelayRecoveryContract.bounds.reconnectResetAfterSeconds.value,
    jitterSeed: o.jitterSeed ?? 0,
    sinceOverlapSeconds: o.sinceOverlapSeconds ?? 10,
    correlateUnnamedAcknowledgements: o.correlateUnnamedAcknowledgements ?? false,
    relayUrl: o.relayUrl ?? null,
    maxMessageBytes: o.maxMessageBytes ?? null,
    acknowledgementTimeoutSeconds: o.acknowledgementTimeoutSeconds ?? RelayPublishContract.bounds.acknowledgementTimeoutSeconds.value,
    authenticationWaitSeconds: o.authenticationWaitSeconds ?? 5,
    authenticationWindowSeconds: o.authenticationWindowSeconds ?? 600,
    answersAuthentication: o.answersAuthentication ?? true,
  };
}

const event = (e: unknown): VerifiedEvent => SignedNostrEvent.parse(JSON.stringify(e));

function step(o: any, s: { session: RelaySession }): [string, unknown] {
  const session = s.session;
  switch (o.call) {
    case "configure": s.session = new RelaySession(config(o)); return ["actions", []];
    case "connect": return ["actions", session.connect()];
    case "transportConnected": return ["actions", session.transportConnected(o.now ?? null)];
    case "transportLost": return ["actions", session.transportLost(o.now ?? null)];
    case "cancel": return ["actions", session.cancel()];
    case "close": session.close(); return ["actions", []];
    case "subscribe": session.subscribe(o.id, o.filters.map((f: unknown) => JSON.stringify(f))); return ["actions", []];
    case "unsubscribe": session.unsubscribe(o.id); return ["actions", []];
    case "count": session.count(o.id, o.filters.map((f: unknown) => JSON.stringify(f))); return ["actions", []];
    case "cancelCount": session.cancelCount(o.id); return ["actions", []];
    case "publish": session.publish(o.events.map(event)); return ["actions", []];
    case "drainOutbound": return ["frames", session.drainOutbound(o.max ?? RelaySessionContract.bounds.defaultDrainMax.value)];
    case "confirmSent": session.confirmSent(o.eventIds, o.now ?? null); return ["actions", []];
    case "receive": return ["actions", session.receive(o.text, o.now ?? null)];
    case "confirmIngested": session.confirmIngested(o.eventId); return ["actions", []];
    case "authenticate": return ["actions", session.authenticate(event(o.event), o.now ?? null)];
    case "handleTimeout": return ["actions", session.handleTimeout(o.now)];
    case "pollTimeout": return ["timeout", session.pollTimeout() ?? null];
    case "snapshot": return ["snapshot", session.snapshot()];
    default: throw new Error(`unknown call ${o.call}`);
  }
}

const state = { session: new RelaySession() };
for (const line of fs.readFileSync(process.argv[2], "utf8").split("\n")) {
  if (!line.trim()) continue;
  const o = JSON.parse(line);
  const out: Record<string, unknown> = { call: o.call };
  try {
    const [key, value] = step(o, state);
    out[key] = value;
  } catch (e) {
    if (!(e instanceof SoftchatError)) throw e;
    const prefix = `${e.code}: `;
    out.error = { code: e.code, message: e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
