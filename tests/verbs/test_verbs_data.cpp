// net<ibverbs> data path over the verbs double: ranks as threads, each pair connected on each
// channel through the exchange of local_info(), messages of random sizes and bytes both ways,
// many more messages than slots, receivers that are slow; delivered whole, in order, never overrun.
#include "verbs/verbs_traffic.hpp"

#include <doctest/doctest.h>

using namespace verbs_test;

namespace {

void expect_clean(const std::vector<rank_result>& res, const traffic_options& o) {
  for (std::size_t r = 0; r < res.size(); ++r) {
    INFO("rank ", r, ", seed ", base_seed());
    if (res[r].error) FAIL_CHECK(std::string(res[r].error->what()));
    CHECK_MESSAGE(res[r].failure.empty(), res[r].failure);
    CHECK(res[r].finished);
  }
  auto& fab = verbs_double::fabric::instance();
  CHECK_MESSAGE(fab.rnr_events.load() == 0, "a sender wrote into a slot its receiver had not released");
  CHECK(fab.cq_overflows.load() == 0);
  CHECK_MESSAGE(fab.live_objects() == 0, "verbs objects left after the connections and contexts were destroyed");
  (void)o;
}

}  // namespace

TEST_CASE("two ranks, one channel, slots 1..4, random sizes both ways") {
  for (std::uint32_t slots = 1; slots <= 4; ++slots) {
    traffic_options o;
    o.conn.slots = slots;
    o.conn.slot_bytes = 1 + mix(base_seed() + slots) % 5000;
    o.messages = 300;
    CAPTURE(slots);
    CAPTURE(o.conn.slot_bytes);
    expect_clean(run_traffic(o, base_seed() + slots), o);
  }
}

TEST_CASE("four ranks, two channels, slow receivers: credits hold the senders back") {
  traffic_options o;
  o.ranks = 4;
  o.channels = 2;
  o.conn.slots = 2;
  o.conn.slot_bytes = 777;
  o.messages = 400;
  o.slow_permille = 700;
  expect_clean(run_traffic(o, base_seed() ^ 0x4444), o);
}

TEST_CASE("RoCE ports (link layer Ethernet): the queue pairs route by GID") {
  traffic_options o;
  o.ranks = 3;
  o.link_layer = IBV_LINK_LAYER_ETHERNET;
  o.conn.slots = 3;
  o.conn.slot_bytes = 4096;
  o.messages = 200;
  expect_clean(run_traffic(o, base_seed() ^ 0x3333), o);
}

TEST_CASE("a small send queue: selective signaling keeps posts within its depth") {
  traffic_options o;
  o.conn.slots = 4;
  o.conn.send_depth = 3;
  o.conn.slot_bytes = 64;
  o.messages = 1000;
  expect_clean(run_traffic(o, base_seed() ^ 0x5555), o);
}

TEST_CASE("large slots: 1 MiB messages") {
  traffic_options o;
  o.conn.slots = 2;
  o.conn.slot_bytes = std::size_t{1} << 20;
  o.messages = 40;
  expect_clean(run_traffic(o, base_seed() ^ 0x6666), o);
}

TEST_CASE("the caller's slots and tagged messages (the GPU proxy's shape): every tag arrives with its message") {
  for (std::uint32_t slots = 1; slots <= 4; ++slots) {
    traffic_options o;
    o.ranks = 3;
    o.channels = 2;
    o.conn.slots = slots;
    o.conn.slot_bytes = 1 + mix(base_seed() ^ (0x7777 + slots)) % 5000;
    o.conn.tagged = true;
    o.external_slots = true;
    o.slow_permille = 200;
    o.messages = 300;
    CAPTURE(slots);
    CAPTURE(o.conn.slot_bytes);
    expect_clean(run_traffic(o, base_seed() ^ (0x7777 + slots)), o);
  }
}

TEST_CASE("tagged messages through a send queue of 3: a tag and its message always fit together") {
  traffic_options o;
  o.conn.slots = 4;
  o.conn.send_depth = 3;
  o.conn.slot_bytes = 64;
  o.conn.tagged = true;
  o.messages = 1000;
  expect_clean(run_traffic(o, base_seed() ^ 0x8888), o);
}

TEST_CASE("a tagged side and an untagged side are refused at connect, naming the difference") {
  auto& fab = verbs_double::fabric::instance();
  fab.reset(verbs_double::uniform_devices(2));
  const tr::verbs_api api = fab.api();
  {
    tr::ibverbs_context c0(api, 0, tr::ibverbs_context_options{"mockdev0", -1});
    tr::ibverbs_context c1(api, 1, tr::ibverbs_context_options{"mockdev1", -1});
    tr::ibverbs_connection_options tagged, plain;
    tagged.tagged = true;
    tr::ibverbs_connection a(c0, 1, 0, tagged), b(c1, 0, 0, plain);
    try {
      a.connect(b.local_info());
      FAIL("a tagged connection took an untagged peer");
    } catch (const collcomm::error& e) {
      CHECK(e.code() == collcomm::errc::invalid_argument);
      CHECK_MESSAGE(std::string(e.what()).find("tags") != std::string::npos, e.what());
    }
    try {
      b.connect(a.local_info());
      FAIL("an untagged connection took a tagged peer");
    } catch (const collcomm::error& e) {
      CHECK(e.code() == collcomm::errc::invalid_argument);
    }
  }
  CHECK(fab.live_objects() == 0);
}
