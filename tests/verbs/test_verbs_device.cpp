// net<ibverbs> on a real RDMA device: a loopback pair (two connections of one context, connected to
// each other) carries messages both ways. Where libibverbs does not load or finds no device with an
// ACTIVE port, it prints "skipped: ..." and exits 77, which ctest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <collcomm/transport/ibverbs/connection.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

namespace tr = collcomm::transport;

namespace {

// Why this machine cannot run the test, or nothing where it can.
std::optional<std::string> skip_reason() {
  const tr::verbs_api* api = nullptr;
  try {
    api = &tr::load_verbs();
  } catch (const collcomm::error&) {
    return "skipped: libibverbs not found";
  }
  int n = 0;
  ibv_device** list = api->get_device_list(&n);
  if (list != nullptr) api->free_device_list(list);
  if (list == nullptr || n == 0) return "skipped: no RDMA device";
  try {
    tr::ibverbs_context probe(*api, 0);
  } catch (const collcomm::error& e) {
    return std::string("skipped: no RDMA device with an ACTIVE port (") + e.what() + ")";
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("loopback pair on the first ACTIVE port (or COLLCOMM_IB_HCA)") {
  const tr::verbs_api& api = tr::load_verbs();
  tr::ibverbs_context ctx(api, 0);
  MESSAGE("device ", ctx.device_name, " port ", int(ctx.port), ctx.roce() ? " (RoCE)" : " (InfiniBand)");
  // Ranks 0 and 1 are both this process: connection a is rank 0's to peer 0, b the "peer 0's" to 0.
  tr::ibverbs_connection a(ctx, 0, 0, {.slots = 4, .slot_bytes = 65536}), b(ctx, 0, 1, {.slots = 4, .slot_bytes = 65536});
  auto ia = a.local_info(), ib = b.local_info();
  ia.channel = 1;  // each side expects the other's channel
  ib.channel = 0;
  a.connect(ib);
  b.connect(ia);
  const std::uint64_t messages = 2000;
  std::uint64_t sa = 0, sb = 0, ra = 0, rb = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto fill = [](std::byte* p, std::size_t n, std::uint64_t m) {
    for (std::size_t i = 0; i < n; ++i) p[i] = std::byte((m * 131 + i) & 0xff);
  };
  auto ok = [](const std::byte* p, std::size_t n, std::uint64_t m) {
    for (std::size_t i = 0; i < n; ++i)
      if (p[i] != std::byte((m * 131 + i) & 0xff)) return false;
    return true;
  };
  auto size = [](std::uint64_t m) { return static_cast<std::size_t>((m * 7919) % 65537); };
  while ((ra < messages || rb < messages) && std::chrono::steady_clock::now() < deadline) {
    for (auto [c, s] : {std::pair{&a, &sa}, std::pair{&b, &sb}})
      if (*s < messages && c->can_send(*s)) {
        fill(c->send_buffer(*s), size(*s), *s);
        c->post(*s, size(*s));
        ++*s;
      }
    a.progress();
    b.progress();
    for (auto [c, r] : {std::pair{&a, &ra}, std::pair{&b, &rb}})
      while (c->arrived(*r)) {
        REQUIRE(c->recv_bytes(*r) == size(*r));
        REQUIRE(ok(c->recv_buffer(*r), size(*r), *r));
        c->release(*r);
        ++*r;
      }
  }
  CHECK(ra == messages);
  CHECK(rb == messages);
}

int main(int argc, char** argv) {
  if (auto why = skip_reason()) {
    std::printf("%s\n", why->c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
