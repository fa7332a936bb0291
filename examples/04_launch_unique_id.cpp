// 04_launch_unique_id — ranks as processes that meet through an explicit unique id, as with
// ncclGetUniqueId: rank 0 creates the id (it binds rank 0's listening socket and draws the job's
// random token), hands it over — here in a file, or printed for you to pass along — and every
// other rank takes it. Then a host communicator of processes, a real all_reduce of i64 and of f64
// (recursive doubling and one_shot), each result checked element by element on every rank.
// Exits 1 on any wrong element.
//
//   rank 0:      collcomm_example_04_launch_unique_id --rank 0 --nranks 4 --id-file /tmp/id
//   ranks 1..3:  collcomm_example_04_launch_unique_id --rank R --nranks 4 --id-file /tmp/id
//   or pass the text that rank 0 prints with --id host:port/token instead of --id-file.
// examples/04_launch_unique_id.sh starts N of them from a shell loop.
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/bootstrap/tcp.hpp>
#include <collcomm/host.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using comm_t = collcomm::communicator<collcomm::transport::host_shm>;
namespace bs = collcomm::bootstrap;

struct settings {
  int rank = -1, nranks = 0;
  std::string id_file, id;
  std::size_t count = 100000;
};

// Rank 0 writes the id to `path` atomically (a temporary file renamed), so a reader never sees
// half of it.
void write_id(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text << "\n";
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp + " to " + path);
}
// The others wait for it, bounded.
std::string read_id(const std::string& path, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::ifstream f(path);
    std::string text;
    if (f && std::getline(f, text) && !text.empty()) return text;
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("no unique id in " + path + " after " + std::to_string(limit.count()) +
                               " s: is rank 0 running?");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

template <class Algo, class T>
std::size_t check_all_reduce(comm_t& comm, std::uint64_t seed, std::size_t count) {
  const int r = comm.rank(), n = comm.size();
  auto value = [&](int q, std::size_t i) {  // small integers: every sum is exact, in f64 too
    std::uint64_t x = seed ^ (std::uint64_t(q) << 40) ^ (i * 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return T(static_cast<long long>((x ^ (x >> 31)) % 2001) - 1000);
  };
  std::vector<T> send(count), recv(count, T(-7777777));
  for (std::size_t i = 0; i < count; ++i) send[i] = value(r, i);
  collcomm::all_reduce<Algo>(comm, send.data(), recv.data(), count, collcomm::op::sum{});
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    T want = 0;
    for (int q = 0; q < n; ++q) want += value(q, i);
    if (recv[i] != want && wrong++ < 3)
      std::printf("rank %d: %s element %zu: got %lld, want %lld\n", r, Algo::name, i, (long long)recv[i],
                  (long long)want);
  }
  std::printf("rank %d of %d: all_reduce<%s> of %zu %s: %s\n", r, n, Algo::name, count, collcomm::element_name<T>,
              wrong ? "WRONG" : "ok");
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool v = i + 1 < argc;
    if (a == "--rank" && v)
      s.rank = std::atoi(argv[++i]);
    else if (a == "--nranks" && v)
      s.nranks = std::atoi(argv[++i]);
    else if (a == "--id-file" && v)
      s.id_file = argv[++i];
    else if (a == "--id" && v)
      s.id = argv[++i];
    else if (a == "--count" && v)
      s.count = std::strtoull(argv[++i], nullptr, 10);
    else
      s.rank = -2;
  }
  if (s.rank < 0 || s.nranks < 1 || s.rank >= s.nranks || (s.rank > 0 && s.id.empty() && s.id_file.empty())) {
    std::printf("usage: %s --rank R --nranks N [--id-file PATH | --id host:port/token] [--count C]\n", argv[0]);
    return 2;
  }
  try {
    bs::unique_id id;
    if (s.rank == 0) {
      id = bs::unique_id::create();  // 127.0.0.1, an ephemeral port; listening from here on
      std::printf("unique id: %s\n", id.to_string().c_str());
      std::fflush(stdout);
      if (!s.id_file.empty()) write_id(s.id_file, id.to_string());
    } else {
      id = bs::unique_id::from_string(s.id.empty() ? read_id(s.id_file, std::chrono::seconds(30)) : s.id);
    }
    bs::tcp boot(id, s.rank, s.nranks, std::chrono::seconds(30));
    comm_t comm(boot);
    std::uint64_t seed = s.rank == 0 ? (std::uint64_t(std::random_device{}()) << 32 | std::random_device{}()) : 0;
    collcomm::broadcast(comm, &seed, &seed, 1, 0);
    if (s.rank == 0) std::printf("%d processes, seed %llu\n", comm.size(), static_cast<unsigned long long>(seed));
    std::uint64_t wrong = check_all_reduce<collcomm::algo::recursive_doubling, std::int64_t>(comm, seed, s.count);
    wrong += check_all_reduce<collcomm::algo::one_shot, double>(comm, seed + 1, s.count);
    collcomm::all_reduce(comm, &wrong, &wrong, 1, collcomm::op::sum{});
    if (s.rank == 0) std::printf("%s\n", wrong ? "FAILED: wrong elements" : "all ranks match the exact sums");
    return wrong ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", s.rank, e.what());
    return 1;
  }
}
