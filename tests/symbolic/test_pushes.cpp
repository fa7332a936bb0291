// transport::pushes, the host's choice of a pushed call (a small one_shot all_reduce among
// processes, kernels/pushed_call.cuh), against the kernel's cut of the call into channel ranges
// (channel_range): every channel's range of a pushed call must fit the kernel's shared memory (at
// most push_channel_bytes of input, and (nranks - 1) x its 8-byte lines at most 2048) and the push
// areas (push_max_bytes in all), for every element size and protocol alignment; and a call that
// fits them on one channel is pushed.
#include <collcomm/algo/primitives.hpp>
#include <collcomm/transport/device_handle.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <string>

namespace {

namespace tr = collcomm::transport;

struct layout {
  std::size_t elem, align;  // element bytes; the protocol's cut, in elements
};

// Whether every channel's range of the call fits what the pushed kernel holds.
bool fits(std::size_t count, const layout& l, int nranks, int nchannels) {
  if (count * l.elem > tr::push_max_bytes) return false;
  for (int c = 0; c < nchannels; ++c) {
    const auto r = collcomm::channel_range(static_cast<collcomm::index_t>(count), c, nchannels,
                                           static_cast<collcomm::index_t>(l.align));
    const std::size_t bytes = static_cast<std::size_t>(r.size) * l.elem;
    if (bytes > tr::push_channel_bytes || (bytes + 7) / 8 * static_cast<std::size_t>(nranks - 1) > 2048) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("symbolic bytes: a pushed call's every channel range fits the pushed kernel") {
  // simple (16-byte vectors), ll (8-byte lines) and ll128 (120 bytes of a line) cuts of 1-, 2-, 4-
  // and 8-byte elements.
  const layout layouts[] = {{1, 16}, {1, 8}, {1, 120}, {2, 8}, {2, 4}, {2, 60},
                            {4, 4},  {4, 2}, {4, 30},  {8, 2}, {8, 1}, {8, 15}};
  long pushed = 0, wrong = 0;
  std::string first;
  for (const layout& l : layouts)
    for (int n = 2; n <= 9; ++n)
      for (int nc = 1; nc <= 16; ++nc)
        for (std::size_t count = 0; count <= tr::push_max_bytes / l.elem + 64; ++count) {
          const bool p = tr::pushes(count, l.elem, n, nc, l.align);
          pushed += p;
          if (p && !fits(count, l, n, nc) && wrong++ == 0)
            first = "count " + std::to_string(count) + " of " + std::to_string(l.elem) + "-byte elements cut on " +
                    std::to_string(l.align) + " among " + std::to_string(n) + " on " + std::to_string(nc) +
                    " channels is pushed but does not fit";
        }
  INFO(first);
  CHECK(wrong == 0);
  CHECK(pushed > 0);
  // What one channel pushes (measured there, bench/RESULTS.md): 2 KiB of f32 among 8, 4 KiB among 2
  // and 4; not 4 KiB among 8, nor 8 KiB on one channel.
  CHECK(tr::pushes(512, 4, 8, 1, 4));
  CHECK(tr::pushes(1024, 4, 2, 1, 4));
  CHECK(tr::pushes(1024, 4, 4, 1, 4));
  CHECK_FALSE(tr::pushes(1024, 4, 8, 1, 4));
  CHECK_FALSE(tr::pushes(2048, 4, 2, 1, 4));
  // Spread over channels: 8 KiB among 8 on 4 channels, not past push_max_bytes on any.
  CHECK(tr::pushes(2048, 4, 8, 4, 4));
  CHECK_FALSE(tr::pushes(2049, 4, 8, 16, 4));
  // ll128's cut of 30 floats: 2 KiB a channel among 2 on 2 channels would be 1050 floats on the
  // first, more than push_channel_bytes.
  CHECK_FALSE(tr::pushes(2048, 4, 2, 2, 30));
}
