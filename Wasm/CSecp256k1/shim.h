#ifndef SOFTCHAT_WASM_SHIM_H
#define SOFTCHAT_WASM_SHIM_H
#include <stddef.h>
#include <stdint.h>
#include <secp256k1.h>
#include <secp256k1_ecdh.h>
#include <secp256k1_extrakeys.h>
#include <secp256k1_schnorrsig.h>

/* libsecp256k1's own SHA-256 (src/hash_impl.h), exported by softchat_wasm.c. The state is
 * opaque here: 8 words, a 64-byte block and a 64-bit length fit in 112 bytes. */
typedef struct softchat_sha256 { uint64_t opaque[14]; } softchat_sha256;
void softchat_sha256_init(softchat_sha256 *state);
void softchat_sha256_update(softchat_sha256 *state, const unsigned char *bytes, size_t count);
void softchat_sha256_finish(softchat_sha256 *state, unsigned char *out32);

/* Fills `count` bytes from the host's CSPRNG (crypto.getRandomValues); imported from JavaScript. */
__attribute__((import_module("softchat"), import_name("random_fill")))
void softchat_host_random_fill(void *bytes, size_t count);

/* Zeroes `count` bytes through a volatile pointer (wasm has no explicit_bzero). */
void softchat_secure_zero(void *bytes, size_t count);

/* wasi-libc's libm. */
double log(double x);
#endif
