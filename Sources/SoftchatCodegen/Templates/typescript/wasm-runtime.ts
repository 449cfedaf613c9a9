/** The exports softchat.wasm has besides the entry points. */
interface Exports {
  memory: { buffer: ArrayBuffer };
  softchat_wasm_alloc(count: number): number;
  softchat_wasm_free(pointer: number): void;
  softchat_contract_checksum(): number;
  softchat_string_free(pointer: number): void;
  softchat_error_free(pointer: number): void;
  [name: string]: unknown;
}

/** A handle into the module's memory, freed by the garbage collector: an opaque, frozen token.
 * Its pointer and type live in the backend that made it (`made` in backend()), not in a field a
 * caller could overwrite, so only a handle that backend returned, of the type the argument takes,
 * reaches the module; a session passed as an identity is refused as the Node-API addon refuses
 * an external of another type tag. */
class WasmHandle {
  constructor(readonly type: string) {
    Object.freeze(this);
  }
}

/** A TypeError with the code the Node-API addon gives a refused argument. */
function argumentError(message: string): TypeError {
  return Object.assign(new TypeError(message), { code: "softchat_argument" });
}

/** Instantiates an already compiled softchat.wasm (synchronously) and installs it as the facade's
 * backend: after this, every class of the facade runs on it. Throws if the module was built from
 * another schema. */
export function instantiateSoftchat(module: WebAssembly.Module): void {
  let memory: { buffer: ArrayBuffer } | undefined;
  const bytes = (pointer: number, count: number) => new Uint8Array(memory!.buffer, pointer, count);
  const imports = {
    softchat: {
      // crypto.getRandomValues takes at most 65,536 bytes a call.
      random_fill(pointer: number, count: number): void {
        for (let done = 0; done < count; done += 65536) crypto.getRandomValues(bytes(pointer + done, Math.min(65536, count - done)));
      },
      print_line(pointer: number, count: number): void {
        console.error(`softchat.wasm: ${new TextDecoder("utf-8", { fatal: false }).decode(bytes(pointer, count).slice())}`);
      },
    },
  };
  const instance = new WebAssembly.Instance(module, imports);
  const exports = instance.exports as unknown as Exports;
  memory = exports.memory;
  useBackend(backend(exports));
}

/** Compiles and instantiates softchat.wasm from its bytes or a fetch() response (streaming where
 * the platform can), then installs it as the facade's backend (see instantiateSoftchat). */
export async function loadSoftchat(source: ArrayBuffer | Uint8Array | Response | Promise<Response>): Promise<void> {
  const resolved = await source;
  let module: WebAssembly.Module;
  if (resolved instanceof ArrayBuffer || resolved instanceof Uint8Array) {
    module = await WebAssembly.compile(resolved);
  } else if (typeof WebAssembly.compileStreaming === "function") {
    module = await WebAssembly.compileStreaming(resolved);
  } else {
    module = await WebAssembly.compile(await resolved.arrayBuffer());
  }
  instantiateSoftchat(module);
}

function backend(x: Exports): Addon {
  const encoder = new TextEncoder();
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const freeing = new Registry<{ pointer: number; free: string }>((held) => {
    (x[held.free] as (p: number) => void)(held.pointer);
  });
  // Every handle this backend made and not yet collected: its pointer into this module's memory
  // and its type. A handle of another backend (another instantiation) is not in it.
  const made = new WeakMap<object, { pointer: number; type: string }>();
  const memory = () => new Uint8Array(x.memory.buffer);
  const readText = (pointer: number): string => {
    const m = memory();
    let end = pointer;
    while (m[end] !== 0) end++;
    return decoder.decode(m.subarray(pointer, end));
  };
  const readPointer = (at: number): number => new DataView(x.memory.buffer).getUint32(at, true);
  const addon: Addon = {
    softchat_contract_checksum: () => readText(x.softchat_contract_checksum()),
  };
  for (const [name, entry] of Object.entries(wasmEntryPoints)) {
    const fn = x[name] as ((...args: number[]) => number) | undefined;
    if (typeof fn !== "function") throw new Error(`softchat.wasm has no export ${name}`);
    addon[name] = (...args: unknown[]): unknown => {
      if (args.length < entry.args.length) throw argumentError(`${name} takes ${entry.args.length} arguments`);
      const texts: { pointer: number; count: number }[] = [];
      const errorSlot = x.softchat_wasm_alloc(4);
      try {
        const cArgs = entry.args.map((kind, i) => {
          const value = args[i];
          if (kind === "text") {
            if (value === null || value === undefined) return 0;
            if (typeof value !== "string") throw argumentError(`${name}: argument ${i} must be a string or null`);
            const utf8 = encoder.encode(value);
            const pointer = x.softchat_wasm_alloc(utf8.length + 1);
            memory().set(utf8, pointer);
            memory()[pointer + utf8.length] = 0;
            texts.push({ pointer, count: utf8.length + 1 });
            return pointer;
          }
          const optional = kind.startsWith("handle?:");
          const type = kind.slice(kind.indexOf(":") + 1);
          if (optional && (value === null || value === undefined)) return 0;
          const held = typeof value === "object" && value !== null ? made.get(value) : undefined;
          if (held === undefined) throw argumentError(`${name}: argument ${i} must be a Softchat handle (${type})`);
          if (held.type !== type) throw argumentError(`${name}: argument ${i} must be a ${type} handle, not a ${held.type}`);
          return held.pointer;
        });
        new DataView(x.memory.buffer).setUint32(errorSlot, 0, true);
        const result = fn(...cArgs, errorSlot);
        const error = readPointer(errorSlot);
        if (error !== 0) {
          const code = readText(readPointer(error));
          const message = readText(readPointer(error + 4));
          x.softchat_error_free(error);
          throw Object.assign(new Error(message), { code });
        }
        switch (entry.result.kind) {
          case "none":
            return undefined;
          case "text": {
            if (result === 0) return undefined;
            const text = readText(result);
            x.softchat_string_free(result);
            return text;
          }
          case "handle": {
            const handle = new WasmHandle(entry.result.type);
            made.set(handle, { pointer: result, type: entry.result.type });
            freeing.register(handle, { pointer: result, free: entry.result.free });
            return handle;
          }
        }
      }
      finally {
        // Arguments may be secrets (a key's hex): zeroed before their memory is given back.
        for (const t of texts) {
          memory().fill(0, t.pointer, t.pointer + t.count);
          x.softchat_wasm_free(t.pointer);
        }
        x.softchat_wasm_free(errorSlot);
      }
    };
  }
  for (const name of nativeOnlyEntryPoints) {
    addon[name] = () => {
      throw new Error(`softchat: ${name} needs the file system or sockets (the account, the managed transport): ` +
        `it is in the Node backend, not the WebAssembly one`);
    };
  }
  if (addon.softchat_contract_checksum() !== SOFTCHAT_CONTRACT_CHECKSUM) {
    throw new Error(`softchat: softchat.wasm was built from schema checksum ${String(addon.softchat_contract_checksum())}, ` +
      `but this facade was generated from ${SOFTCHAT_CONTRACT_CHECKSUM}; rebuild both from the same Schema/`);
  }
  return addon;
}
