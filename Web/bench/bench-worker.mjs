// scripts/bench/bench-wasm's browser side, a module Worker (index.html starts it): softchat.wasm's cold
// starts, its core parse+verify, and SignedNostrEvent.parse through the browser build of the
// facade (softchat/browser.js) on the same module. Posts one JSON object to the page's `report`.
import { coldStarts, core, facade } from "./measure.mjs";
import { loadSoftchat, SignedNostrEvent } from "./softchat/browser.js";

const query = new URL(self.location.href).searchParams;
const report = (body) => fetch(query.get("report"), { method: "POST", body: JSON.stringify(body) });

try {
  const reps = Number(query.get("reps") ?? 5);
  const bytes = new Uint8Array(await (await fetch("./softchat/softchat.wasm", { cache: "no-store" })).arrayBuffer());
  const lines = (await (await fetch(query.get("corpus"), { cache: "no-store" })).text()).split("\n").filter((l) => l.length > 0);
  const result = { environment: navigator.userAgent, coldStarts: await coldStarts(bytes, Number(query.get("coldRuns") ?? 5)) };
  // The way a page loads it: streaming compile of the fetched response, then instantiate.
  const t0 = performance.now();
  await loadSoftchat(fetch(`./softchat/softchat.wasm?streaming=${Date.now()}`, { cache: "no-store" }));
  result.streamingLoadMs = performance.now() - t0;
  result.core = await core(bytes, lines, reps);
  result.facadeWasm = facade((line) => SignedNostrEvent.parse(line), lines, reps);
  await report(result);
} catch (e) {
  await report({ error: String((e && e.stack) || e) });
}
