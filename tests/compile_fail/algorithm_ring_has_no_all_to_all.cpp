// expect-error: collcomm algorithm axis: this algorithm has no schedule for this collective kind
// ring has no all_to_all schedule (pairwise and direct have).
#include <collcomm/collcomm.hpp>

namespace cc = collcomm;

void ring_all_to_all() {
  cc::check_composition<cc::kind::all_to_all, cc::algo::ring, cc::transport::host_shm, cc::op::none, float>();
}
