// expect-error: collcomm transport axis: this algorithm loads and stores peers' buffers
// A direct algorithm (one_shot loads its peers' buffers) over a transport that carries messages
// only (net<socket>).
#include <collcomm/collcomm.hpp>

namespace cc = collcomm;

#if __has_include(<collcomm/algo/one_shot.hpp>)
#include <collcomm/algo/one_shot.hpp>
using direct_algorithm = cc::algo::one_shot;
#else
// Until algo/one_shot.hpp exists: an algorithm with the same traits (an all_reduce schedule that
// needs the direct primitives).
struct direct_algorithm {
  static constexpr const char* name = "test_direct";
  static constexpr bool needs_direct = true;
  template <class P>
  static void run(cc::kind::all_reduce, P& p, const cc::coll_args& a) {
    p.barrier();
    p.direct_reduce_copy(cc::in(0), cc::out(0), a.count, true);
    p.barrier();
  }
};
#endif

void one_shot_over_socket() {
  cc::check_composition<cc::kind::all_reduce, direct_algorithm, cc::transport::net<cc::transport::socket>,
                        cc::op::sum, float>();
}
