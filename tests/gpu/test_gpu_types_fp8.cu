// Ring all_reduce, every op, the 8-bit floating-point types: e4m3, e5m2 (label gpu; type_cases.cuh).
#include "type_cases.cuh"

using namespace collcomm_gpu_test;

TEST_CASE("ring all_reduce: every op, e4m3 e5m2") {
  ring_all_reduce_every_op(type_list<__nv_fp8_e4m3, __nv_fp8_e5m2>{});
}
