// expect-error: collcomm algorithm axis: hierarchical<Intra, Inter> runs Intra and Inter on subgroups of ranks
// hierarchical with a direct algorithm as a part: one_shot's barrier and reduction span every rank
// of the communicator, so it cannot run on one host's ranks.
#include <collcomm/algo/hierarchical.hpp>
#include <collcomm/collcomm.hpp>

namespace cc = collcomm;

void hierarchical_one_shot_intra() {
  cc::check_composition<cc::kind::all_reduce, cc::algo::hierarchical<cc::algo::one_shot, cc::algo::ring>,
                        cc::transport::host_shm, cc::op::sum, float>();
}
