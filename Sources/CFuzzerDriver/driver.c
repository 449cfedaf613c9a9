// Intentionally empty: the header declares libFuzzer's driver for Swift.
#include "fuzzer_driver.h"
