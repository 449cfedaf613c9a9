// The browser demo's Worker: the Softchat core as WebAssembly (softchat/browser.js and
// softchat/softchat.wasm, from scripts/build/build-wasm), two RelaySessions — alice publishing, bob
// subscribed — each over a real WebSocket to the relay the page names. The Worker is the host
// the sans-IO session asks for: it opens and closes sockets, writes the frames drainOutbound gives,
// feeds socket text and time back in, and keeps the timers pollTimeout asks for. It posts every
// delivery change and every received message to the page, and a summary when done.
import { loadSoftchat, RelaySession, SoftchatIdentity, SoftchatError } from "./softchat/browser.js";

const now = () => Math.floor(Date.now() / 1000);
const post = (message) => self.postMessage(message);

/** One RelaySession and the socket it asks for. */
class Peer {
  constructor(name, relay, handlers) {
    this.name = name;
    this.relay = relay;
    this.handlers = handlers;
    this.session = new RelaySession();
    this.socket = null;
    this.timer = null;
  }

  start() { this.run(this.session.connect()); }

  /** Executes the session's actions in order, then writes what it queued and arms its timer. */
  run(actions) {
    for (const a of actions) {
      switch (a.kind) {
        case "openTransport": this.open(); break;
        case "closeTransport": this.socket?.close(); this.socket = null; break;
        case "persistEvent":
          // This demo keeps messages in memory; an app commits them durably first.
          this.handlers.received?.(a.event);
          this.session.confirmIngested(a.event.id);
          break;
        case "deliveryChanged": this.handlers.delivery?.(a.decision); break;
        case "endOfStoredEvents": this.handlers.eose?.(a.subscriptionId); break;
        case "scheduleReconnect": setTimeout(() => this.run(this.session.connect()), a.delayMilliseconds); break;
        default: post({ type: "note", peer: this.name, action: a });
      }
    }
    this.flush();
    this.arm();
  }

  open() {
    const socket = new WebSocket(this.relay);
    this.socket = socket;
    socket.onopen = () => this.run(this.session.transportConnected(now()));
    socket.onmessage = (e) => this.run(this.session.receive(String(e.data), now()));
    socket.onclose = () => { if (this.socket === socket) { this.socket = null; this.run(this.session.transportLost(now())); } };
  }

  flush() {
    if (this.socket?.readyState !== WebSocket.OPEN) return;
    for (const frame of this.session.drainOutbound()) {
      this.socket.send(frame.frame);
      // Written to the socket: only now may the session count the frame as sent.
      this.session.confirmSent(frame.deliveryEventIds, now());
    }
  }

  arm() {
    clearTimeout(this.timer);
    const at = this.session.pollTimeout();
    if (at === null) return;
    this.timer = setTimeout(() => this.run(this.session.handleTimeout(now())), Math.max(0, at - now()) * 1000 + 5);
  }
}

self.onmessage = async ({ data: { relay, count } }) => {
  const started = performance.now();
  try {
    await loadSoftchat(fetch(new URL("./softchat/softchat.wasm", import.meta.url)));
    post({ type: "loaded", milliseconds: performance.now() - started });
    const alice = SoftchatIdentity.generate();
    const bob = SoftchatIdentity.generate();
    const sent = new Map();
    const received = new Set();
    const states = new Map();
    const finish = () => {
      const accepted = [...states.values()].filter((s) => s === "accepted").length;
      if (received.size === count && accepted === count) {
        post({ type: "done", sent: sent.size, accepted, received: received.size, milliseconds: performance.now() - started });
      }
    };
    const sender = new Peer("alice", relay, {
      delivery: (d) => { states.set(d.eventId, d.state); post({ type: "delivery", eventId: d.eventId, state: d.state, category: d.category, message: d.message }); finish(); },
    });
    const receiver = new Peer("bob", relay, {
      received: (e) => {
        if (!sent.has(e.id)) return;
        received.add(e.id);
        post({ type: "received", eventId: e.id, content: e.content });
        finish();
      },
      eose: () => {
        // Bob's history is in: alice now publishes, each message a signed kind-1 event.
        const events = [];
        for (let i = 0; i < count; i++) {
          const e = alice.sign({ pubkey: alice.publicKeyHex, createdAt: now(), kind: 1, tags: [["p", bob.publicKeyHex]], content: `message ${i + 1} from the browser` });
          sent.set(e.id, e);
          events.push(e);
          post({ type: "published", eventId: e.id, content: e.content });
        }
        sender.session.publish(events);
        sender.start();
      },
    });
    receiver.session.subscribe("chat", [JSON.stringify({ kinds: [1], authors: [alice.publicKeyHex] })]);
    receiver.start();
  } catch (e) {
    post({ type: "error", message: e instanceof SoftchatError ? `${e.code}: ${e.message}` : String(e && e.stack || e) });
  }
};
