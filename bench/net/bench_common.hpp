// bench/net/bench_common.hpp — the sweep shared by the host-network benches (collcomm over
// net<socket>, Gloo over its TCP transport, Open MPI over its TCP BTL): one rank per process,
// host buffers, f32.
//
// Method. For each size: the output is poisoned, `warm` calls run and are checked, then `reps`
// calls run back to back with no barrier between them, each timed with steady_clock on every
// rank; the per-call times are then reduced with max over ranks (one extra call of the library's
// own all-reduce, outside the timed loop), and the median and the minimum of those maxima are
// reported. The output of the last timed call is checked too.
//
// Values are small integers encoded in floats (value(i, r) < 1024), so every sum over at most
// 16384 ranks is exact and the reference is exact: #wrong counts the elements that differ from it
// (after the warm-up calls plus after the timed calls).
//
// Sizes follow nccl-tests: all_reduce and broadcast: the buffer; all_gather: the output (every
// rank's part together). algbw = size / time; busbw = algbw × 2(n−1)/n (all_reduce), × (n−1)/n
// (all_gather), × 1 (broadcast).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace netbench {

enum class coll { all_reduce, all_gather, broadcast };

inline const char* coll_name(coll c) {
  switch (c) {
    case coll::all_reduce: return "all_reduce";
    case coll::all_gather: return "all_gather";
    case coll::broadcast: return "broadcast";
  }
  return "?";
}

// What a library gives the sweep.
struct backend {
  int rank = 0;
  int size = 1;
  // One call. all_reduce: count elements in, count out (sum); all_gather: count in, count × size
  // out; broadcast: count from rank 0 (send is significant there only).
  std::function<void(coll, const float* send, float* recv, std::size_t count)> run;
  // v[i] = max over ranks of v[i], in place (the library's all-reduce on doubles or floats).
  std::function<void(double* v, std::size_t n)> max_all;
};

struct sweep_options {
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{256} << 20;
  int step = 2;                                   // size multiplier
  std::vector<coll> colls{coll::all_reduce};      // what to time
  std::size_t budget_bytes = std::size_t{1} << 30;  // reps ≈ budget / size, within [min_reps, max_reps]
  int min_reps = 5;
  int max_reps = 100;
};

// Command-line helpers: --name=value or --name value.
struct args {
  int argc;
  char** argv;
  const char* get(std::string_view name) const {
    for (int i = 1; i < argc; ++i) {
      std::string_view a = argv[i];
      if (a.size() > name.size() + 2 && a.substr(0, 2) == "--" && a.substr(2, name.size()) == name &&
          a[2 + name.size()] == '=')
        return argv[i] + 3 + name.size();
      if (a.size() == name.size() + 2 && a.substr(0, 2) == "--" && a.substr(2) == name && i + 1 < argc)
        return argv[i + 1];
    }
    return nullptr;
  }
  std::size_t bytes(std::string_view name, std::size_t def) const {
    const char* v = get(name);
    if (!v) return def;
    char* end = nullptr;
    double x = std::strtod(v, &end);
    std::string_view suffix = end;
    if (suffix == "K" || suffix == "k" || suffix == "KiB") x *= 1024;
    if (suffix == "M" || suffix == "MiB") x *= 1024 * 1024;
    if (suffix == "G" || suffix == "GiB") x *= 1024.0 * 1024 * 1024;
    return static_cast<std::size_t>(x);
  }
  long integer(std::string_view name, long def) const {
    const char* v = get(name);
    return v ? std::strtol(v, nullptr, 10) : def;
  }
  std::string str(std::string_view name, std::string def) const {
    const char* v = get(name);
    return v ? std::string(v) : def;
  }
};

inline sweep_options sweep_from_args(const args& a) {
  sweep_options o;
  o.min_bytes = a.bytes("min-bytes", o.min_bytes);
  o.max_bytes = a.bytes("max-bytes", o.max_bytes);
  o.step = static_cast<int>(a.integer("step", o.step));
  o.budget_bytes = a.bytes("budget", o.budget_bytes);
  o.min_reps = static_cast<int>(a.integer("min-reps", o.min_reps));
  o.max_reps = static_cast<int>(a.integer("max-reps", o.max_reps));
  const std::string colls = a.str("colls", "all_reduce");
  o.colls.clear();
  std::size_t at = 0;
  while (at <= colls.size()) {
    const std::size_t comma = std::min(colls.find(',', at), colls.size());
    const std::string c = colls.substr(at, comma - at);
    if (c == "all_reduce") o.colls.push_back(coll::all_reduce);
    else if (c == "all_gather") o.colls.push_back(coll::all_gather);
    else if (c == "broadcast") o.colls.push_back(coll::broadcast);
    else if (!c.empty()) {
      std::fprintf(stderr, "unknown collective '%s' (all_reduce, all_gather, broadcast)\n", c.c_str());
      std::exit(2);
    }
    at = comma + 1;
  }
  if (o.step < 2) o.step = 2;
  return o;
}

// Element i of rank r's input: an integer below 1024.
inline float value(std::size_t i, int r) {
  std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u + static_cast<std::uint32_t>(r) * 40503u;
  x ^= x >> 15;
  return static_cast<float>(x & 1023u);
}

inline constexpr float poison = -1.0f;

// Elements of `recv` that differ from the exact result of coll on this rank.
inline std::size_t wrong(coll c, const float* recv, std::size_t count, int rank, int n) {
  std::size_t bad = 0;
  switch (c) {
    case coll::all_reduce:
      for (std::size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += value(i, r);
        bad += recv[i] != want;
      }
      break;
    case coll::all_gather:
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < count; ++i) bad += recv[static_cast<std::size_t>(q) * count + i] != value(i, q);
      break;
    case coll::broadcast:
      for (std::size_t i = 0; i < count; ++i) bad += recv[i] != value(i, 0);
      break;
  }
  (void)rank;
  return bad;
}

inline double bus_factor(coll c, int n) {
  switch (c) {
    case coll::all_reduce: return 2.0 * (n - 1) / n;
    case coll::all_gather: return double(n - 1) / n;
    case coll::broadcast: return 1.0;
  }
  return 1.0;
}

inline void print_header(const backend& b, const char* library, const std::string& settings) {
  if (b.rank != 0) return;
  std::printf("# library: %s\n# ranks: %d\n# settings: %s\n", library, b.size, settings.c_str());
  std::printf("# time: per call, max over ranks of each call's steady_clock time; median and min over reps\n");
  std::printf("#%11s %12s %11s %5s %12s %12s %10s %10s %7s\n", "coll", "size(B)", "count", "reps", "median(us)",
              "min(us)", "algbw", "busbw", "#wrong");
  std::fflush(stdout);
}

// Times every collective of `o` at every size; rank 0 prints one line per (collective, size).
// Returns the number of wrong elements on this rank.
inline std::size_t sweep(backend& b, const sweep_options& o) {
  const int n = b.size;
  std::size_t total_wrong = 0;
  for (coll c : o.colls) {
    for (std::size_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
      // count: elements per rank's input (all_gather: size / n each).
      std::size_t count = bytes / sizeof(float);
      if (c == coll::all_gather) count = std::max<std::size_t>(1, count / static_cast<std::size_t>(n));
      if (count == 0) count = 1;
      const std::size_t out_count = c == coll::all_gather ? count * static_cast<std::size_t>(n) : count;
      const std::size_t size_bytes = out_count * sizeof(float);
      std::vector<float> send(count), recv(out_count, poison);
      for (std::size_t i = 0; i < count; ++i) send[i] = value(i, b.rank);

      const int reps = static_cast<int>(std::clamp<std::size_t>(o.budget_bytes / std::max<std::size_t>(size_bytes, 1),
                                                                static_cast<std::size_t>(o.min_reps),
                                                                static_cast<std::size_t>(o.max_reps)));
      const int warm = std::clamp(reps / 10, 1, 5);
      for (int w = 0; w < warm; ++w) b.run(c, send.data(), recv.data(), count);
      std::size_t bad = wrong(c, recv.data(), count, b.rank, n);
      std::fill(recv.begin(), recv.end(), poison);

      std::vector<double> t(static_cast<std::size_t>(reps));
      for (int k = 0; k < reps; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        b.run(c, send.data(), recv.data(), count);
        const auto t1 = std::chrono::steady_clock::now();
        t[static_cast<std::size_t>(k)] = std::chrono::duration<double, std::micro>(t1 - t0).count();
      }
      bad += wrong(c, recv.data(), count, b.rank, n);
      // Per-call max over ranks, and the wrong count summed (as a max of per-rank counts: any
      // rank's count is reported).
      t.push_back(static_cast<double>(bad));
      b.max_all(t.data(), t.size());
      const double worst_bad = t.back();
      t.pop_back();
      total_wrong += bad;
      std::vector<double> sorted = t;
      std::sort(sorted.begin(), sorted.end());
      const double median = reps % 2 ? sorted[static_cast<std::size_t>(reps / 2)]
                                      : 0.5 * (sorted[static_cast<std::size_t>(reps / 2 - 1)] +
                                               sorted[static_cast<std::size_t>(reps / 2)]);
      const double mn = sorted.front();
      const double algbw = static_cast<double>(size_bytes) / (median * 1e3);  // GB/s
      if (b.rank == 0) {
        std::printf("%12s %12zu %11zu %5d %12.2f %12.2f %10.3f %10.3f %7.0f\n", coll_name(c), size_bytes, out_count,
                    reps, median, mn, algbw, algbw * bus_factor(c, n), worst_bad);
        std::fflush(stdout);
      }
      if (bytes == o.max_bytes) break;
      bytes = std::min(bytes * static_cast<std::size_t>(o.step), o.max_bytes);
    }
  }
  return total_wrong;
}

}  // namespace netbench
