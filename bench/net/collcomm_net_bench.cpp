// bench/net/collcomm_net_bench.cpp — collcomm over communicator<net<socket>> (host buffers, f32,
// one rank per process), timed by bench_common.hpp's sweep; then, between rank 0 and the first
// rank on another host (else rank 1), the ceiling: one plain TCP stream for a second, one way and
// then both ways at once.
//
// Launch: every rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (bootstrap/env.hpp).
//   collcomm_net_bench [--slot-bytes 512K] [--slots 4] [--channels 1] [--streams 2]
//                      [--algo ring|tree|recursive_doubling] [--ifname IF]
//                      [--colls all_reduce,all_gather,broadcast] [--min-bytes 8] [--max-bytes 256M]
//                      [--step 2] [--budget 1G] [--min-reps 5] [--max-reps 100]
//                      [--ceiling-secs 1] [--ceiling-buf 0 (kernel autotuning) | bytes]
// --small-algo A --small-below B: all_reduce below B bytes uses A (the rest --algo).
#include "bench_common.hpp"

#include <collcomm/bootstrap/env.hpp>
#include <collcomm/collcomm.hpp>
#include <collcomm/net.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <memory>
#include <thread>

namespace {

using net_comm = collcomm::communicator<collcomm::transport::net<collcomm::transport::socket>>;

enum class algo_id { ring, tree, recursive_doubling };

algo_id parse_algo(const std::string& s) {
  if (s == "ring") return algo_id::ring;
  if (s == "tree") return algo_id::tree;
  if (s == "recursive_doubling" || s == "rd") return algo_id::recursive_doubling;
  std::fprintf(stderr, "unknown algorithm '%s' (ring, tree, recursive_doubling)\n", s.c_str());
  std::exit(2);
}

template <class Algo>
void all_reduce_with(net_comm& comm, const float* s, float* r, std::size_t count) {
  collcomm::all_reduce<Algo>(comm, s, r, static_cast<collcomm::index_t>(count), collcomm::op::sum{});
}

void all_reduce_by(algo_id a, net_comm& comm, const float* s, float* r, std::size_t count) {
  switch (a) {
    case algo_id::ring: return all_reduce_with<collcomm::algo::ring>(comm, s, r, count);
    case algo_id::tree: return all_reduce_with<collcomm::algo::tree>(comm, s, r, count);
    case algo_id::recursive_doubling: return all_reduce_with<collcomm::algo::recursive_doubling>(comm, s, r, count);
  }
}

// TCP throughput between ranks `a` and `b` for `secs` seconds over one plain stream per
// direction: a to b only (bidir false), or both directions at once (bidir true; each rank sends
// from a thread while it receives). Bytes per second of the slower direction, as its sender sees
// it: from its first write to the receiver's count of what arrived. Every rank calls.
double tcp_ceiling(collcomm::bootstrap::tcp& boot, int a, int b, std::uint32_t ipv4, double secs, int sockbuf,
                   bool bidir) {
  const int me = boot.rank();
  const bool sends = me == a || (bidir && me == b);
  const bool receives = me == b || (bidir && me == a);
  const int peer = me == a ? b : a;
  struct where {
    std::uint32_t ipv4;
    std::uint16_t port;
    std::uint16_t pad;
  };
  where mine{0, 0, 0};
  int lfd = -1;
  auto set_buf = [&](int fd) {
    if (sockbuf > 0) {
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sockbuf, sizeof sockbuf);
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sockbuf, sizeof sockbuf);
    }
  };
  if (receives) {
    lfd = ::socket(AF_INET, SOCK_STREAM, 0);
    set_buf(lfd);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = ipv4;
    ::bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    ::listen(lfd, 1);
    socklen_t len = sizeof sa;
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len);
    mine = {sa.sin_addr.s_addr, sa.sin_port, 0};
  }
  std::vector<where> all(static_cast<std::size_t>(boot.size()));
  boot.all_gather(std::as_bytes(std::span<const where>(&mine, 1)), std::as_writable_bytes(std::span(all)));
  double rate = 0;
  auto send_side = [&] {
    std::vector<char> buf(std::size_t{1} << 20, 'x');
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    set_buf(fd);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = all[static_cast<std::size_t>(peer)].ipv4;
    sa.sin_port = all[static_cast<std::size_t>(peer)].port;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      std::perror("ceiling: connect");
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto until = t0 + std::chrono::duration<double>(secs);
    while (std::chrono::steady_clock::now() < until)
      for (int i = 0; i < 16; ++i)
        if (::send(fd, buf.data(), buf.size(), 0) <= 0) break;
    ::shutdown(fd, SHUT_WR);
    std::uint64_t got = 0;
    ::recv(fd, &got, sizeof got, MSG_WAITALL);
    rate = static_cast<double>(got) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ::close(fd);
  };
  std::thread sender;
  if (sends) sender = std::thread(send_side);
  if (receives) {
    std::vector<char> buf(std::size_t{1} << 20);
    const int fd = ::accept(lfd, nullptr, nullptr);
    std::uint64_t got = 0;
    for (;;) {
      const ssize_t k = ::recv(fd, buf.data(), buf.size(), 0);
      if (k <= 0) break;
      got += static_cast<std::uint64_t>(k);
    }
    ::send(fd, &got, sizeof got, 0);
    ::close(fd);
    ::close(lfd);
  }
  if (sender.joinable()) sender.join();
  // The slower sender's rate, to every rank (ranks that did not send give a large value).
  const double mine_rate = sends ? rate : 1e300;
  std::vector<double> rates(static_cast<std::size_t>(boot.size()));
  boot.all_gather(std::as_bytes(std::span<const double>(&mine_rate, 1)), std::as_writable_bytes(std::span(rates)));
  return *std::min_element(rates.begin(), rates.end());
}

}  // namespace

int main(int argc, char** argv) {
  const netbench::args a{argc, argv};
  auto boot = collcomm::bootstrap::from_env();
  collcomm::host::net_options opt;
  opt.slot_bytes = a.bytes("slot-bytes", opt.slot_bytes);
  opt.slots = static_cast<int>(a.integer("slots", opt.slots));
  opt.channels = static_cast<int>(a.integer("channels", opt.channels));
  opt.socket.streams = static_cast<int>(a.integer("streams", opt.socket.streams));
  opt.socket.ifname = a.str("ifname", "");
  const algo_id algo = parse_algo(a.str("algo", "ring"));
  const algo_id small_algo = parse_algo(a.str("small-algo", "ring"));
  const std::size_t small_below = a.bytes("small-below", 0);
  net_comm comm(boot, opt);

  netbench::backend b;
  b.rank = comm.rank();
  b.size = comm.size();
  b.run = [&](netbench::coll c, const float* s, float* r, std::size_t count) {
    switch (c) {
      case netbench::coll::all_reduce:
        all_reduce_by(count * sizeof(float) < small_below ? small_algo : algo, comm, s, r, count);
        break;
      case netbench::coll::all_gather:
        collcomm::all_gather(comm, s, r, static_cast<collcomm::index_t>(count));
        break;
      case netbench::coll::broadcast:
        collcomm::broadcast(comm, comm.rank() == 0 ? s : nullptr, r, static_cast<collcomm::index_t>(count), 0);
        break;
    }
  };
  b.max_all = [&](double* v, std::size_t n) {
    collcomm::all_reduce(comm, v, v, static_cast<collcomm::index_t>(n), collcomm::op::max{});
  };

  const std::string settings =
      "net<socket> slot_bytes=" + std::to_string(opt.slot_bytes) + " slots=" + std::to_string(opt.slots) +
      " channels=" + std::to_string(opt.channels) + " streams=" +
      std::to_string(std::getenv("COLLCOMM_SOCKET_STREAMS") ? std::atoi(std::getenv("COLLCOMM_SOCKET_STREAMS"))
                                                            : opt.socket.streams) +
      " algo=" + a.str("algo", "ring") +
      (small_below ? " small_algo=" + a.str("small-algo", "ring") + " below " + std::to_string(small_below) : "");
  netbench::print_header(b, "collcomm", settings);
  const std::size_t bad = netbench::sweep(b, netbench::sweep_from_args(a));

  // The ceiling: rank 0 to the first rank on another host.
  const double secs = std::strtod(a.str("ceiling-secs", "1").c_str(), nullptr);
  if (secs > 0 && comm.size() > 1) {
    int receiver = 1;
    for (int r = 1; r < comm.size(); ++r)
      if (comm.host_ids()[static_cast<std::size_t>(r)] != comm.host_ids()[0]) {
        receiver = r;
        break;
      }
    std::uint32_t ipv4 = 0;
    if (!opt.socket.ifname.empty()) ipv4 = collcomm::transport::sockets::detail::interface_address(opt.socket.ifname);
    if (ipv4 == 0) ipv4 = boot.local_ipv4();
    const int sockbuf = static_cast<int>(a.bytes("ceiling-buf", 0));
    const char* where = comm.host_ids()[static_cast<std::size_t>(receiver)] != comm.host_ids()[0] ? "another host"
                                                                                                 : "same host";
    for (bool bidir : {false, true}) {
      const double rate = tcp_ceiling(boot, 0, receiver, ipv4, secs, sockbuf, bidir);
      if (comm.rank() == 0)
        std::printf("# ceiling%s: one TCP stream %s rank %d (%s), %.1f s, socket buffer %s: %.3f GB/s%s\n",
                    bidir ? " both ways" : "", bidir ? "each way between rank 0 and" : "rank 0 ->", receiver, where,
                    secs, sockbuf > 0 ? std::to_string(sockbuf).c_str() : "autotuned", rate / 1e9,
                    bidir ? " (the slower direction)" : "");
    }
  }
  return bad == 0 ? 0 : 1;
}
