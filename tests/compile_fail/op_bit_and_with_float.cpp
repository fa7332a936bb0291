// expect-error: collcomm op axis: bit_and, bit_or and bit_xor need an integer element
// Bitwise ops have no meaning for floating-point data.
#include <collcomm/collcomm.hpp>

namespace cc = collcomm;

void bit_and_float() {
  cc::check_composition<cc::kind::all_reduce, cc::algo::ring, cc::transport::host_shm, cc::op::bit_and, float>();
}
