/* libsecp256k1 for wasm32 in one translation unit, compiled by scripts/build/build-wasm against the
 * Debian source package it unpacks (trixie's 0.5.0; the repository holds no copy of its source).
 * Besides the library, it exports the library's SHA-256 to the Swift core's SHA-256 seam
 * (Wasm/Platform/SHA256.swift): the same implementation libsecp256k1 uses for BIP-340's
 * tagged hashes, tested against NIST's vectors by the library and by Softchat's wasm tests. */
#include "src/secp256k1.c"
#include "src/precomputed_ecmult.c"
#include "src/precomputed_ecmult_gen.c"
#include "shim.h"

__attribute__((import_module("softchat"), import_name("print_line")))
void softchat_host_print_line(const char *bytes, size_t count);

_Static_assert(sizeof(secp256k1_sha256) <= sizeof(softchat_sha256), "softchat_sha256 is too small");
_Static_assert(_Alignof(secp256k1_sha256) <= _Alignof(softchat_sha256), "softchat_sha256 is misaligned");

void softchat_sha256_init(softchat_sha256 *state) {
    secp256k1_sha256_initialize((secp256k1_sha256 *)state);
}

void softchat_sha256_update(softchat_sha256 *state, const unsigned char *bytes, size_t count) {
    secp256k1_sha256_write((secp256k1_sha256 *)state, bytes, count);
}

void softchat_sha256_finish(softchat_sha256 *state, unsigned char *out32) {
    secp256k1_sha256_finalize((secp256k1_sha256 *)state, out32);
}

void softchat_secure_zero(void *bytes, size_t count) {
    volatile unsigned char *p = (volatile unsigned char *)bytes;
    while (count--) *p++ = 0;
}

/* What the JavaScript loader needs to pass strings in: memory it allocates and frees. */
__attribute__((export_name("softchat_wasm_alloc")))
void *softchat_wasm_alloc(size_t count) { return malloc(count); }

__attribute__((export_name("softchat_wasm_free")))
void softchat_wasm_free(void *bytes) { free(bytes); }

/* The C library calls Embedded Swift's runtime makes, answered without WASI: randomness (for
 * Hasher seeds) from the host's CSPRNG, and output (fatalError's message) to the host's console
 * a line at a time. */
void arc4random_buf(void *bytes, size_t count) { softchat_host_random_fill(bytes, count); }


static char softchat_line[512];
static size_t softchat_line_count;

int putchar(int c) {
    if (c != '\n') softchat_line[softchat_line_count++] = (char)c;
    if (c == '\n' || softchat_line_count == sizeof softchat_line) {
        softchat_host_print_line(softchat_line, softchat_line_count);
        softchat_line_count = 0;
    }
    return c;
}

/* libsecp256k1's illegal-argument and error callbacks (built with
 * USE_EXTERNAL_DEFAULT_CALLBACKS): its defaults print through stdio, which would need WASI.
 * The core only passes arguments it has checked, so either callback is a bug: report and trap. */
void secp256k1_default_illegal_callback_fn(const char *message, void *data) {
    (void)data;
    const char *p = message;
    while (*p) p++;
    softchat_host_print_line(message, (size_t)(p - message));
    __builtin_trap();
}

void secp256k1_default_error_callback_fn(const char *message, void *data) {
    secp256k1_default_illegal_callback_fn(message, data);
}
