// The bootstrap's parsers under hostile input, bounded for CI: 100 000 random, mutated, truncated,
// extended, oversized and concatenated messages, and mutated unique ids, each through the same
// oracle as the libFuzzer target (tests/fuzz/wire_oracle.hpp): a clean error or a valid,
// round-tripping value, never a crash. Inputs whose status is known by construction are checked
// for exactly that status, and the message parser must not allocate at all (counted by a
// replaced operator new), so no header can make it allocate. A fresh seed is printed.
#include "../fuzz/wire_oracle.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>

namespace {
thread_local bool g_counting = false;
thread_local std::size_t g_allocs = 0;
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting) ++g_allocs;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {
namespace wire = collcomm::bootstrap::wire;
namespace bs = collcomm::bootstrap;
using bytes = std::vector<std::byte>;

std::uint64_t fresh_seed() {
  std::random_device rd;
  auto s = (std::uint64_t(rd()) << 32) ^ rd();
  std::printf("test_wire_random seed = %llu\n", static_cast<unsigned long long>(s));
  return s;
}

bytes random_bytes(std::mt19937_64& g, std::size_t n) {
  bytes v(n);
  for (auto& b : v) b = std::byte(g());
  return v;
}

// A valid message of this job: random type, sender, peer and payload.
bytes valid_message(std::mt19937_64& g, const wire::expect& e, std::size_t max_payload = 64) {
  const auto type = static_cast<wire::msg>(wire::msg_first + g() % (wire::msg_last - wire::msg_first + 1));
  const int sender = int(g() % std::uint64_t(e.nranks)), peer = int(g() % std::uint64_t(e.nranks + 1)) - 1;
  return wire::encode({type, e.job, sender, peer, 0}, random_bytes(g, g() % (max_payload + 1)));
}

// The oracle's input layout: flags, nranks - 1, message (see wire_oracle.hpp).
bytes framed(const wire::expect& e, const bytes& m) {
  bytes in{std::byte(e.job == wire_oracle::fixed_job ? 0 : 1), std::byte(e.nranks - 1)};
  in.insert(in.end(), m.begin(), m.end());
  return in;
}

wire::status parse_counting_allocs(const bytes& m, const wire::expect& e, std::size_t& allocs) {
  wire::header h;
  std::span<const std::byte> p;
  g_allocs = 0;
  g_counting = true;
  auto s = wire::parse(m, e, h, p);
  wire::decode_header(m, e, h);
  g_counting = false;
  allocs += g_allocs;
  return s;
}
}  // namespace

TEST_CASE("wire: 100000 random, mutated, truncated and oversized inputs give an error or a valid message") {
  std::mt19937_64 g(fresh_seed());
  const int total = 100000;
  int by_kind_ok[9] = {}, by_kind_err[9] = {};
  std::size_t allocs = 0;
  for (int i = 0; i < total; ++i) {
    const int kind = i % 9;
    // Half the inputs use the fixed job id (the oracle then expects it), half their own.
    const wire::expect e{(i / 9) % 2 ? wire_oracle::fixed_job : (g() | 1), 1 + int(g() % 256)};
    bytes m;
    wire::status want{};
    bool known = true;
    switch (kind) {
      case 0:  // random bytes, any length up to 100
        m = random_bytes(g, g() % 101);
        known = false;
        break;
      case 1:  // a valid message
        m = valid_message(g, e);
        want = wire::status::ok;
        break;
      case 2: {  // truncated anywhere
        m = valid_message(g, e);
        m.resize(g() % m.size());
        want = wire::status::truncated;
        break;
      }
      case 3: {  // extended by 1..40 bytes
        m = valid_message(g, e);
        auto extra = random_bytes(g, 1 + g() % 40);
        m.insert(m.end(), extra.begin(), extra.end());
        want = wire::status::trailing;
        break;
      }
      case 4: {  // 1..6 random byte changes anywhere
        m = valid_message(g, e);
        for (int k = 1 + int(g() % 6); k > 0; --k) m[g() % m.size()] = std::byte(g());
        known = false;
        break;
      }
      case 5: {  // a header claiming more than the bound, with a few payload bytes behind it
        m = valid_message(g, e, 8);
        const std::uint64_t lens[] = {wire::max_payload + 1, wire::max_payload + 1 + (g() >> 8), std::uint64_t(1) << 63,
                                      ~std::uint64_t{0}, wire::max_payload << 1};
        wire::detail::put<std::uint64_t>(m.data() + 24, lens[g() % 5]);
        want = wire::status::oversized;
        break;
      }
      case 6: {  // a header claiming more than follows (within the bound): must wait, not read past
        m = valid_message(g, e, 16);
        const auto have = m.size() - wire::header_bytes;
        wire::detail::put<std::uint64_t>(m.data() + 24, have + 1 + g() % (wire::max_payload - have));
        want = wire::status::truncated;
        break;
      }
      case 7: {  // two messages back to back: trailing for one, two for the stream reader
        m = valid_message(g, e);
        auto second = valid_message(g, e);
        m.insert(m.end(), second.begin(), second.end());
        want = wire::status::trailing;
        break;
      }
      default: {  // unique ids, binary or text, mutated
        auto id = bs::unique_id("node" + std::to_string(g() % 100), std::uint16_t(g()), g() | 1);
        if (g() % 2) {
          auto b = id.to_bytes();
          m.assign(b.begin(), b.end());
        } else {
          auto s = id.to_string();
          m.assign(reinterpret_cast<const std::byte*>(s.data()),
                   reinterpret_cast<const std::byte*>(s.data() + s.size()));
        }
        if (!m.empty() && g() % 4) m[g() % m.size()] = std::byte(g() % 2 ? g() : "0123456789abcdef:/."[g() % 19]);
        if (!m.empty() && g() % 4 == 0) m.resize(g() % m.size());
        known = false;
      }
    }
    const auto s = parse_counting_allocs(m, e, allocs);
    if (known && s != want) {
      FAIL_CHECK("input " << i << " (kind " << kind << "): status '" << wire::to_string(s) << "', want '"
                          << wire::to_string(want) << "'");
    }
    (s == wire::status::ok ? by_kind_ok : by_kind_err)[kind]++;
    if (const char* what = wire_oracle::check_input(framed(e, m)))
      FAIL_CHECK("input " << i << " (kind " << kind << "): " << what);
  }
  CHECK(allocs == 0);     // wire::parse and decode_header never allocate
  std::size_t probe = 0;  // ... and the counter does count: encode allocates
  g_allocs = 0;
  g_counting = true;
  const auto sample = wire::encode({wire::msg::bye, 1, 0, -1, 0}, random_bytes(g, 1 + g() % 8));
  g_counting = false;
  probe = g_allocs;
  CHECK(probe >= 1);
  CHECK(sample.size() > wire::header_bytes);
  CHECK(by_kind_ok[1] == total / 9 + (total % 9 > 1));
  for (int k = 0; k < 9; ++k) MESSAGE("kind " << k << ": ok " << by_kind_ok[k] << ", errors " << by_kind_err[k]);
}
