// expect: compiles
// The public host API with valid compositions of every kind, so the api_* failures above come
// from their one wrong axis.
#include <collcomm/algo/direct.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/host.hpp>

#include <cstdint>

namespace cc = collcomm;

void api_valid(cc::communicator<cc::transport::host_shm>& comm, const float* send, float* recv,
               const std::uint32_t* isend, std::uint32_t* irecv) {
  cc::all_reduce(comm, send, recv, 16);
  cc::all_reduce<cc::algo::tree>(comm, send, recv, 16, cc::op::max{});
  cc::all_reduce<cc::algo::one_shot>(comm, isend, irecv, 16, cc::op::bit_xor{});
  cc::reduce_scatter(comm, send, recv, 4, cc::op::avg{});
  cc::all_gather<cc::algo::direct>(comm, send, recv, 4);
  cc::broadcast(comm, send, recv, 16, 0);
  cc::reduce(comm, send, recv, 16, cc::op::sum{}, 0);
  cc::all_to_all(comm, send, recv, 4);
  cc::gather(comm, send, recv, 4, 0);
  cc::scatter(comm, send, recv, 4, 0);
  cc::send_recv(comm, send, recv, 16, 1, 1);
}
