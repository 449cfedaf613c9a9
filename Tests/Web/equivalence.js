// The WebAssembly build against the native build (scripts/facades/test-wasm runs it under Node): the same
// C ABI entry points, one through the Node-API addon over libSoftchatFFI, one through softchat.wasm,
// must give identical answers — the same result JSON (ids, fields, order) or the same stable error
// code with the same message (which names the place) — on:
//   the bad-input corpus (Tests/SoftchatCoreTests/BadInputs), the NIP-01 fixtures
//   (Tests/Fixtures/nostr-sdk-ios), 10,000 seeded random frames (mutations of valid frames) each
//   parsed both ways and fed to a live RelaySession on each backend; and the BIP-340 vectors, which
//   the wasm build must sign and verify exactly as the CSV says (as BIP340VectorTests requires of
//   the native build), with the same public keys on both; and every NIP-44 v2 vector (128), which the
//   wasm core must meet exactly as Nip44VectorTests requires of the native core (counted per group).
// Prints one line per corpus and exits 1 on any difference.
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const env = process.env;
const nat = require(env.SOFTCHAT_ADDON);
const { instantiateSoftchat } = require(`${env.SOFTCHAT_LIB}/wasm.js`);
const module_ = new WebAssembly.Module(fs.readFileSync(env.SOFTCHAT_WASM));
instantiateSoftchat(module_);
const wasm = require(`${env.SOFTCHAT_LIB}/native.js`).native();
if (wasm === nat) throw new Error("the wasm backend was not installed");

let failures = 0;
const mismatch = (what, a, b) => {
  if (++failures <= 10) console.log(`DIFFERENT ${what}\n  native: ${JSON.stringify(a)}\n  wasm:   ${JSON.stringify(b)}`);
};
// A verified event's proof is each backend's own per-process seal (VerificationSeal): the two
// differ by design, so each must be 32 lowercase hex characters and is then compared as one token.
const unsealed = (result) => typeof result === "string" ? result.replace(/"proof":"[0-9a-f]{32}"/g, '"proof":"<seal>"') : result;
const outcome = (backend, name, ...args) => {
  try { return { result: unsealed(backend[name](...args) ?? null) }; } catch (e) { return { code: e.code ?? null, message: e.message }; }
};
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
function compare(what, name, ...args) {
  const a = outcome(nat, name, ...args), b = outcome(wasm, name, ...args);
  if (!same(a, b)) mismatch(`${what}: ${name}`, a, b);
  return a;
}
const parsers = ["softchat_parse_client_relay_frame", "softchat_parse_relay_response_frame", "softchat_signed_nostr_event_parse", "softchat_relay_filter_from_json"];

// MARK: the bad-input corpus
{
  const dir = env.BAD_INPUTS;
  let n = 0, codes = 0;
  for (const file of fs.readdirSync(dir).sort()) {
    const [direction, code] = file.replace(/\.txt$/, "").split("--");
    const text = fs.readFileSync(path.join(dir, file), "utf8");
    const parser = direction === "client" ? "softchat_parse_client_relay_frame" : "softchat_parse_relay_response_frame";
    const a = compare(file, parser, text);
    if (a.code === code) codes++;
    n++;
  }
  console.log(`equivalence: bad-input corpus: ${n} cases compared, ${codes} refused with their expected code by both`);
}

// MARK: the NIP-01 fixtures
{
  const dir = env.FIXTURES;
  let n = 0;
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
    const text = fs.readFileSync(path.join(dir, file), "utf8");
    for (const p of parsers) compare(file, p, text);
    n++;
  }
  console.log(`equivalence: NIP-01 fixtures: ${n} files × ${parsers.length} parsers compared`);
}

/** A second instance of the module for its wasm-only exports: its exports, memory, and a C string writer. */
function rawInstance() {
  let memory;
  const instance = new WebAssembly.Instance(module_, { softchat: {
    random_fill: (p, n) => crypto.getRandomValues(new Uint8Array(memory.buffer, p, n)),
    print_line: () => {},
  } });
  const x = instance.exports;
  memory = x.memory;
  const cstring = (s) => {
    const bytes = new TextEncoder().encode(s);
    const p = x.softchat_wasm_alloc(bytes.length + 1);
    new Uint8Array(memory.buffer).set(bytes, p);
    new Uint8Array(memory.buffer)[p + bytes.length] = 0;
    return p;
  };
  return { x, memory, cstring };
}

// MARK: BIP-340
{
  const { x, memory, cstring } = rawInstance();
  const read = (p) => { const m = new Uint8Array(memory.buffer); let e = p; while (m[e]) e++; return new TextDecoder().decode(m.subarray(p, e)); };
  const rows = fs.readFileSync(env.BIP340, "utf8").trim().split(/\r?\n/).slice(1).map((l) => l.split(","));
  let signed = 0, verified = 0;
  for (const [index, secret, pub, aux, message, signature, result] of rows) {
    const lower = (s) => s.toLowerCase();
    if (secret) {
      const s = x.softchat_wasm_bip340_sign(cstring(lower(secret)), cstring(lower(aux)), cstring(lower(message)));
      const sig = s ? read(s) : null;
      if (sig !== lower(signature)) mismatch(`BIP-340 vector ${index}: wasm signature`, lower(signature), sig);
      else signed++;
      const keys = [nat, wasm].map((b) => b.softchat_identity_public_key_hex(b.softchat_identity_import_secret_hex(lower(secret))));
      if (!same(keys[0], keys[1]) || JSON.parse(keys[0]) !== lower(pub)) mismatch(`BIP-340 vector ${index}: public key`, keys[0], keys[1]);
    }
    const ok = x.softchat_wasm_bip340_verify(cstring(lower(pub)), cstring(lower(message)), cstring(lower(signature))) === 1;
    if (ok !== (result === "TRUE")) mismatch(`BIP-340 vector ${index}: wasm verification`, result, ok);
    else verified++;
  }
  console.log(`equivalence: BIP-340: ${rows.length} vectors, ${signed} signatures and ${verified} verifications as the CSV says (wasm); public keys equal`);
}

// MARK: NIP-44 v2
{
  const { x, memory, cstring } = rawInstance();
  const read = (p) => {
    if (!p) return null;
    const m = new Uint8Array(memory.buffer); let e = p; while (m[e]) e++;
    const text = new TextDecoder().decode(m.subarray(p, e));
    x.softchat_string_free(p);
    return text[0] === "o" ? { value: text.slice(1) } : { error: text.slice(1) };
  };
  const sha256 = (s) => require("node:crypto").createHash("sha256").update(s, "utf8").digest("hex");
  const v2 = JSON.parse(fs.readFileSync(env.NIP44, "utf8")).v2;
  const counts = {};
  const pass = (group, ok, what, got) => { if (ok) counts[group] = (counts[group] ?? 0) + 1; else mismatch(`NIP-44 ${group}: ${what}`, "as the vector says", got); };
  for (const v of v2.valid.get_conversation_key) {
    const r = read(x.softchat_wasm_nip44_conversation_key(cstring(v.sec1), cstring(v.pub2)));
    pass("conversation keys", r && r.value === v.conversation_key, v.pub2, r);
  }
  for (const v of v2.invalid.get_conversation_key) {
    const r = read(x.softchat_wasm_nip44_conversation_key(cstring(v.sec1), cstring(v.pub2)));
    const want = v.note.startsWith("sec1") ? "secret key is not a valid secp256k1 secret" : "public key is not a valid secp256k1 x-only public key";
    pass("invalid keys", r && r.error === want, v.note, r);
  }
  const mk = v2.valid.get_message_keys;
  for (const k of mk.keys) {
    const r = read(x.softchat_wasm_nip44_message_keys(cstring(mk.conversation_key), cstring(k.nonce)));
    pass("message keys", r && r.value === [k.chacha_key, k.chacha_nonce, k.hmac_key].join(":"), k.nonce, r);
  }
  for (const [unpadded, padded] of v2.valid.calc_padded_len) {
    const got = x.softchat_wasm_nip44_padded_length(unpadded);
    pass("padded lengths", got === padded, unpadded, got);
  }
  for (const v of v2.valid.encrypt_decrypt) {
    const k = read(x.softchat_wasm_nip44_conversation_key(cstring(v.sec1), cstring(
      JSON.parse(nat.softchat_identity_public_key_hex(nat.softchat_identity_import_secret_hex(v.sec2))))));
    const e = read(x.softchat_wasm_nip44_encrypt(cstring(v.conversation_key), cstring(v.nonce), cstring(v.plaintext)));
    const d = read(x.softchat_wasm_nip44_decrypt(cstring(v.conversation_key), cstring(v.payload)));
    pass("encrypt-decrypt", k?.value === v.conversation_key && e?.value === v.payload && d?.value === v.plaintext, v.plaintext, [k, e, d]);
  }
  for (const v of v2.valid.encrypt_decrypt_long_msg) {
    const plaintext = v.pattern.repeat(v.repeat);
    const e = read(x.softchat_wasm_nip44_encrypt(cstring(v.conversation_key), cstring(v.nonce), cstring(plaintext)));
    const d = e && read(x.softchat_wasm_nip44_decrypt(cstring(v.conversation_key), cstring(e.value)));
    pass("long messages", sha256(plaintext) === v.plaintext_sha256 && e && sha256(e.value) === v.payload_sha256 && d?.value === plaintext, v.repeat, e && sha256(e.value));
  }
  const reason = (note) => note.startsWith("unknown encryption version") ? "unknown encryption version" : note.startsWith("invalid base64") ? "invalid base64"
    : note.startsWith("invalid MAC") ? "invalid MAC" : note.startsWith("invalid padding") ? "invalid padding" : "invalid payload length";
  for (const v of v2.invalid.decrypt) {
    const r = read(x.softchat_wasm_nip44_decrypt(cstring(v.conversation_key), cstring(v.payload)));
    pass("invalid payloads", r && r.error === reason(v.note), v.note, r);
  }
  for (const n of v2.invalid.encrypt_msg_lengths) {
    const r = read(x.softchat_wasm_nip44_encrypt(cstring("01".repeat(32)), cstring("02".repeat(32)), cstring("a".repeat(n))));
    pass("invalid lengths", r && r.error === "plaintext must be 1 to 65,535 UTF-8 bytes", n, r);
  }
  const want = { "conversation keys": 35, "invalid keys": 8, "message keys": 32, "padded lengths": 24, "encrypt-decrypt": 10, "long messages": 3,
    "invalid payloads": 12, "invalid lengths": 4 };
  if (!same(counts, want)) mismatch("NIP-44 vector counts", want, counts);
  console.log(`equivalence: NIP-44 v2 (wasm): ${Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(", ")} as the vectors say`);
}

// MARK: 10,000 random frames
{
  let seed = 0x50f7c4a7;
  const random = () => { seed = (seed * 1103515245 + 12345) >>> 0; return seed / 2 ** 32; };
  const pick = (a) => a[Math.floor(random() * a.length)];
  const identity = nat.softchat_identity_import_secret_hex("0000000000000000000000000000000000000000000000000000000000000003");
  const events = Array.from({ length: 16 }, (_, i) => JSON.parse(nat.softchat_identity_sign(identity, JSON.stringify({
    pubkey: "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9", createdAt: 1700000000 + i, kind: pick([1, 7, 14, 1059]),
    tags: i % 3 ? [["p", "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9"], ["e", "a".repeat(64)]] : [],
    content: pick(["hi", "é ☃ 💬", "line\nbreak \"quoted\" \\ back", "", "x".repeat(300)]),
  }))));
  const nip01 = (e) => ({ id: e.id, pubkey: e.pubkey, created_at: e.createdAt, kind: e.kind, tags: e.tags, content: e.content, sig: e.sig });
  const valid = () => {
    const e = nip01(pick(events));
    return JSON.stringify(pick([
      ["EVENT", "s", e], ["EVENT", e], ["OK", e.id, true, ""], ["OK", e.id, false, "blocked: no"], ["EOSE", "s"],
      ["CLOSED", "s", "auth-required: x"], ["NOTICE", "hello"], ["AUTH", "challenge"], ["AUTH", e],
      ["REQ", "s", { kinds: [1], authors: [e.pubkey], since: 1, "#p": [e.pubkey], limit: 10 }], ["CLOSE", "s"],
      ["COUNT", "s", { count: 3, approximate: false }], ["COUNT", "s", { ids: [e.id] }], ["EVENTS", [e, nip01(pick(events))]],
      ["NEG-MSG", "s", "6100"], ["NEG-ERR", "s", "closed: x"], ["NEG-OPEN", "s", {}, "6100"],
    ]));
  };
  const alphabet = ['"', "[", "]", "{", "}", ",", ":", "\\", "0", "1", "9", "-", "e", "a", "f", " ", "\n", "é", "💬", "\u0000", "u", "n", "t"];
  const mutate = (s) => {
    const chars = [...s];
    const edits = 1 + Math.floor(random() * 3);
    for (let k = 0; k < edits; k++) {
      const i = Math.floor(random() * (chars.length + 1));
      switch (Math.floor(random() * 5)) {
        case 0: chars.splice(i, 1); break;
        case 1: chars.splice(i, 0, pick(alphabet)); break;
        case 2: chars[i] = pick(alphabet); break;
        case 3: chars.length = i; break;
        case 4: chars.splice(i, 0, ...chars.slice(i, i + 8)); break;
      }
    }
    return chars.join("");
  };
  const sessions = [nat, wasm].map((b) => {
    const h = b.softchat_relay_session_new();
    b.softchat_relay_session_connect(h);
    b.softchat_relay_session_transport_connected(h, "1000");
    b.softchat_relay_session_subscribe(h, "s", JSON.stringify(["{}"]));
    for (const f of JSON.parse(b.softchat_relay_session_drain_outbound(h, "256"))) {
      b.softchat_relay_session_confirm_sent(h, JSON.stringify(f.deliveryEventIds), "1000");
    }
    return h;
  });
  let n = 0, refused = 0, accepted = 0;
  for (; n < 10000; n++) {
    const text = random() < 0.15 ? valid() : mutate(valid());
    const a = compare(`random frame ${n} ${JSON.stringify(text).slice(0, 120)}`, "softchat_parse_relay_response_frame", text);
    compare(`random frame ${n}`, "softchat_parse_client_relay_frame", text);
    if (a.code) refused++; else accepted++;
    const r = [nat, wasm].map((b, i) => outcome(b, "softchat_relay_session_receive", sessions[i], text, String(1000 + n)));
    if (!same(r[0], r[1])) mismatch(`random frame ${n}: RelaySession.receive`, r[0], r[1]);
    for (const [i, b] of [nat, wasm].entries()) {
      for (const e of JSON.parse(r[i].result ?? "[]")) if (e.kind === "persistEvent") b.softchat_relay_session_confirm_ingested(sessions[i], e.event.id);
    }
  }
  const snapshots = [nat, wasm].map((b, i) => b.softchat_relay_session_snapshot(sessions[i]));
  if (!same(snapshots[0], snapshots[1])) mismatch("the sessions' snapshots after 10,000 frames", snapshots[0], snapshots[1]);
  console.log(`equivalence: random frames: ${n} (seeded), ${accepted} parsed and ${refused} refused as relay frames, each also parsed as a client frame and fed to a RelaySession on both`);
}

console.log(failures === 0 ? "equivalence: identical" : `equivalence: ${failures} differences`);
process.exit(failures === 0 ? 0 : 1);
