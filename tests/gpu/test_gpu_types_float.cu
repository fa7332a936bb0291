// Ring all_reduce, every op, the floating-point types of 16 bits and more: f32, f64, f16, bf16
// (label gpu; type_cases.cuh). The other types: test_gpu_types_fp8.cu, test_gpu_types_int{8,32,64}.cu.
#include "type_cases.cuh"

using namespace collcomm_gpu_test;

TEST_CASE("ring all_reduce: every op, f32 f64 f16 bf16") {
  ring_all_reduce_every_op(type_list<float, double, __half, __nv_bfloat16>{});
}
