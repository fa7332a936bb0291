// expect-error: collcomm algorithm axis: hierarchical<Intra, Inter> has no schedule for this kind with these parts
// hierarchical<ring, tree> reduce_scatter: its reduce_scatter runs Inter's, and tree has none.
#include <collcomm/algo/hierarchical.hpp>
#include <collcomm/collcomm.hpp>

namespace cc = collcomm;

void hierarchical_ring_tree_reduce_scatter() {
  cc::check_composition<cc::kind::reduce_scatter, cc::algo::hierarchical<cc::algo::ring, cc::algo::tree>,
                        cc::transport::host_shm, cc::op::sum, float>();
}
