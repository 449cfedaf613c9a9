// A Node app's first program, as an ES module importing the installed package by name.
import { readFileSync } from "node:fs";
import { SoftchatAccount, SoftchatIdentity } from "softchat";

const relay = process.env.SOFTCHAT_RELAY;
const work = process.env.SOFTCHAT_WORK;
const filter = JSON.stringify({ kinds: [1], "#t": ["install-node"] });
const now = () => Math.floor(Date.now() / 1000);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const writer = SoftchatAccount.open(`${work}/writer.db`);
const reader = SoftchatAccount.open(`${work}/reader.db`);
const identity = SoftchatIdentity.generate();
reader.setSubscription("install", [filter]);
// SOFTCHAT_CA_PEM: the private CA of a wss:// relay, given as text (a phone has no store to read).
const caPem = process.env.SOFTCHAT_CA_PEM ?? null;
const writerTransport = writer.startManagedTransport({ relayUrls: [relay], caPem }, identity);
const readerTransport = reader.startManagedTransport({ relayUrls: [relay], publishes: false, caPem });
const operations = [];
for (let i = 0; i < 5; i++) {
  const event = identity.sign({ pubkey: null, createdAt: now() - 10 + i, kind: 1, tags: [["t", "install-node"]], content: `install node ${i}` });
  operations.push(`install-node-${i}`);
  writer.outgoing.enqueueSigned(operations[i], [event], [relay], now());
}
const accepted = () => operations.flatMap((op) => writer.delivery.intents(op)).filter((s) => s.state === "accepted").length;
const received = () => reader.queryEvents([filter], 100, now()).events.length;
const deadline = Date.now() + Number(process.env.SOFTCHAT_WAIT_SECONDS ?? 30) * 1000;
while (Date.now() < deadline && (accepted() < 5 || received() < 5)) await sleep(50);
const result = { language: "node", published: 5, accepted: accepted(), received: received() };
await writerTransport.stop();
await readerTransport.stop();
writer.close();
reader.close();
result.library = readFileSync("/proc/self/maps", "utf8").split("\n").map((l) => l.split(/\s+/)[5]).find((p) => p?.endsWith("/libSoftchatFFI.so"));
console.log(JSON.stringify(result));
process.exit(result.accepted === 5 && result.received === 5 ? 0 : 1);
