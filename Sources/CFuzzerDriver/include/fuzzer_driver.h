// libFuzzer's entry for programs that keep their own main (used by softchat-fuzz when built
// with SOFTCHAT_FUZZ=1; the symbol comes from libclang_rt.fuzzer).
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
