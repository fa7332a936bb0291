// The GPU cross product (label gpu, built with -DCOLLCOMM_GPU_FULL_MATRIX=ON): every algorithm of
// one kind x every valid op x one element type (or every type, for kinds that do not reduce),
// on N = 1, 2, 3, 4, 5, 8 and 16 ranks of one GPU, in and out of place, counts that do not divide
// evenly, roots 0 and N-1 — the host matrix again, on the GPU executor. One translation unit per
// (kind, element) so that the 16 cores of the GPU machine compile the ~800 kernels side by side;
// CI builds the covering subset in tests/gpu/test_*.cu instead.
//
// Inputs are exact small integers per type and op (tests/common/exact_reference.hpp), so every
// output element must match the reference bit for bit; outputs are poisoned first, and elements
// that are not significant on a rank must keep their poison (tests/gpu/gpu_harness.cuh).
#include "../gpu_harness.cuh"

#include <chrono>

#ifndef COLLCOMM_MATRIX_KIND
#error "define COLLCOMM_MATRIX_KIND (a kind:: name)"
#endif

using namespace collcomm;
using namespace collcomm_gpu_test;

namespace {

using matrix_kind = kind::COLLCOMM_MATRIX_KIND;
#ifdef COLLCOMM_MATRIX_TYPE
using matrix_types = collcomm_test::type_list<COLLCOMM_MATRIX_TYPE>;
#else
using matrix_types = collcomm_test::all_elements;
#endif
using matrix_ops = collcomm_test::type_list<op::sum, op::prod, op::min, op::max, op::avg, op::premul_sum<double>,
                                            op::bit_and, op::bit_or, op::bit_xor>;

template <class Op>
Op make_op() {
  if constexpr (std::is_same_v<Op, op::premul_sum<double>>)
    return Op{2.0};
  else
    return Op{};
}

struct tally {
  long cases = 0, compositions = 0;
};

// Every N for sum (and for the kinds that do not reduce); N = 3 and 8 for the other ops.
template <class K, class A, class T, class Op>
void run_composition(gpu::world& w, tally& t) {
  const int n = w.size();
  const bool all_n = std::is_same_v<Op, op::sum> || std::is_same_v<Op, op::none>;
  if (!all_n && n != 3 && n != 8) return;
  ++t.compositions;
  for (index_t count : {index_t{1}, static_cast<index_t>(n + 1), index_t{1031}, index_t{40009}}) {
    for (int place = 0; place < (has_in_place<K> && supports_in_place<A> ? 2 : 1); ++place) {
      for (int root : {0, n - 1}) {
        if (!K::rooted && root != 0) continue;
        if (root != 0 && n == 1) continue;
        case_config c{n, count, root, place == 1};
        INFO(std::string(K::name), " ", std::string(A::name), " ", std::string(element_name<T>), " ",
             std::string(op_name<Op>()), " n=", n, " count=", count, " root=", root, " in_place=", c.in_place,
             " seed=", fresh_seed());
        CHECK_EQ(run_case<K, A, T>(w, c, make_op<Op>()), "");
        ++t.cases;
      }
    }
  }
}

}  // namespace

TEST_CASE("GPU matrix") {
  tally t;
  const auto t0 = std::chrono::steady_clock::now();
  for (int n : {1, 2, 3, 4, 5, 8, 16}) {
    gpu::options o;
    o.channels = n <= 8 ? 2 : 1;
    o.slot_bytes = 4096;  // many slices per call
    gpu::world w(n, {}, o);
    collcomm_test::for_each_schedule([&]<class K, class A>(std::type_identity<K>, std::type_identity<A>) {
      if constexpr (std::is_same_v<K, matrix_kind>) {
        collcomm_test::for_each_type(matrix_types{}, [&]<class T>(std::type_identity<T>) {
          if constexpr (K::reduces) {
            collcomm_test::for_each_type(matrix_ops{}, [&]<class Op>(std::type_identity<Op>) {
              if constexpr (valid_composition<K, A, transport::nvlink, Op, T>) run_composition<K, A, T, Op>(w, t);
            });
          } else if constexpr (valid_composition<K, A, transport::nvlink, op::none, T>) {
            run_composition<K, A, T, op::none>(w, t);
          }
        });
      }
    });
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE(std::string(matrix_kind::name), ": ", t.cases, " cases over ", t.compositions, " (composition, N) pairs in ",
          secs, " s, seed ", fresh_seed());
  CHECK(t.cases > 0);
}
