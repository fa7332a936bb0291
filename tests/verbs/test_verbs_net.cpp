// communicator<net<ibverbs>> with ranks as threads over the verbs double (verbs_double.hpp), one
// local bootstrap per rank: every queue pair made and exchanged when the communicator is made,
// then every kind x every host-spanning FIFO algorithm (tests/mp/test_host_matrix.hpp's
// run_matrix: random inputs with exact references, outputs poisoned, every element checked, in and
// out of place) on 2, 3 and 4 ranks over pretend hosts (options.host_id), with small slots so that
// many messages and credits flow. Faults: a queue pair moved to the error state mid-run, a
// completion with an error status, a peer that vanishes — every rank's call ends with a
// collcomm::error naming the peer, within a bound well under the communicator's timeout. And the
// set-up's refusals: an exchange over bootstrap::max_payload, a rank without its device.
#include "mp/test_host_matrix.hpp"
#include "verbs/verbs_double.hpp"

#include <collcomm/bootstrap/local.hpp>
#include <collcomm/net_ibverbs.hpp>

#include <atomic>
#include <latch>
#include <optional>
#include <thread>

using namespace collcomm_test;
using namespace std::chrono_literals;
namespace tr = collcomm::transport;
using verbs_comm = collcomm::communicator<tr::net<tr::ibverbs>>;
using clock_type = std::chrono::steady_clock;

namespace {

const tr::verbs_api& double_api() {
  static const tr::verbs_api api = verbs_double::fabric::instance().api();
  return api;
}

// Rank r's options: the double's table, its own device mockdev<r>, probes every 100 ms.
collcomm::host::net_options base_options(int rank) {
  collcomm::host::net_options opt;
  opt.ibverbs.verbs = &double_api();
  opt.ibverbs.hca = "mockdev" + std::to_string(rank);
  opt.ibverbs.probe_interval = 100ms;
  opt.timeout = 20s;
  return opt;
}

// Runs f(boot, rank) on n threads, each rank its own bootstrap::local of one group.
template <class F>
void run_ranks(int n, F&& f) {
  collcomm::bootstrap::local_group group(n, 30s);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      collcomm::bootstrap::local boot(group, r);
      f(boot, r);
    });
  for (auto& t : threads) t.join();
}

void expect_fabric_clean() {
  auto& fab = verbs_double::fabric::instance();
  CHECK_MESSAGE(fab.rnr_events.load() == 0, "a sender wrote into a slot its receiver had not released");
  CHECK(fab.cq_overflows.load() == 0);
  CHECK_MESSAGE(fab.live_objects() == 0, "verbs objects left after every communicator was destroyed");
}

struct verbs_option_set {
  int channels;
  std::size_t slot_bytes;
  int slots;
};
// Every size runs every set, the pretend hosts rotating over 1..3 (rank r on host r % hosts).
constexpr verbs_option_set option_sets[] = {{1, 256, 2}, {2, 64, 1}, {3, 1024, 4}, {1, 4096, 8}};

template <class Pick, class Elements, class Ops>
void run_verbs_jobs(std::initializer_list<int> sizes) {
  const std::uint64_t seed = mp::matrix_seed();
  int which = 0;
  for (int n : sizes)
    for (const verbs_option_set& os : option_sets) {
      const int hosts = 1 + which++ % 3;
      verbs_double::fabric::instance().reset(verbs_double::uniform_devices(n));
      std::vector<mp::rank_report> rep(static_cast<std::size_t>(n));
      std::vector<int> codes(static_cast<std::size_t>(n), -1);
      const auto t0 = clock_type::now();
      run_ranks(n, [&](collcomm::bootstrap::local& boot, int r) {
        mp::rank_report& me = rep[static_cast<std::size_t>(r)];
        int code = 1;
        try {
          collcomm::host::net_options opt = base_options(r);
          opt.channels = os.channels;
          opt.slot_bytes = os.slot_bytes;
          opt.slots = os.slots;
          opt.host_id = 1 + static_cast<std::uint64_t>(r % hosts);
          verbs_comm comm(boot, opt);
          long calls = 0, compositions = 0;
          code = mp::run_matrix<Pick, Elements, Ops, verbs_comm, host_spanning_algorithms>(
              comm, seed + static_cast<std::uint64_t>(n), os.slot_bytes, me, calls, compositions);
          if (comm.hosts().nhosts() != std::min(hosts, n))
            code = mp::child_fail(me, r, 1, "%d hosts seen, %d pretended", comm.hosts().nhosts(), std::min(hosts, n));
          if (r == 0)
            std::printf("n = %d on %d hosts (channels %d, slot_bytes %zu, slots %d): %ld compositions, %ld calls\n", n,
                        comm.hosts().nhosts(), os.channels, os.slot_bytes, os.slots, compositions, calls);
        } catch (const collcomm::error& e) {
          mp::record_error(me, e);
          std::fprintf(stderr, "rank %d: unexpected collcomm::error: %s\n", r, e.what());
          code = 2;
        }
        codes[static_cast<std::size_t>(r)] = code;
      });
      const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
      MESSAGE("n = " << n << ": " << secs << " s");
      for (int r = 0; r < n; ++r)
        CHECK_MESSAGE(codes[static_cast<std::size_t>(r)] == 0,
                      "n = " << n << ", rank " << r << " code " << codes[static_cast<std::size_t>(r)] << ": "
                             << rep[static_cast<std::size_t>(r)].msg << " (seed " << seed << ")");
      expect_fabric_clean();
    }
}

// ---- faults ------------------------------------------------------------------------------------

enum class fault { qp_error, completion_error, vanish };

struct fault_result {
  std::optional<collcomm::error> error;
  double seconds_after_fault = -1;  // when its error came, from the fault
  bool vanished = false;
  std::string note;  // what went wrong otherwise
};

// n ranks call all_reduce<ring> (a message per slot of 256 bytes, 80 per call and link) in a loop;
// at its call 20, rank `a` injects the fault on its queue pair to rank `b` (vanish: its device
// vanishes and it stops, destroying its communicator only after the others returned).
std::vector<fault_result> run_fault(int n, fault kind, int a, int b) {
  auto& fab = verbs_double::fabric::instance();
  fab.reset(verbs_double::uniform_devices(n));
  std::vector<fault_result> res(static_cast<std::size_t>(n));
  std::atomic<std::int64_t> fault_ns{0};
  std::latch others_done(n - (kind == fault::vanish ? 1 : 0));
  auto since_fault = [&] {
    const std::int64_t f = fault_ns.load();
    return f == 0 ? -1.0 : static_cast<double>(mp::now_ns() - f) * 1e-9;
  };
  run_ranks(n, [&](collcomm::bootstrap::local& boot, int r) {
    fault_result& me = res[static_cast<std::size_t>(r)];
    std::unique_ptr<verbs_comm> comm;
    bool counted = false;
    try {
      collcomm::host::net_options opt = base_options(r);
      opt.slot_bytes = 256;
      opt.slots = 2;
      comm = std::make_unique<verbs_comm>(boot, opt);
      constexpr collcomm::index_t count = 5000;
      std::vector<float> send(count, 1.0f), recv(count);
      for (int it = 0;; ++it) {
        if (r == a && it == 20) {
          auto* l = comm->net_world().connection_of(0, b);
          if (l == nullptr) throw std::logic_error("no connection to the peer after 20 calls");
          const std::uint32_t qpn = l->connection().qp_num();
          fault_ns = mp::now_ns();
          if (kind == fault::qp_error) fab.force_error(qpn);
          if (kind == fault::completion_error) fab.inject_completion_error(qpn, IBV_WC_REM_ACCESS_ERR);
          if (kind == fault::vanish) {
            fab.kill_device(a);
            me.vanished = true;
            others_done.wait();  // a dead process: no calls, no bye until the others returned
            comm.reset();
            return;
          }
        }
        if (fault_ns.load() != 0 && since_fault() > 15) {
          me.note = "no error 15 s after the fault (" + std::to_string(it) + " calls)";
          break;
        }
        collcomm::all_reduce<collcomm::algo::ring>(*comm, send.data(), recv.data(), count, collcomm::op::sum{});
        if (recv[0] != static_cast<float>(n) || recv[count - 1] != static_cast<float>(n)) {
          me.note = "wrong sum in call " + std::to_string(it);
          break;
        }
      }
    } catch (const collcomm::error& e) {
      me.error = e;
      me.seconds_after_fault = since_fault();
    } catch (const std::exception& e) {
      me.note = std::string("unexpected exception: ") + e.what();
    }
    if (!counted) others_done.count_down();
    counted = true;
    comm.reset();
  });
  return res;
}

// Every rank but a vanished one ended with an error (not a timeout) within `bound` seconds of the
// fault, whose text names one of `named` ("rank <x>").
void expect_fault_ends(const std::vector<fault_result>& res, std::initializer_list<int> named, double bound) {
  for (std::size_t r = 0; r < res.size(); ++r) {
    const fault_result& x = res[r];
    INFO("rank ", r);
    if (x.vanished) continue;
    CHECK_MESSAGE(x.note.empty(), x.note);
    REQUIRE_MESSAGE(x.error.has_value(), "rank " << r << " ended without an error");
    const std::string text = x.error->what();
    MESSAGE("rank " << r << " after " << x.seconds_after_fault << " s: " << text);
    CHECK(x.error->code() != collcomm::errc::timeout);
    CHECK(x.seconds_after_fault >= 0);
    CHECK(x.seconds_after_fault < bound);
    bool names = false;
    for (int p : named) names = names || text.find("rank " + std::to_string(p)) != std::string::npos;
    CHECK_MESSAGE(names, "the error does not name the faulty pair: " << text);
    CHECK_MESSAGE(text.find("net<ibverbs>") != std::string::npos,
                  "the error does not come from the queue pair: " << text);
  }
}

struct fake_bootstrap {
  int r, n;
  int rank() const { return r; }
  int size() const { return n; }
  void all_gather(std::span<const std::byte>, std::span<std::byte>) {
    throw std::logic_error("an exchange that should have been refused");
  }
  void barrier() {}
  void send(int, std::span<const std::byte>) {}
  void recv(int, std::span<std::byte>) {}
};

}  // namespace

TEST_CASE("net<ibverbs> over the verbs double: reducing kinds x every host-spanning FIFO algorithm") {
  using elements = type_list<float, std::int32_t>;
  using ops = type_list<collcomm::op::sum, collcomm::op::max, collcomm::op::avg>;
  run_verbs_jobs<mp::pick_reducing, elements, ops>({2, 3, 4});
}

TEST_CASE("net<ibverbs> over the verbs double: moving kinds x every host-spanning FIFO algorithm") {
  using elements = type_list<float, std::int8_t>;
  run_verbs_jobs<mp::pick_moving, elements, type_list<>>({2, 3, 4});
}

TEST_CASE("net<ibverbs> faults: a queue pair moved to the error state mid-run") {
  const auto res = run_fault(3, fault::qp_error, 0, 1);
  expect_fault_ends(res, {0, 1}, 8.0);
  expect_fabric_clean();
}

TEST_CASE("net<ibverbs> faults: a completion with an error status") {
  const auto res = run_fault(4, fault::completion_error, 1, 2);
  expect_fault_ends(res, {1, 2}, 8.0);
  expect_fabric_clean();
}

TEST_CASE("net<ibverbs> faults: a peer that vanishes") {
  const auto res = run_fault(3, fault::vanish, 2, 0);
  expect_fault_ends(res, {2}, 8.0);
  expect_fabric_clean();
}

TEST_CASE("net<ibverbs> set-up: an exchange larger than bootstrap::max_payload is refused") {
  verbs_double::fabric::instance().reset(verbs_double::uniform_devices(1));
  fake_bootstrap boot{0, 28};
  collcomm::host::net_options opt = base_options(0);
  opt.channels = 1024;
  opt.host_id = 1;
  try {
    verbs_comm comm(boot, opt);
    FAIL("made a communicator whose exchange exceeds the bootstrap's payload");
  } catch (const collcomm::error& e) {
    CHECK(e.code() == collcomm::errc::invalid_argument);
    CHECK_MESSAGE(std::string(e.what()).find("bootstrap::max_payload") != std::string::npos, e.what());
  }
  CHECK(verbs_double::fabric::instance().live_objects() == 0);
}

TEST_CASE("net<ibverbs> set-up: a rank without its device fails every rank's constructor, naming it") {
  constexpr int n = 3;
  verbs_double::fabric::instance().reset(verbs_double::uniform_devices(n));
  std::vector<std::string> errors(n);
  run_ranks(n, [&](collcomm::bootstrap::local& boot, int r) {
    try {
      collcomm::host::net_options opt = base_options(r);
      if (r == 1) opt.ibverbs.hca = "nosuchdev";
      verbs_comm comm(boot, opt);
    } catch (const collcomm::error& e) {
      errors[static_cast<std::size_t>(r)] = e.what();
    }
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank ", r, ": ", errors[static_cast<std::size_t>(r)]);
    CHECK(errors[static_cast<std::size_t>(r)].find("rank 1 could not make its queue pairs") != std::string::npos);
    CHECK(errors[static_cast<std::size_t>(r)].find("nosuchdev") != std::string::npos);
  }
  CHECK(verbs_double::fabric::instance().live_objects() == 0);
}
