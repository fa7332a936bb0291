// expect: compiles
// Valid compositions pass check_composition: proves the harness compiles collcomm code, so the
// failures of the other snippets come from their one wrong axis.
#include <collcomm/collcomm.hpp>

#include <cstdint>

namespace cc = collcomm;

void valid_compositions() {
  cc::check_composition<cc::kind::all_reduce, cc::algo::ring, cc::transport::host_shm, cc::op::sum, float>();
  cc::check_composition<cc::kind::all_reduce, cc::algo::ring, cc::transport::net<cc::transport::socket>, cc::op::avg,
                        __nv_bfloat16>();
  cc::check_composition<cc::kind::reduce_scatter, cc::algo::ring, cc::transport::nvlink, cc::op::bit_xor,
                        std::uint8_t>();
  cc::check_composition<cc::kind::all_gather, cc::algo::ring, cc::transport::pcie, cc::op::none, __half>();
}
