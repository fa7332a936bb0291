// 4 ranks (threads of this process) add up their vectors with a ring all-reduce.
#include <collcomm/host.hpp>  // the host executor: host::world, run_ranks, the collectives

#include <cstdio>
#include <vector>

int main() {
  const int nranks = 4;
  const std::size_t count = 1 << 20;
  std::vector<std::vector<float>> data(nranks);
  for (int r = 0; r < nranks; ++r) data[r].assign(count, float(r + 1));  // rank r holds r+1

  collcomm::host::world world(nranks);
  collcomm::host::run_ranks(world, [&](collcomm::communicator<collcomm::transport::host_shm>& comm) {
    std::vector<float>& mine = data[comm.rank()];
    // The algorithm is a template argument; element type, op and transport come from the call.
    collcomm::all_reduce<collcomm::algo::ring>(comm, mine.data(), mine.data(), count, collcomm::op::sum{});
  });

  std::printf("every element on every rank: %g (expected 1+2+3+4 = 10)\n", data[3][count - 1]);
  return data[0][0] == 10.0f && data[3][count - 1] == 10.0f ? 0 : 1;
}
