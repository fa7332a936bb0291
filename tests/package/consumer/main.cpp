// A consumer of the installed (or fetched) collcomm: compiles against the public headers only and
// runs one real collective among 3 ranks on the host executor, checked exactly.
#include <collcomm/collcomm.hpp>
#include <collcomm/host.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  collcomm::check_composition<collcomm::kind::all_reduce, collcomm::algo::ring, collcomm::transport::host_shm,
                              collcomm::op::sum, std::int64_t>();
  constexpr int nranks = 3;
  constexpr collcomm::index_t count = 1000;
  std::vector<std::vector<std::int64_t>> send(nranks, std::vector<std::int64_t>(count));
  std::vector<std::vector<std::int64_t>> recv(nranks, std::vector<std::int64_t>(count, -1));
  for (int r = 0; r < nranks; ++r)
    for (collcomm::index_t i = 0; i < count; ++i) send[r][i] = static_cast<std::int64_t>(i) * (r + 1);

  collcomm::host::world world(nranks);
  collcomm::host::run_ranks(world, [&](collcomm::communicator<collcomm::transport::host_shm>& comm) {
    const int r = comm.rank();
    collcomm::all_reduce<collcomm::algo::ring>(comm, send[r].data(), recv[r].data(), count, collcomm::op::sum{});
  });

  int wrong = 0;
  for (int r = 0; r < nranks; ++r)
    for (collcomm::index_t i = 0; i < count; ++i) wrong += recv[r][i] != static_cast<std::int64_t>(i) * 6;
  std::printf("consumer: all_reduce(sum, i64) ring, %d ranks, %zu elements: %d wrong\n", nranks,
              static_cast<std::size_t>(count), wrong);
  return wrong == 0 ? 0 : 1;
}
