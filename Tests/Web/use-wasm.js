// Preloaded by scripts/facades/test-wasm (NODE_OPTIONS=--require …) so Node runs the facade's tests on the
// WebAssembly backend: softchat.wasm (SOFTCHAT_WASM) is compiled and installed before any test file
// loads the facade (SOFTCHAT_LIB, tsc's CommonJS build), and the Node-API addon is never loaded.
const fs = require("node:fs");
// The Node-API addon must not be what answers: a path that does not exist makes loading it fail.
process.env.SOFTCHAT_ADDON = "/nonexistent/softchat_addon.node";
const { instantiateSoftchat } = require(`${process.env.SOFTCHAT_LIB}/wasm.js`);
instantiateSoftchat(new WebAssembly.Module(fs.readFileSync(process.env.SOFTCHAT_WASM)));
