// tests/gpu/type_cases.cuh — ring all_reduce with every op on every element type, the types taken
// one group per test translation unit (test_gpu_types_*.cu) so that none compiles every kernel:
// together they cover collcomm_test::all_elements. Each op the composition allows (bitwise ops on
// integers only), N = 3 and 4 ranks, counts 1, 777 and 100000; every output element checked.
#pragma once

#include "gpu_harness.cuh"

namespace collcomm_gpu_test {

template <class... Ts>
void ring_all_reduce_every_op(type_list<Ts...> types) {
  for (int n : {3, 4}) {
    gpu::world w(n);
    for_each_type(types, [&]<class T>(std::type_identity<T>) {
      auto one = [&](auto op) {
        using Op = decltype(op);
        if constexpr (valid_composition<kind::all_reduce, algo::ring, transport::nvlink, Op, T>) {
          for (index_t count : {index_t{1}, index_t{777}, index_t{100000}}) {
            INFO(std::string(element_name<T>), " ", std::string(op_name<Op>()), " n=", n, " count=", count,
                 " seed=", fresh_seed());
            CHECK_EQ((run_case<kind::all_reduce, algo::ring, T>(w, case_config{n, count, 0, false}, op)), "");
          }
        }
      };
      one(op::sum{});
      one(op::prod{});
      one(op::min{});
      one(op::max{});
      one(op::avg{});
      one(op::premul_sum<double>{2.0});
      one(op::bit_and{});
      one(op::bit_or{});
      one(op::bit_xor{});
    });
  }
}

}  // namespace collcomm_gpu_test
