// scripts/bench/bench-wasm's Node side: softchat.wasm's cold starts, its core parse+verify, and
// SignedNostrEvent.parse through the facade on the Node-API addon (native, release) and then on
// softchat.wasm, over the same corpus. Prints one JSON object.
//
//   SOFTCHAT_WASM  softchat.wasm          CORPUS  events, one JSON object a line
//   SOFTCHAT_LIB   the facade compiled to CommonJS (tsc), with softchat_addon.node beside it
//   REPS, COLD_RUNS
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { coldStarts, core, facade } from "./measure.mjs";

const env = process.env;
const reps = Number(env.REPS ?? 5);
const bytes = new Uint8Array(readFileSync(env.SOFTCHAT_WASM));
const lines = readFileSync(env.CORPUS, "utf8").split("\n").filter((l) => l.length > 0);
const require = createRequire(import.meta.url);
const api = require(`${env.SOFTCHAT_LIB}/api.js`);

const result = { environment: `Node ${process.version}`, coldStarts: await coldStarts(bytes, Number(env.COLD_RUNS ?? 5)) };
result.core = await core(bytes, lines, reps);
// The Node-API addon first: installing the wasm backend replaces it for the rest of the process.
result.facadeNative = facade((line) => api.SignedNostrEvent.parse(line), lines, reps);
require(`${env.SOFTCHAT_LIB}/wasm.js`).instantiateSoftchat(new WebAssembly.Module(bytes));
result.facadeWasm = facade((line) => api.SignedNostrEvent.parse(line), lines, reps);
console.log(JSON.stringify(result));
