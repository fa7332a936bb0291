// communicator<net<socket>> with ranks as forked processes over loopback TCP: every kind x every
// FIFO algorithm (test_host_matrix.hpp: random inputs with exact references, outputs poisoned,
// every element checked, in and out of place), on 1..5 ranks with option sets that rotate the
// streams per connection, channels, slot sizes and slot counts (small slots: many messages, credits
// exercised), and the hierarchical compositions over pretend hosts (options.host_id: rank % hosts,
// hosts rotating over 1..3, so the layouts are equal, unequal and not contiguous). The network
// namespaces tests (tests/net) run ranks on separate network stacks.
#include "test_host_matrix.hpp"

#include <collcomm/net.hpp>

using namespace collcomm_test;
using net_comm = collcomm::communicator<collcomm::transport::net<collcomm::transport::socket>>;

namespace {

struct net_option_set {
  int channels;
  std::size_t slot_bytes;
  int slots;
  int streams;
};
constexpr net_option_set net_option_sets[] = {{1, 4096, 4, 2}, {2, 64, 1, 1}, {1, 256, 2, 3}, {3, 1024, 8, 2}};

template <class Pick, class Elements, class Ops>
void run_net_jobs(std::initializer_list<int> sizes) {
  const std::uint64_t seed = mp::matrix_seed();
  int which = 0;
  for (int n : sizes) {
    const net_option_set os = net_option_sets[which++ % 4];
    mp::reports rep(n);
    const auto t0 = std::chrono::steady_clock::now();
    auto j = mp::run_job(
        n,
        [&](mp::bs::tcp& boot, mp::rank_report& me) {
          collcomm::host::net_options opt;
          opt.channels = os.channels;
          opt.slot_bytes = os.slot_bytes;
          opt.slots = os.slots;
          opt.socket.streams = os.streams;
          opt.timeout = std::chrono::seconds(20);
          const int hosts = 1 + which % 3;
          opt.host_id = 1 + static_cast<std::uint64_t>(boot.rank() % hosts);
          net_comm comm(boot, opt);
          long calls = 0, compositions = 0;
          const int code = mp::run_matrix<Pick, Elements, Ops, net_comm, host_spanning_algorithms>(
              comm, seed + static_cast<std::uint64_t>(n), os.slot_bytes, me, calls, compositions);
          if (comm.hosts().nhosts() != std::min(hosts, n))
            return mp::child_fail(me, comm.rank(), 1, "%d hosts seen, %d pretended", comm.hosts().nhosts(),
                                  std::min(hosts, n));
          if (comm.rank() == 0)
            std::printf(
                "n = %d on %d hosts (channels %d, slot_bytes %zu, slots %d, streams %d): %ld compositions, %ld calls\n",
                n, comm.hosts().nhosts(), os.channels, os.slot_bytes, os.slots, os.streams, compositions, calls);
          return code;
        },
        rep, std::chrono::seconds(200));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE("n = " << n << ": " << secs << " s");
    for (int r = 0; r < n; ++r)
      CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, "n = " << n << ", rank " << r << " exit "
                                                                      << j.codes[static_cast<std::size_t>(r)] << ": "
                                                                      << rep[r].msg << " (seed " << seed << ")");
  }
}

}  // namespace

TEST_CASE("net<socket> loopback: reducing kinds x every FIFO algorithm") {
  using elements = type_list<float, std::int32_t>;
  using ops = type_list<collcomm::op::sum, collcomm::op::max, collcomm::op::avg>;
  run_net_jobs<mp::pick_reducing, elements, ops>({1, 2, 3, 4, 5});
}

TEST_CASE("net<socket> loopback: moving kinds x every FIFO algorithm") {
  using elements = type_list<float, std::int8_t, double>;
  run_net_jobs<mp::pick_moving, elements, type_list<>>({2, 3, 4, 5});
}

TEST_CASE("net<socket>: bad options are refused naming them") {
  mp::reports rep(2);
  auto j = mp::run_job(
      2,
      [&](mp::bs::tcp& boot, mp::rank_report& me) {
        collcomm::host::net_options opt;
        opt.channels = 0;
        try {
          net_comm comm(boot, opt);
        } catch (const collcomm::error& e) {
          const std::string m = e.what();
          if (e.code() == collcomm::errc::invalid_argument && m.find("'channels'") != std::string::npos) return 0;
          return mp::child_fail(me, boot.rank(), 1, "wrong error: %s", e.what());
        }
        return mp::child_fail(me, boot.rank(), 1, "channels = 0 was taken");
      },
      rep, std::chrono::seconds(60));
  for (int r = 0; r < 2; ++r) CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, rep[r].msg);
}

TEST_CASE("net<socket>: a bad COLLCOMM_NET_SAME_HOST is refused naming it and its value") {
  mp::reports rep(2);
  auto j = mp::run_job(
      2,
      [&](mp::bs::tcp& boot, mp::rank_report& me) {
        ::setenv("COLLCOMM_NET_SAME_HOST", "nvlink", 1);  // a forked rank's own environment
        try {
          net_comm comm(boot);
        } catch (const collcomm::error& e) {
          const std::string m = e.what();
          if (e.code() == collcomm::errc::invalid_argument && m.find("COLLCOMM_NET_SAME_HOST = 'nvlink'") != std::string::npos &&
              e.rank() == boot.rank())
            return 0;
          return mp::child_fail(me, boot.rank(), 1, "wrong error: %s", e.what());
        }
        return mp::child_fail(me, boot.rank(), 1, "COLLCOMM_NET_SAME_HOST=nvlink was taken");
      },
      rep, std::chrono::seconds(60));
  for (int r = 0; r < 2; ++r) CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, rep[r].msg);
}
