// libFuzzer target for the bootstrap's parsers (wire messages, message streams, unique ids, the
// environment's integers): every input must give a clean error or a valid, round-tripping value.
// The properties are in wire_oracle.hpp (CI runs the same oracle on random inputs in
// tests/bootstrap/test_wire_random.cpp). Build and run: tests/fuzz/run.sh.
#include "wire_oracle.hpp"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (const char* what = wire_oracle::check_input({reinterpret_cast<const std::byte*>(data), size})) {
    std::fprintf(stderr, "wire oracle violated: %s\n", what);
    std::abort();
  }
  return 0;
}
