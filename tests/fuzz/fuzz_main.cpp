// One libFuzzer binary per target: SHARDLINT_FUZZ_ENTRY names the entry (tests/fuzz/CMakeLists.txt).
#include "FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return shardlint::fuzz::SHARDLINT_FUZZ_ENTRY(data, size);
}
