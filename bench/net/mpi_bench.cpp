// bench/net/mpi_bench.cpp — MPI's collectives (MPI_Allreduce MPI_FLOAT MPI_SUM, MPI_Allgather,
// MPI_Bcast; host buffers, one rank per process), timed by bench_common.hpp's sweep. Which
// transport carries them is mpirun's choice (the side-by-side script asks for the TCP BTL).
//   mpirun ... mpi_bench [--colls ...] [--min-bytes ...] [--max-bytes ...] (as collcomm_net_bench)
#include "bench_common.hpp"

#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const netbench::args a{argc, argv};
  netbench::backend b;
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.size);
  b.run = [&](netbench::coll c, const float* s, float* r, std::size_t count) {
    const int n = static_cast<int>(count);
    switch (c) {
      case netbench::coll::all_reduce: MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
      case netbench::coll::all_gather: MPI_Allgather(s, n, MPI_FLOAT, r, n, MPI_FLOAT, MPI_COMM_WORLD); break;
      case netbench::coll::broadcast:
        if (b.rank == 0) std::memcpy(r, s, count * sizeof(float));
        MPI_Bcast(r, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    }
  };
  b.max_all = [&](double* v, std::size_t n) {
    MPI_Allreduce(MPI_IN_PLACE, v, static_cast<int>(n), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  };
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, static_cast<std::size_t>(len));
  if (auto nl = v.find(','); nl != std::string::npos) v.resize(nl);
  netbench::print_header(b, v.c_str(), "MPI_COMM_WORLD (transport: mpirun's --mca choices)");
  const std::size_t bad = netbench::sweep(b, netbench::sweep_from_args(a));
  MPI_Finalize();
  return bad == 0 ? 0 : 1;
}
