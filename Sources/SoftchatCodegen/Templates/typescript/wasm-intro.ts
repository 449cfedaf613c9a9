// The WebAssembly backend of the TypeScript facade: softchat.wasm (scripts/build/build-wasm) exports the
// portable half of the C ABI (generated/c/softchat.h) under the same names, and this module calls
// them as the Node-API addon does, so api.ts runs unchanged over either. Strings cross as UTF-8 in
// the module's memory: arguments are copied in, zeroed and freed after the call (a secret key's hex
// lives in wasm memory only for the call); results are read and freed. Handles are opaque objects
// whose garbage collection calls the handle's free function; each is checked to be one this backend
// made, of the type the argument takes. Randomness comes from crypto.getRandomValues.

import { SOFTCHAT_CONTRACT_CHECKSUM } from "./contracts.js";
import { useBackend, type Addon } from "./native.js";

// ES2021's FinalizationRegistry, typed here so the facade compiles for ES2020 (Node 18+ and every
// current browser have it).
const Registry = (globalThis as unknown as {
  FinalizationRegistry: new <T>(cleanup: (held: T) => void) => { register(target: object, held: T): void };
}).FinalizationRegistry;

/** Text, or a handle of the named type (its C prefix, `softchat_identity`), `?` when it may be null. */
type ArgumentKind = "text" | `handle:${string}` | `handle?:${string}`;
type ResultKind = { kind: "text" } | { kind: "handle"; type: string; free: string } | { kind: "none" };
/** One entry point of the table below. */
export interface EntryPoint {
  symbol: string;
  args: readonly ArgumentKind[];
  result: ResultKind;
}
