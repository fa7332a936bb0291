// Ring all_reduce, every op (the bitwise ones too), the 64-bit integer types: i64, u64 (label gpu;
// type_cases.cuh). The other element types: test_gpu_types_*.cu.
#include "type_cases.cuh"

#include <cstdint>

using namespace collcomm_gpu_test;

TEST_CASE("ring all_reduce: every op, i64 u64") { ring_all_reduce_every_op(type_list<std::int64_t, std::uint64_t>{}); }
