// bench/driver.hpp — what the bench programs share: the command line, the message sizes, timing
// with CUDA events, nccl-tests' bus bandwidth factors and the nccl-tests-style table they print.
// Each program keeps what is its own: how its ranks are made (threads of one process:
// collcomm_bench; processes: collcomm_bench_mp; threads over connections staged through host
// memory: collcomm_bench_pcie), how it checks outputs, and its extra columns (mem%, d2h%, h2d%).
//
// The figures, in nccl-tests' conventions:
//   size   the larger buffer of one rank, in bytes; count follows from it (count_for)
//   time   µs per call: calls queued back to back (or replayed from a CUDA graph) between two CUDA
//          events, divided by their number; each program says whose events and how many
//          repetitions (see its header comment)
//   algbw  size / time, GB/s (1e9 bytes per second)
//   busbw  algbw x bus_factor: all_reduce 2(n-1)/n; reduce_scatter, all_gather, all_to_all
//          (n-1)/n; broadcast, reduce 1
//
// Only the bench programs include this header (nvcc, one translation unit each).
#pragma once

#include <collcomm/gpu.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace collcomm_bench {
using collcomm::index_t;

// ---------------------------------------------------------------------------------------------
// Failing

// The name error messages start with; the program sets it first thing in main.
inline std::string program_name = "collcomm_bench";

// Prints "program: message" and ends the process at once: exit() would wait in CUDA's teardown
// for peers' kernels that still spin.
[[noreturn]] inline void die(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", program_name.c_str(), message.c_str());
  std::fflush(nullptr);
  std::_Exit(2);
}

// printf into a std::string.
inline std::string text(const char* format, ...) {
  va_list args;
  va_start(args, format);
  char buffer[256];
  const int n = std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return std::string(buffer, static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(sizeof buffer) - 1)));
}

// A CUDA runtime call that must succeed; else die() naming the call and CUDA's error.
#define COLLCOMM_BENCH_CUDA(call)                                                                   \
  do {                                                                                              \
    const cudaError_t collcomm_bench_error_ = (call);                                               \
    if (collcomm_bench_error_ != cudaSuccess)                                                       \
      ::collcomm_bench::die(std::string(#call) + ": " + cudaGetErrorString(collcomm_bench_error_)); \
  } while (0)

// ---------------------------------------------------------------------------------------------
// The command line

// What every bench program takes. Each program derives its settings from this, sets its own
// defaults in its constructor, and adds its own fields.
struct settings {
  std::string kind = "all_reduce";
  std::string algo = "ring";
  int ranks = 2;
  std::size_t min_bytes = 8;                     // -b: the first size
  std::size_t max_bytes = std::size_t{1} << 20;  // -e: the last size at most
  double factor = 2;                             // -f: each size is the one before times this
  int iters = 20;                                // calls per repetition
  int warmup = 5;                                // untimed calls before the timed ones
  int reps = 5;                                  // repetitions; the median is printed
  int channels = 0;                              // 0: the world's own choice
  std::size_t slot_bytes = 0;                    // 0: the world's own choice
  bool check = true;                             // one checked call per size
  bool graph = false;                            // replay the calls from a CUDA graph
};

// A flag that takes no value: its presence stores `value`.
struct presence {
  bool* target;
  bool value = true;
};

// Where a flag's value goes, and so how it is read: int (std::atoi), double (std::atof), a size in
// bytes with an optional K, M or G suffix (binary: 1K = 1024), a name, 0|1, or nothing (presence).
using flag_target = std::variant<int*, double*, std::size_t*, std::string*, bool*, presence>;

struct flag {
  const char* name;
  flag_target target;
  const char* help;
};

// "8", "64K", "1.5M", "1G": bytes (K, M, G are powers of 1024).
inline std::size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return static_cast<std::size_t>(v);
}

// The letters of the shared flags. The programs agree on all but a few (collcomm_bench_mp's -n is
// the number of processes, so its calls per repetition are -i and its slot size -S); a null
// letter leaves the flag out of that program.
struct shared_letters {
  const char* kind = "-k";
  const char* algo = "-a";
  const char* ranks = "-r";
  const char* min_bytes = "-b";
  const char* max_bytes = "-e";
  const char* factor = "-f";
  const char* iters = "-n";
  const char* warmup = "-w";
  const char* reps = "-R";
  const char* channels = "-C";
  const char* slot_bytes = "-s";
  const char* check = "-c";
};

inline std::vector<flag> shared_flags(settings& s, const shared_letters& l = {}) {
  std::vector<flag> f;
  auto add = [&](const char* name, flag_target target, const char* help) {
    if (name) f.push_back({name, target, help});
  };
  add(l.kind, &s.kind, "the collective");
  add(l.algo, &s.algo, "the algorithm");
  add(l.ranks, &s.ranks, "number of ranks");
  add(l.min_bytes, &s.min_bytes, "first message size (bytes, K/M/G)");
  add(l.max_bytes, &s.max_bytes, "last message size at most");
  add(l.factor, &s.factor, "each size is the one before times this (> 1)");
  add(l.iters, &s.iters, "calls per repetition (fewer from 64 MiB)");
  add(l.warmup, &s.warmup, "untimed calls first");
  add(l.reps, &s.reps, "repetitions; the median is printed");
  add(l.channels, &s.channels, "channels (thread blocks) per rank; 0: the world's choice");
  add(l.slot_bytes, &s.slot_bytes, "bytes per connection slot; 0: the world's choice");
  add(l.check, &s.check, "1: check one call's output per size, 0: do not");
  return f;
}

namespace detail {
inline std::string default_of(const flag_target& t) {
  struct show {
    std::string operator()(int* v) const { return std::to_string(*v); }
    std::string operator()(double* v) const { return text("%g", *v); }
    std::string operator()(std::size_t* v) const { return std::to_string(*v); }
    std::string operator()(std::string* v) const { return *v; }
    std::string operator()(bool* v) const { return *v ? "1" : "0"; }
    std::string operator()(presence) const { return {}; }
  };
  return std::visit(show{}, t);
}

inline void print_usage(std::span<const flag> flags, const char* synopsis) {
  std::printf("usage: %s\n", synopsis);
  for (const flag& f : flags) {
    const std::string d = default_of(f.target);
    std::printf("  %-13s %s%s\n", f.name, f.help, d.empty() ? "" : (" (default " + d + ")").c_str());
  }
}
}  // namespace detail

// Reads argv into the flags' targets; -h or --help prints the flags with their defaults and
// exits. An unknown flag or a missing value is an error (die).
inline void parse_flags(int argc, char** argv, std::span<const flag> flags, const char* synopsis) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "-h" || std::string_view(argv[i]) == "--help") {
      detail::print_usage(flags, synopsis);
      std::exit(0);
    }
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    const auto f = std::find_if(flags.begin(), flags.end(), [&](const flag& x) { return name == x.name; });
    if (f == flags.end()) die("unknown argument " + name + " (" + program_name + " --help lists the flags)");
    if (const presence* p = std::get_if<presence>(&f->target)) {
      *p->target = p->value;
      continue;
    }
    if (i + 1 >= argc) die("missing value after " + name);
    const char* v = argv[++i];
    struct store {
      const char* v;
      void operator()(int* t) const { *t = std::atoi(v); }
      void operator()(double* t) const { *t = std::atof(v); }
      void operator()(std::size_t* t) const { *t = parse_size(v); }
      void operator()(std::string* t) const { *t = v; }
      void operator()(bool* t) const { *t = std::atoi(v) != 0; }
      void operator()(presence) const {}
    };
    std::visit(store{v}, f->target);
  }
}

// The shared values no run can use.
inline void check_settings(const settings& s) {
  if (s.ranks < 1) die("the number of ranks must be at least 1");
  if (s.factor <= 1) die("the size factor (-f) must be above 1");
  if (s.min_bytes > s.max_bytes) die("the first size (-b) is above the last (-e)");
  if (s.iters < 1 || s.warmup < 0 || s.reps < 1) die("calls per repetition and repetitions must be at least 1");
}

// -b, -e, -f: min_bytes, min_bytes x factor, ... while at most max_bytes (a hair over, for
// rounding).
inline std::vector<std::size_t> message_sizes(const settings& s) {
  std::vector<std::size_t> sizes;
  for (double b = static_cast<double>(s.min_bytes); b <= static_cast<double>(s.max_bytes) * 1.0001; b *= s.factor)
    sizes.push_back(static_cast<std::size_t>(b));
  return sizes;
}

// ---------------------------------------------------------------------------------------------
// Timing

// A call of 64 MiB or more takes milliseconds: such sizes get fewer calls per repetition
// (iters / divisor, at least 2) and at most 3 repetitions.
inline constexpr std::size_t large_message_bytes = std::size_t{64} << 20;
inline int calls_per_repetition(std::size_t bytes, int iters, int divisor = 4) {
  return bytes >= large_message_bytes ? std::max(2, iters / divisor) : iters;
}
inline int repetitions(std::size_t bytes, int reps) { return bytes >= large_message_bytes ? std::min(reps, 3) : reps; }

// The upper median (of an even count, the larger of the middle two); 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The median over `reps` repetitions of what `repetition()` returns (µs per call).
template <class Repetition>
double median_of(int reps, Repetition&& repetition) {
  std::vector<double> times;
  for (int rep = 0; rep < reps; ++rep) times.push_back(repetition());
  return median(times);
}

// Two CUDA events of the current device: start() marks a stream; stop() marks it again, waits for
// that mark and returns the time between the two.
class event_timer {
 public:
  event_timer() {
    COLLCOMM_BENCH_CUDA(cudaEventCreate(&start_));
    COLLCOMM_BENCH_CUDA(cudaEventCreate(&stop_));
  }
  ~event_timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  event_timer(const event_timer&) = delete;
  event_timer& operator=(const event_timer&) = delete;

  void start(cudaStream_t s) { COLLCOMM_BENCH_CUDA(cudaEventRecord(start_, s)); }
  // Milliseconds since start().
  double stop_ms(cudaStream_t s) {
    COLLCOMM_BENCH_CUDA(cudaEventRecord(stop_, s));
    COLLCOMM_BENCH_CUDA(cudaEventSynchronize(stop_));
    float ms = 0;
    COLLCOMM_BENCH_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }
  // Microseconds per call since start().
  double stop(cudaStream_t s, int calls) { return stop_ms(s) * 1e3 / calls; }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// The current device's copy bandwidth, the ceiling the mem% columns are measured against:
// (read + write bytes) / time of one 1 GiB cudaMemcpyAsync device to device, the median of
// `samples` copies after `warm_ups` untimed ones.
inline double copy_bandwidth(int warm_ups, int samples) {
  const std::size_t bytes = std::size_t{1} << 30;
  void* a = nullptr;
  void* b = nullptr;
  COLLCOMM_BENCH_CUDA(cudaMalloc(&a, bytes));
  COLLCOMM_BENCH_CUDA(cudaMalloc(&b, bytes));
  std::vector<double> seconds;
  {
    event_timer timer;
    for (int i = 0; i < warm_ups + samples; ++i) {
      timer.start(nullptr);
      COLLCOMM_BENCH_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
      const double s = timer.stop_ms(nullptr) * 1e-3;
      if (i >= warm_ups) seconds.push_back(s);
    }
  }
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / median(seconds);
}

// ---------------------------------------------------------------------------------------------
// The collectives and their figures

// The op of the bench's calls: sum where the kind reduces.
template <class K>
using bench_op = std::conditional_t<K::reduces, collcomm::op::sum, collcomm::op::none>;

// One call of kind K with algorithm Algo and tuning Tuning, ordered on stream s; root 0 where the
// kind has one.
template <class K, class Algo, class Tuning = collcomm::tuning<>, class Comm, class T, class Op>
void call_collective(Comm& comm, const T* in, T* out, index_t count, Op op, cudaStream_t s) {
  using namespace collcomm;
  if constexpr (std::is_same_v<K, kind::all_reduce>)
    all_reduce<Algo, Tuning>(comm, in, out, count, op, s);
  else if constexpr (std::is_same_v<K, kind::reduce_scatter>)
    reduce_scatter<Algo, Tuning>(comm, in, out, count, op, s);
  else if constexpr (std::is_same_v<K, kind::all_gather>)
    all_gather<Algo, Tuning>(comm, in, out, count, s);
  else if constexpr (std::is_same_v<K, kind::broadcast>)
    broadcast<Algo, Tuning>(comm, in, out, count, 0, s);
  else if constexpr (std::is_same_v<K, kind::reduce>)
    reduce<Algo, Tuning>(comm, in, out, count, op, 0, s);
  else if constexpr (std::is_same_v<K, kind::all_to_all>)
    all_to_all<Algo, Tuning>(comm, in, out, count, s);
  else
    static_assert(sizeof(K) == 0,
                  "call_collective: the bench runs all_reduce, reduce_scatter, all_gather, "
                  "broadcast, reduce and all_to_all");
}

// Kinds whose size is n blocks of count elements (count is per rank).
template <class K>
inline constexpr bool per_rank_count =
    std::is_same_v<K, collcomm::kind::reduce_scatter> || std::is_same_v<K, collcomm::kind::all_gather> ||
    std::is_same_v<K, collcomm::kind::all_to_all>;

// The arm a call over Tr takes, as the bench prints it: the named algorithm with its tuning, or
// algo::automatic's choice.
template <class K, class Algo, class Tuning, class Tr, class T, class Op>
std::string arm_of(const collcomm::world_facts& f, collcomm::index_t count, bool in_place) {
  if constexpr (collcomm::is_automatic<Algo>)
    return collcomm::chosen_arm<K, typename Algo::table, Tr, Op, T>(f, count, in_place);
  else
    return std::string(Algo::name) + " (" + collcomm::detail::tuning_text<Tuning>(f) + ")";
}

// nccl-tests' bus bandwidth factor among n ranks.
template <class K>
double bus_factor(int n) {
  if constexpr (std::is_same_v<K, collcomm::kind::all_reduce>)
    return 2.0 * (n - 1) / n;
  else if constexpr (per_rank_count<K>)
    return double(n - 1) / n;
  else
    return 1.0;
}

// nccl-tests' size convention: the size is the larger buffer of a rank; count follows from it.
template <class K>
index_t count_for(std::size_t bytes, std::size_t elem, int n) {
  const index_t total = bytes / elem;
  if constexpr (per_rank_count<K>)
    return total / n;
  else
    return total;
}

// Algorithm bandwidth, GB/s, of `bytes` in `us` microseconds.
inline double algbw(std::size_t bytes, double us) { return bytes / (us * 1e-6) / 1e9; }

// Where an in-place call's input and output sit in one buffer, as elements from its start
// (collectives.hpp's table): all_gather's input is this rank's block of the output,
// reduce_scatter's output this rank's block of the input; the other kinds read and write the
// same elements.
struct in_place_offsets {
  index_t input = 0;
  index_t output = 0;
};
template <class K>
in_place_offsets in_place_layout(int rank, index_t count) {
  if constexpr (std::is_same_v<K, collcomm::kind::all_gather>)
    return {static_cast<index_t>(rank) * count, 0};
  else if constexpr (std::is_same_v<K, collcomm::kind::reduce_scatter>)
    return {0, static_cast<index_t>(rank) * count};
  else
    return {};
}

// ---------------------------------------------------------------------------------------------
// The table: per size one line — size, count, type, op, then out of place and in place each
// "time algbw busbw <the program's own columns> #wrong" (#wrong: elements of the checked call's
// outputs that differ from the reference, all ranks; -1: not checked).

// The column titles; `own_titles` are the program's own, padded to the widths of its cells.
inline void print_table_header(const std::string& own_titles) {
  std::printf("# %12s %12s %5s %5s", "size(B)", "count", "type", "op");
  for (int place = 0; place < 2; ++place)
    std::printf(" | %9s %9s %9s %s %6s", "time(us)", "algbw", "busbw", own_titles.c_str(), "#wrong");
  std::printf("\n");
}

// The start of a size's line.
inline void print_row_start(std::size_t bytes, index_t count, const char* type, const char* op) {
  std::printf("  %12zu %12zu %5s %5s |", bytes, static_cast<std::size_t>(count), type, op);
}

// One placement's columns; `last` ends the line, else a '|' follows for the next placement.
inline void print_placement(double us, double algbw, double busbw, const std::string& own_cells, long long wrong,
                            bool last) {
  std::printf(" %9.2f %9.2f %9.2f %s %6lld %s", us, algbw, busbw, own_cells.c_str(), wrong, last ? "\n" : "|");
}

}  // namespace collcomm_bench
