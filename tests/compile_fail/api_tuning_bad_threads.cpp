// expect-error: Threads is a multiple of 32 in [32, 1024]
// A tuning whose threads per block no kernel can launch.
#include <collcomm/host.hpp>

void f(collcomm::communicator<collcomm::transport::host_shm>& comm, const float* send, float* recv) {
  collcomm::all_reduce<collcomm::algo::ring, collcomm::tuning<collcomm::protocol::simple, 0, 0, 100>>(comm, send, recv, 16,
                                                                                                     collcomm::op::sum{});
}
