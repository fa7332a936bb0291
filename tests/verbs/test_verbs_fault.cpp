// net<ibverbs> under faults, over the verbs double: a registration that fails, a queue pair moved
// to the error state, a completion with an error status, a peer that vanishes (device gone, queue
// pair destroyed), a completion queue that overflows, a mismatched exchange, a post out of
// contract. Each must end in a collcomm::error that names the peer and channel (and the verbs
// status where there is one) within a bounded time, never a hang.
#include "verbs/verbs_traffic.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace verbs_test;
using collcomm::errc;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs 2 ranks streaming without end until the hook's fault; rank `observer` (any_rank: the first
// that fails) must fail with `code`, naming the other rank, channel `channel`, and every one of
// `parts`, within 5 s.
void expect_fault(traffic_options o, int observer, errc code, std::vector<std::string> parts, int channel = 0) {
  o.messages = 1'000'000'000;
  o.deadline = std::chrono::milliseconds(10000);
  o.stop_on_error_of = observer;
  auto res = run_traffic(o, base_seed() ^ 0xfa17);
  if (observer == traffic_options::any_rank) {
    observer = 0;
    for (int r = 1; r < o.ranks; ++r)
      if (res[r].error && (!res[observer].error || res[r].seconds_to_error < res[observer].seconds_to_error)) observer = r;
  }
  const rank_result& r = res[static_cast<std::size_t>(observer)];
  INFO("seed ", base_seed(), "; rank ", observer, " failure: ", r.failure);
  REQUIRE(r.error.has_value());
  const std::string what = r.error->what();
  INFO("error: ", what);
  CHECK(r.error->code() == code);
  CHECK(r.error->rank() == observer);
  CHECK(contains(what, "peer " + std::to_string(1 - observer)));
  CHECK(contains(what, "channel " + std::to_string(channel)));
  for (const auto& p : parts) CHECK_MESSAGE(contains(what, p), "missing '" << p << "'");
  CHECK(r.seconds_to_error < 5.0);
  CHECK(verbs_double::fabric::instance().live_objects() == 0);
}

}  // namespace

TEST_CASE("registration fails: the connection's constructor throws, naming the peer") {
  auto& fab = verbs_double::fabric::instance();
  fab.reset(verbs_double::uniform_devices(1));
  const auto api = fab.api();
  collcomm::transport::ibverbs_context ctx(api, 0, {"mockdev0", -1});
  fab.fail_next_reg_mr(1, ENOMEM);
  try {
    collcomm::transport::ibverbs_connection c(ctx, 3, 1, {});
    FAIL("no error");
  } catch (const collcomm::error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(e.code() == errc::system);
    CHECK(contains(what, "peer 3, channel 1"));
    CHECK(contains(what, "ibv_reg_mr"));
    CHECK(contains(what, "Cannot allocate memory"));
  }
  // The context is still usable: the next connection registers.
  collcomm::transport::ibverbs_connection c(ctx, 3, 1, {});
  CHECK(!c.connected());
}

TEST_CASE("GPU memory registration without dmabuf support reports \"not supported\"") {
  auto& fab = verbs_double::fabric::instance();
  fab.reset(verbs_double::uniform_devices(1));
  const auto api = fab.api();
  collcomm::transport::ibverbs_context ctx(api, 0, {"mockdev0", -1});
  std::vector<std::byte> buf(8192);
  CHECK(!ctx.register_memory(buf.data(), buf.size(), true).has_value());
  auto host = ctx.register_memory(buf.data(), buf.size(), false);
  REQUIRE(host.has_value());
  CHECK(*host);
}

TEST_CASE("a queue pair moved to the error state: its rank fails with the flush status") {
  traffic_options o;
  o.hook = [](int r, std::uint64_t it, std::vector<peer_link>& links) {
    if (r == 0 && it == 40) verbs_double::fabric::instance().force_error(links[0].conn->qp_num());
    return false;
  };
  expect_fault(o, 0, errc::system, {"Work Request Flushed Error"});
}

TEST_CASE("the peer's queue pair in the error state: this side's next write fails") {
  traffic_options o;
  o.hook = [](int r, std::uint64_t it, std::vector<peer_link>& links) {
    if (r == 1 && it == 40) {
      verbs_double::fabric::instance().force_error(links[0].conn->qp_num());
      return true;  // rank 1 stops, as a process that crashed
    }
    return false;
  };
  expect_fault(o, 0, errc::system, {"transport retry counter exceeded"});
}

TEST_CASE("a completion with an error status (retry exceeded) names the peer and the status") {
  traffic_options o;
  o.channels = 2;
  o.hook = [](int r, std::uint64_t it, std::vector<peer_link>& links) {
    if (r == 1 && it == 25)
      verbs_double::fabric::instance().inject_completion_error(links[1].conn->qp_num(), IBV_WC_RETRY_EXC_ERR);
    return false;
  };
  expect_fault(o, 1, errc::system, {"transport retry counter exceeded", "status 12"}, 1);
}

TEST_CASE("a peer that vanishes (its device gone): the sender's next write fails with retry exceeded") {
  traffic_options o;
  o.conn.slots = 2;
  o.hook = [](int r, std::uint64_t it, std::vector<peer_link>&) {
    if (r == 1 && it == 30) {
      verbs_double::fabric::instance().kill_device(1);
      return true;
    }
    return false;
  };
  expect_fault(o, 0, errc::system, {"transport retry counter exceeded"});
}

TEST_CASE("a peer that vanishes (its connection destroyed)") {
  traffic_options o;
  o.hook = [](int r, std::uint64_t it, std::vector<peer_link>& links) {
    if (r == 1 && it == 30) {
      links.clear();
      return true;
    }
    return false;
  };
  expect_fault(o, 0, errc::system, {"transport retry counter exceeded"});
}

TEST_CASE("a completion queue too small for the traffic overflows: an error, not a hang") {
  traffic_options o;
  o.conn.slots = 4;
  o.conn.cq_depth = 2;
  expect_fault(o, traffic_options::any_rank, errc::system, {"ibv_poll_cq failed"});
}

TEST_CASE("connect() with another connection's info is refused") {
  auto& fab = verbs_double::fabric::instance();
  fab.reset(verbs_double::uniform_devices(2));
  const auto api = fab.api();
  namespace tr = collcomm::transport;
  tr::ibverbs_context c0(api, 0, {"mockdev0", -1}), c1(api, 1, {"mockdev1", -1});
  tr::ibverbs_connection a(c0, 1, 0, {.slots = 2, .slot_bytes = 64}), b(c1, 0, 0, {.slots = 2, .slot_bytes = 64});
  tr::ibverbs_connection other(c1, 0, 1, {.slots = 2, .slot_bytes = 64});
  tr::ibverbs_connection bigger(c1, 0, 0, {.slots = 3, .slot_bytes = 64});
  CHECK_THROWS_WITH_AS(a.connect(other.local_info()), doctest::Contains("channel 1"), collcomm::error);
  CHECK_THROWS_WITH_AS(a.connect(bigger.local_info()), doctest::Contains("3 slots"), collcomm::error);
  tr::ibverbs_qp_info junk{};
  CHECK_THROWS_WITH_AS(a.connect(junk), doctest::Contains("magic"), collcomm::error);
  a.connect(b.local_info());
  b.connect(a.local_info());
  CHECK(a.connected());
  CHECK_THROWS_WITH_AS(a.connect(b.local_info()), doctest::Contains("twice"), collcomm::error);
}

TEST_CASE("a post out of contract is refused before anything is sent") {
  auto& fab = verbs_double::fabric::instance();
  fab.reset(verbs_double::uniform_devices(2));
  const auto api = fab.api();
  namespace tr = collcomm::transport;
  tr::ibverbs_context c0(api, 0, {"mockdev0", -1}), c1(api, 1, {"mockdev1", -1});
  tr::ibverbs_connection a(c0, 1, 0, {.slots = 2, .slot_bytes = 64}), b(c1, 0, 0, {.slots = 2, .slot_bytes = 64});
  a.connect(b.local_info());
  b.connect(a.local_info());
  CHECK_THROWS_WITH_AS(a.post(1, 8), doctest::Contains("out of order"), collcomm::error);
  CHECK_THROWS_WITH_AS(a.post(0, 65), doctest::Contains("exceeds slot_bytes"), collcomm::error);
  a.post(0, 8);
  a.post(1, 8);
  CHECK(!a.can_send(2));
  try {
    a.post(2, 8);
    FAIL("no error");
  } catch (const collcomm::error& e) {
    CHECK(e.code() == errc::invalid_usage);
    CHECK(std::string(e.what()).find("can_send(2) is false") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(b.release(0), doctest::Contains("has not arrived"), collcomm::error);
  b.progress();
  REQUIRE(b.arrived(1));
  b.release(1);  // releases 0 and 1
  for (int i = 0; i < 100 && !a.can_send(2); ++i) a.progress(), b.progress();
  CHECK(a.can_send(2));
  CHECK(fab.rnr_events.load() == 0);
}

TEST_CASE("device selection: COLLCOMM_IB_HCA names, ports, and errors") {
  auto& fab = verbs_double::fabric::instance();
  namespace tr = collcomm::transport;
  auto devs = verbs_double::uniform_devices(3);
  devs[0].state = IBV_PORT_DOWN;
  devs[2].ports = 2;
  fab.reset(devs);
  const auto api = fab.api();
  {
    tr::ibverbs_context c(api, 0, {"", -1});  // first device with an ACTIVE port
    CHECK(c.device_name == "mockdev1");
    CHECK(c.port == 1);
  }
  {
    tr::ibverbs_context c(api, 0, {"mockdev2:2", -1});
    CHECK(c.device_name == "mockdev2");
    CHECK(c.port == 2);
    CHECK(c.port_attr.lid == devs[2].lid + 1);
  }
  CHECK_THROWS_WITH_AS(tr::ibverbs_context(api, 0, {"mockdev0", -1}), doctest::Contains("DOWN, not ACTIVE"), collcomm::error);
  CHECK_THROWS_WITH_AS(tr::ibverbs_context(api, 0, {"mlx5_7", -1}), doctest::Contains("devices here: mockdev0, mockdev1, mockdev2"),
                       collcomm::error);
  CHECK_THROWS_WITH_AS(tr::ibverbs_context(api, 0, {"mockdev1:3", -1}), doctest::Contains("port 3 of mockdev1"), collcomm::error);
  fab.reset({});
  CHECK_THROWS_WITH_AS(tr::ibverbs_context(api, 0, {"", -1}), doctest::Contains("no RDMA device found"), collcomm::error);
  CHECK(fab.live_objects() == 0);
}

TEST_CASE("a side with nothing to send learns of a vanished peer by its probe") {
  auto& fab = verbs_double::fabric::instance();
  fab.reset(verbs_double::uniform_devices(2));
  const auto api = fab.api();
  namespace tr = collcomm::transport;
  tr::ibverbs_context c0(api, 0, {"mockdev0", -1}), c1(api, 1, {"mockdev1", -1});
  tr::ibverbs_connection a(c0, 1, 2, {.slots = 2, .slot_bytes = 64, .probe_interval = std::chrono::milliseconds(300)});
  auto b = std::make_unique<tr::ibverbs_connection>(c1, 0, 2, tr::ibverbs_connection_options{.slots = 2, .slot_bytes = 64});
  a.connect(b->local_info());
  b->connect(a.local_info());
  // Quiet but alive: probes succeed, nothing fails.
  const auto start = clock_type::now();
  while (clock_type::now() - start < std::chrono::milliseconds(700)) {
    a.progress();
    b->progress();
  }
  b.reset();  // rank 1 is gone; rank 0 only waits for its messages
  const auto gone = clock_type::now();
  std::optional<std::string> what;
  try {
    while (clock_type::now() - gone < std::chrono::seconds(5)) a.progress();
  } catch (const collcomm::error& e) {
    what = e.what();
    CHECK(e.code() == errc::system);
  }
  REQUIRE_MESSAGE(what.has_value(), "no error within 5 s of the peer's connection being destroyed");
  INFO(*what);
  CHECK(contains(*what, "peer 1, channel 2"));
  CHECK(contains(*what, "probe"));
  CHECK(contains(*what, "transport retry counter exceeded"));
  CHECK(clock_type::now() - gone < std::chrono::seconds(2));
}
