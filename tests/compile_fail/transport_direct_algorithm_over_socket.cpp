// expect-error: collcomm transport axis: this algorithm loads and stores peers' buffers
// A direct algorithm (one_shot loads its peers' buffers) over a transport that carries messages
// only (net<socket>).
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/collcomm.hpp>

namespace cc = collcomm;

void one_shot_over_socket() {
  cc::check_composition<cc::kind::all_reduce, cc::algo::one_shot, cc::transport::net<cc::transport::socket>,
                        cc::op::sum, float>();
}
