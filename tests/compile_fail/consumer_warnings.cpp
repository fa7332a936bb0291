// expect: compiles
// A user's .cpp file, built with -Werror at -Wall -Wextra: the library's headers (everything but
// the GPU executor, which needs nvcc) add no warning.
#include <collcomm/collcomm.hpp>

#include <vector>

namespace cc = collcomm;

void host_calls() {
  cc::host::world w(3);
  std::vector<std::vector<double>> v(3, std::vector<double>(64, 1.0));
  cc::host::run_ranks(w, [&](cc::communicator<cc::transport::host_shm>& comm) {
    double* x = v[static_cast<std::size_t>(comm.rank())].data();
    cc::all_reduce<cc::algo::tree>(comm, x, x, 64, cc::op::max{});
    cc::all_reduce<cc::algo::two_shot>(comm, x, x, 64);
    cc::broadcast(comm, x, x, 64, 0);
    cc::reduce(comm, x, x, 64, cc::op::sum{}, 0);
  });
}
