// Ring all_reduce, every op (the bitwise ones too), the 8-bit integer types: i8, u8 (label gpu;
// type_cases.cuh). The other element types: test_gpu_types_*.cu.
#include "type_cases.cuh"

#include <cstdint>

using namespace collcomm_gpu_test;

TEST_CASE("ring all_reduce: every op, i8 u8") { ring_all_reduce_every_op(type_list<std::int8_t, std::uint8_t>{}); }
