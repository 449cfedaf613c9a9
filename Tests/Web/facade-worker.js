// The facade's Node test files in a browser Worker (scripts/facades/test-wasm runs it in headless Chromium):
// a small CommonJS loader fetches tsc's CommonJS output of the facade and of
// Tests/Facades/typescript (the same files `node --test` runs) from scripts/facades/test-wasm's server
// (synchronous XHR, which Workers allow), with stand-ins for the three Node modules the tests use —
// node:test (a runner: tests and subtests in order), node:assert/strict (ok, equal, deepEqual with
// Node's strict semantics for the values the tests compare) and node:fs (readFileSync over the
// server) — and installs softchat.wasm as the facade's backend first. Each result goes back to the
// server as a TAP line.
"use strict";
const query = new URL(self.location.href).searchParams;
const env = JSON.parse(query.get("env"));
const report = (line) => { const x = new XMLHttpRequest(); x.open("POST", "/report", false); x.send(line); };

function get(path, type) {
  const x = new XMLHttpRequest();
  x.open("GET", "/fs" + path, false);
  if (type) x.responseType = type;
  x.send();
  return x.status === 200 ? (type ? x.response : x.responseText) : null;
}

const dirname = (p) => p.slice(0, p.lastIndexOf("/")) || "/";
function join(base, rel) {
  const parts = base.split("/");
  for (const piece of rel.split("/")) {
    if (piece === "..") parts.pop();
    else if (piece !== "." && piece !== "") parts.push(piece);
  }
  return parts.join("/");
}

const modules = new Map();
function load(path) {
  for (const candidate of [path, path + ".js", path + "/index.js"]) {
    if (modules.has(candidate)) return modules.get(candidate).exports;
    const text = get(candidate);
    if (text === null) continue;
    const module = { exports: {} };
    modules.set(candidate, module);
    new Function("require", "module", "exports", "__filename", "__dirname", `${text}\n//# sourceURL=${candidate}`)(
      (id) => requireFrom(candidate, id), module, module.exports, candidate, dirname(candidate));
    return module.exports;
  }
  throw new Error(`cannot load ${path}`);
}

// MARK: node:assert/strict
function deepStrictEqual(a, b) {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((v, i) => deepStrictEqual(v, b[i]));
  const ka = Object.keys(a), kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepStrictEqual(a[k], b[k]));
}
class AssertionError extends Error {}
const show = (v) => { try { return JSON.stringify(v); } catch { return String(v); } };
const assert = {
  ok(value, message) { if (!value) throw new AssertionError(message || `expected a truthy value, got ${show(value)}`); },
  equal(actual, expected, message) {
    if (!Object.is(actual, expected)) throw new AssertionError(message || `${show(actual)} !== ${show(expected)}`);
  },
  deepEqual(actual, expected, message) {
    if (!deepStrictEqual(actual, expected)) throw new AssertionError(message || `not deep-equal:\n${show(actual)}\n${show(expected)}`);
  },
};

// MARK: node:test
const queue = [];
let count = 0, failures = 0;
function test(name, body) { queue.push({ name, body }); }
async function run(name, body) {
  const context = { test: (sub, subBody) => run(`${name} > ${sub}`, subBody) };
  try {
    await body(context);
    report(`ok ${++count} - ${name}`);
  } catch (e) {
    failures++;
    report(`not ok ${++count} - ${name}\n  # ${String(e && e.stack || e).split("\n").join("\n  # ")}`);
  }
}

const builtins = {
  "node:test": test,
  "node:assert/strict": assert,
  "node:fs": { readFileSync: (path) => { const t = get(path); if (t === null) throw new Error(`ENOENT: ${path}`); return t; } },
  typescript: null,
};
function requireFrom(from, id) {
  if (id === "typescript") return load(env.TYPESCRIPT);
  if (id in builtins) return builtins[id];
  if (id.startsWith("/")) return load(id);
  if (id.startsWith("./") || id.startsWith("../")) return load(join(dirname(from), id));
  throw new Error(`${from}: no module ${id} in the browser harness`);
}

self.process = { env };
(async () => {
  try {
    const started = performance.now();
    const wasm = new WebAssembly.Module(get(env.SOFTCHAT_WASM, "arraybuffer"));
    load(`${env.SOFTCHAT_LIB}/wasm.js`).instantiateSoftchat(wasm);
    report(`# softchat.wasm compiled and instantiated in ${(performance.now() - started).toFixed(1)} ms`);
    report(`# userAgent ${navigator.userAgent}`);
    load(env.TEST_FILE);
    for (const t of queue) await run(t.name, t.body);
    report(`# pass ${count - failures}\n# fail ${failures}`);
  } catch (e) {
    report(`not ok 0 - the harness\n  # ${String(e && e.stack || e)}\n# pass 0\n# fail 1`);
  }
  report("#done");
})();
