// The WebAssembly build's measurements, shared by Node (bench-node.mjs) and the Chromium Worker
// (bench-worker.mjs) so both run the same code; scripts/bench/bench-wasm runs them and prints the
// figures beside native ones measured in the same run. Nothing here asserts a speed: it measures.
//
//   coldStarts   compile and instantiate of softchat.wasm, each on bytes the engine has not seen
//                (a custom section with a nonce defeats V8's per-process module cache), so each
//                reading is what a page's first load pays;
//   core         parse+verify of the corpus inside the module (softchat_wasm_bench_load /
//                softchat_wasm_bench_parse_verify): the loop `softchat bench events` times
//                natively, without the facade's marshalling;
//   facade       SignedNostrEvent.parse(line) per event through a facade backend: what a
//                TypeScript app pays (strings in, JSON out, a decoded VerifiedEvent).

/** `bytes` with a custom section named "softchat.nonce" holding `nonce` appended: a valid module
 * that compiles to the same code, but that no cache keyed by the module's bytes has seen. */
export function withNonce(bytes, nonce) {
  const name = new TextEncoder().encode("softchat.nonce");
  const payload = new TextEncoder().encode(String(nonce));
  const body = [name.length, ...name, ...payload];
  const size = [];
  for (let n = body.length; ; ) {
    const low = n & 0x7f;
    n >>>= 7;
    if (n === 0) { size.push(low); break; }
    size.push(low | 0x80);
  }
  const out = new Uint8Array(bytes.length + 1 + size.length + body.length);
  out.set(bytes, 0);
  out.set([0, ...size, ...body], bytes.length);
  return out;
}

/** The imports softchat.wasm asks for (randomness from crypto.getRandomValues, diagnostics). */
function imports(memoryOf) {
  const view = (pointer, count) => new Uint8Array(memoryOf().buffer, pointer, count);
  return {
    softchat: {
      random_fill(pointer, count) {
        for (let done = 0; done < count; done += 65536) crypto.getRandomValues(view(pointer + done, Math.min(65536, count - done)));
      },
      print_line(pointer, count) { console.error(new TextDecoder().decode(view(pointer, count).slice())); },
    },
  };
}

/** Compiles and instantiates `bytes` `runs` times, each on unseen bytes; milliseconds. */
export async function coldStarts(bytes, runs) {
  const out = [];
  for (let i = 0; i < runs; i++) {
    const unseen = withNonce(bytes, `${Date.now()}-${i}-${Math.random()}`);
    const t0 = performance.now();
    const module = await WebAssembly.compile(unseen);
    const t1 = performance.now();
    let instance;
    instance = new WebAssembly.Instance(module, imports(() => instance.exports.memory));
    const t2 = performance.now();
    out.push({ compileMs: t1 - t0, instantiateMs: t2 - t1 });
  }
  return out;
}

/** The fastest of `reps` timed runs of `work` after one untimed run (tier-up, caches); seconds. */
function bestOf(reps, work) {
  work();
  let best = Infinity;
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    work();
    best = Math.min(best, (performance.now() - t0) / 1000);
  }
  return best;
}

/** Parse+verify of `lines` inside a fresh instance of `bytes`, best of `reps`. */
export async function core(bytes, lines, reps) {
  let instance;
  const module = await WebAssembly.compile(bytes);
  instance = new WebAssembly.Instance(module, imports(() => instance.exports.memory));
  const x = instance.exports;
  const text = new TextEncoder().encode(lines.join("\n"));
  const pointer = x.softchat_wasm_alloc(text.length + 1);
  new Uint8Array(x.memory.buffer).set(text, pointer);
  new Uint8Array(x.memory.buffer)[pointer + text.length] = 0;
  const loaded = x.softchat_wasm_bench_load(pointer);
  x.softchat_wasm_free(pointer);
  if (loaded !== lines.length) throw new Error(`softchat_wasm_bench_load kept ${loaded} of ${lines.length} lines`);
  let verified = 0;
  const seconds = bestOf(reps, () => { verified = x.softchat_wasm_bench_parse_verify(); });
  if (verified !== lines.length) throw new Error(`only ${verified} of ${lines.length} events verified in softchat.wasm`);
  return { items: lines.length, seconds, perSecond: lines.length / seconds };
}

/** `parse(line)` (a facade's SignedNostrEvent.parse) over `lines`, best of `reps`. */
export function facade(parse, lines, reps) {
  let last;
  const seconds = bestOf(reps, () => { for (const line of lines) last = parse(line); });
  const expected = JSON.parse(lines[lines.length - 1]).id;
  if (!last || last.id !== expected) throw new Error(`the facade's last event has id ${last && last.id}, not ${expected}`);
  return { items: lines.length, seconds, perSecond: lines.length / seconds };
}
