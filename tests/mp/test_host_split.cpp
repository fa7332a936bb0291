// communicator::split and dup on the host executor with ranks as forked processes: group
// membership and order (color, then key, then old rank; negative colors join none), collectives on
// the new communicators checked against their expected sums, nesting, interleaving with the
// parent; then 1000 communicators made and destroyed (dup, split, split with no_color) with no
// file descriptor, /dev/shm segment or mapping left behind; bad uses are errors.
#include "test_host_fork.hpp"

#include <collcomm/host.hpp>

#include <doctest/doctest.h>

#include <fstream>

using namespace collcomm_test::mp;
namespace cc = collcomm;

namespace {

int count_maps() {
  std::ifstream f("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(f, line)) ++n;
  return n;
}
// Bytes of address space mapped (every line of /proc/self/maps).
std::size_t mapped_bytes() {
  std::ifstream f("/proc/self/maps");
  std::string line;
  std::size_t total = 0;
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2) total += hi - lo;
  }
  return total;
}
int count_segment_maps() {
  std::ifstream f("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(f, line))
    if (!segment_of_maps_line(line).empty()) ++n;
  return n;
}

}  // namespace

TEST_CASE("split and dup: membership, order, collectives on the children, nesting") {
  const int n = 6;
  reports rep(n);
  auto j = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        cc::host::options opt;
        opt.timeout = 10s;
        host_comm comm(boot, opt);
        const int r = comm.rank();
        if (!sum_is<cc::algo::ring>(comm, r + 1, n * (n + 1) / 2))
          return child_fail(me, r, 10, "parent all_reduce wrong");

        // Even and odd ranks, ordered by descending old rank (key = -rank).
        auto half = comm.split(r % 2, -r);
        if (!half) return child_fail(me, r, 11, "split(color %d) gave no communicator", r % 2);
        const int want_rank = (n - 1 - r) / 2;  // evens: 4,2,0 -> 0,1,2; odds: 5,3,1 -> 0,1,2
        if (half->size() != 3 || half->rank() != want_rank)
          return child_fail(me, r, 12, "split: size %d rank %d, want 3 and %d", half->size(), half->rank(), want_rank);
        const double group_sum = r % 2 == 0 ? 0 + 2 + 4 : 1 + 3 + 5;
        if (!sum_is<cc::algo::ring>(*half, r, group_sum))
          return child_fail(me, r, 13, "ring all_reduce on the split is wrong");
        if (!sum_is<cc::algo::one_shot>(*half, r, group_sum))
          return child_fail(me, r, 14, "one_shot all_reduce on the split is wrong");
        if (!sum_is<cc::algo::two_shot>(*half, r, group_sum))
          return child_fail(me, r, 15, "two_shot all_reduce on the split is wrong");

        // Ranks 0 and 1 join none (no_color and another negative color); equal keys keep old order.
        auto most = comm.split(r == 0 ? cc::no_color : r == 1 ? -7 : 3, 0);
        if (r < 2 && most) return child_fail(me, r, 16, "a negative color gave a communicator");
        if (r >= 2) {
          if (!most || most->size() != 4 || most->rank() != r - 2)
            return child_fail(me, r, 17, "split without ranks 0, 1: wrong size or rank");
          if (!sum_is<cc::algo::tree>(*most, r, 2 + 3 + 4 + 5))
            return child_fail(me, r, 18, "tree all_reduce on the split is wrong");
        }

        // dup: same ranks, own connections; interleaved with the parent and the split.
        auto d = comm.dup();
        if (d.size() != n || d.rank() != r) return child_fail(me, r, 19, "dup: size %d rank %d", d.size(), d.rank());
        for (int i = 0; i < 3; ++i) {
          if (!sum_is<cc::algo::ring>(d, 1, n)) return child_fail(me, r, 20, "dup all_reduce wrong");
          if (!sum_is<cc::algo::recursive_doubling>(comm, 2, 2 * n))
            return child_fail(me, r, 21, "parent all_reduce wrong after dup");
          if (!sum_is<cc::algo::ring>(*half, 1, 3)) return child_fail(me, r, 22, "split all_reduce wrong after dup");
        }

        // A split of a split: pairs of the halves.
        auto quarter = half->split(half->rank() / 2, half->rank());
        if (!quarter || quarter->size() != (half->rank() < 2 ? 2 : 1))
          return child_fail(me, r, 23, "nested split: wrong size");
        if (!sum_is<cc::algo::ring>(*quarter, 1, quarter->size()))
          return child_fail(me, r, 24, "nested split all_reduce wrong");

        // The parent still works after its children are gone.
        quarter.reset();
        half.reset();
        most.reset();
        if (!sum_is<cc::algo::two_shot>(comm, r, n * (n - 1) / 2))
          return child_fail(me, r, 25, "parent all_reduce wrong at the end");
        return 0;
      },
      rep, 60s);
  for (int r = 0; r < n; ++r)
    CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, "rank " << r << ": " << rep[r].msg);
}

TEST_CASE("split and dup: 1000 communicators made and destroyed leave no descriptor, segment or mapping") {
  const int n = 4;
  const auto shm_before = collcomm_segments();
  reports rep(n);
  auto j = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        cc::host::options opt;
        opt.timeout = 10s;
        opt.window_bytes = 1 << 20;  // every page of a segment is allocated when it is made
        host_comm comm(boot, opt);
        const int r = comm.rank();
        auto one = [&](int i) {
          std::optional<host_comm> c;
          switch (i % 3) {
            case 0:
              c = comm.dup();
              break;
            case 1:
              c = comm.split(r % 2, r);
              break;
            default:
              c = comm.split(r == 3 ? cc::no_color : 0, -r);
              break;
          }
          if (i % 50 == 0 && c && !sum_is<cc::algo::ring>(*c, 1, c->size(), 100)) throw std::runtime_error("wrong sum");
        };
        for (int i = 0; i < 12; ++i) one(i);  // warm up the allocator
        const int fds = count_fds(), maps = count_maps(), segs = count_segment_maps();
        const std::size_t bytes = mapped_bytes();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 1000; ++i) one(i);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const int fds2 = count_fds(), maps2 = count_maps(), segs2 = count_segment_maps();
        const std::size_t bytes2 = mapped_bytes();
        if (r == 0) std::printf("1000 communicators made and destroyed in %.2f s (rank 0)\n", secs);
        if (fds2 != fds)
          return child_fail(me, r, 30, "open descriptors: %d before, %d after 1000 communicators", fds, fds2);
        if (segs2 != segs || segs != 1)
          return child_fail(me, r, 31, "mappings of collcomm segments: %d before, %d after (want 1: the parent's)",
                            segs, segs2);
        // Other mappings: the allocator may split or add an arena line and keep some freed blocks
        // (a world's scratch is 5 slots of 64 KiB per rank, and malloc's mmap threshold rises
        // after such a block is freed, so later ones come from, and stay in, the heap: 1.6 MiB
        // seen), but a leaked world would leave at least one segment's size behind (its windows
        // alone are 16 MiB per rank).
        if (maps2 > maps + 2 || bytes2 > bytes + (std::size_t{8} << 20))
          return child_fail(me, r, 32,
                            "mappings: %d lines, %zu bytes before; %d lines, %zu bytes after 1000 communicators", maps,
                            bytes, maps2, bytes2);
        if (r == 0)
          std::printf("mappings: %d lines, %zu bytes before; %d lines, %zu bytes after\n", maps, bytes, maps2, bytes2);
        if (!sum_is<cc::algo::ring>(comm, 1, n)) return child_fail(me, r, 33, "parent all_reduce wrong at the end");
        return 0;
      },
      rep, 100s);
  for (int r = 0; r < n; ++r)
    CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, "rank " << r << ": " << rep[r].msg);
  const auto leaked = leaked_segments(shm_before, &j.pids);
  CHECK_MESSAGE(leaked.empty(), "segments left in /dev/shm: " << (leaked.empty() ? "" : *leaked.begin()));
}

TEST_CASE("split and dup: bad uses are errors") {
  // A world of threads has no segment to split.
  cc::host::world w(2);
  cc::host::run_ranks(w, [&](host_comm& comm) { CHECK_THROWS_AS(comm.dup(), cc::error); });
  // A direct call that does not fit the window: invalid_argument on every rank, nothing moved,
  // and the communicator still works.
  const int n = 3;
  reports rep(n);
  auto j = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        cc::host::options opt;
        opt.timeout = 10s;
        opt.window_bytes = 4096;
        host_comm comm(boot, opt);
        const int r = comm.rank();
        std::vector<float> in(2000, 1.0f), out(2000, -1.0f);
        try {
          cc::all_reduce<cc::algo::one_shot>(comm, in.data(), out.data(), in.size());
          return child_fail(me, r, 40, "a call larger than the window did not throw");
        } catch (const cc::error& e) {
          if (e.code() != cc::errc::invalid_argument || std::string(e.what()).find("window_bytes") == std::string::npos)
            return child_fail(me, r, 41, "wrong error: %s", e.what());
          if (out[0] != -1.0f) return child_fail(me, r, 42, "the output was touched");
        }
        cc::all_reduce<cc::algo::one_shot>(comm, in.data(), out.data(), 500);  // 4000 bytes: fits
        for (int i = 0; i < 500; ++i)
          if (out[static_cast<std::size_t>(i)] != float(n))
            return child_fail(me, r, 43, "one_shot after the refused call is wrong");
        if (!sum_is<cc::algo::ring>(comm, 1, n)) return child_fail(me, r, 44, "ring after the refused call is wrong");
        return 0;
      },
      rep, 60s);
  for (int r = 0; r < n; ++r)
    CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, "rank " << r << ": " << rep[r].msg);
  // Options that differ between ranks: an error on every rank naming the option.
  reports rep2(n);
  auto j2 = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        cc::host::options opt;
        opt.timeout = 10s;
        if (boot.rank() == 2) opt.slots = 3;
        try {
          host_comm comm(boot, opt);
          return child_fail(me, boot.rank(), 50, "options that differ were accepted");
        } catch (const cc::error& e) {
          if (std::string(e.what()).find("rank 2 passes option 'slots'") == std::string::npos)
            return child_fail(me, boot.rank(), 51, "wrong error: %s", e.what());
        }
        return 0;
      },
      rep2, 60s);
  for (int r = 0; r < n; ++r)
    CHECK_MESSAGE(j2.codes[static_cast<std::size_t>(r)] == 0, "rank " << r << ": " << rep2[r].msg);
}
