// expect-error: collcomm element axis: T is not an element type
// A struct is not one of the 12 element types, even when it is trivially copyable.
#include <collcomm/collcomm.hpp>

namespace cc = collcomm;

struct pair_of_floats {
  float a, b;
};

void not_an_element() {
  cc::check_composition<cc::kind::all_reduce, cc::algo::ring, cc::transport::host_shm, cc::op::sum, pair_of_floats>();
}
