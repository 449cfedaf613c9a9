// A web app's first page script: "softchat" imported by name, as a bundler resolves it through the
// package's `browser` export condition (or an import map names it). Two RelaySessions over real
// WebSockets — one publishes 5 signed notes, the other subscribes — against the relay the page's
// ?relay= names; the result is POSTed to ?report=.
import { loadSoftchat, RelaySession, SoftchatIdentity, SoftchatError } from "softchat";

const params = new URLSearchParams(location.search);
const relay = params.get("relay");
const count = 5;
const now = () => Math.floor(Date.now() / 1000);
const report = (result) => fetch(params.get("report"), { method: "POST", body: JSON.stringify(result) });

/** A session and the socket it asks for: the host loop of docs/guides/web.md. */
function peer(on) {
  const session = new RelaySession();
  let socket = null;
  let timer = null;
  const run = (actions) => {
    for (const a of actions) {
      if (a.kind === "openTransport") {
        const s = (socket = new WebSocket(relay));
        s.onopen = () => run(session.transportConnected(now()));
        s.onmessage = (e) => run(session.receive(String(e.data), now()));
        s.onclose = () => { if (socket === s) { socket = null; run(session.transportLost(now())); } };
      } else if (a.kind === "closeTransport") {
        socket?.close();
        socket = null;
      } else if (a.kind === "persistEvent") {
        on.event?.(a.event);
        session.confirmIngested(a.event.id);
      } else if (a.kind === "deliveryChanged") {
        on.delivery?.(a.decision);
      } else if (a.kind === "endOfStoredEvents") {
        on.eose?.();
      } else if (a.kind === "scheduleReconnect") {
        setTimeout(() => run(session.connect()), a.delayMilliseconds);
      }
    }
    if (socket?.readyState === WebSocket.OPEN) {
      for (const frame of session.drainOutbound()) {
        socket.send(frame.frame);
        session.confirmSent(frame.deliveryEventIds, now());
      }
    }
    clearTimeout(timer);
    const at = session.pollTimeout();
    if (at !== null) timer = setTimeout(() => run(session.handleTimeout(now())), Math.max(0, at - now()) * 1000 + 5);
  };
  return { session, start: () => run(session.connect()) };
}

try {
  await loadSoftchat(); // softchat.wasm beside this module or the bundle made of it
  const alice = SoftchatIdentity.generate();
  const sent = new Set();
  const received = new Set();
  const accepted = new Set();
  let reported = false;
  const settle = () => {
    if (!reported && accepted.size === count && received.size === count) {
      reported = true;
      report({ language: "browser", published: count, accepted: accepted.size, received: received.size,
               wasm: performance.getEntriesByType("resource").map((r) => r.name).find((n) => n.endsWith(".wasm")) });
    }
  };
  const writer = peer({ delivery: (d) => { if (d.state === "accepted") accepted.add(d.eventId); settle(); } });
  const reader = peer({
    event: (e) => { if (sent.has(e.id)) received.add(e.id); settle(); },
    eose: () => {
      if (sent.size > 0) return;
      const events = [];
      for (let i = 0; i < count; i++) {
        const e = alice.sign({ pubkey: null, createdAt: now() - 10 + i, kind: 1, tags: [["t", "install-web"]], content: `install web ${i}` });
        sent.add(e.id);
        events.push(e);
      }
      writer.session.publish(events);
      writer.start();
    },
  });
  reader.session.subscribe("install", [JSON.stringify({ kinds: [1], authors: [alice.publicKeyHex] })]);
  reader.start();
  setTimeout(() => report({ language: "browser", published: count, accepted: accepted.size, received: received.size, timedOut: true }), 20000);
} catch (e) {
  report({ language: "browser", error: e instanceof SoftchatError ? `${e.code}: ${e.message}` : String((e && e.stack) || e) });
}
