// expect-error: a collective's second template argument is its tuning
// An algorithm where the tuning goes (the protocol, channels, slot bytes and threads are one
// policy, collcomm::tuning<...>, after the algorithm).
#include <collcomm/host.hpp>

void f(collcomm::communicator<collcomm::transport::host_shm>& comm, const float* send, float* recv) {
  collcomm::all_reduce<collcomm::algo::ring, collcomm::algo::tree>(comm, send, recv, 16, collcomm::op::sum{});
}
