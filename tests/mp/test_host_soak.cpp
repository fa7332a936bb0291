// A soak test of process worlds under faults (labels mp, fault). Round after round, for about
// COLLCOMM_SOAK_SECONDS (150 by default), it forks a job of 2..5 ranks (tcp bootstrap on loopback,
// one communicator<host_shm> each, random channels, slots and slot bytes, a timeout of 1 or 1.5 s)
// that makes 1..4 random calls — all_reduce, broadcast, all_gather or reduce_scatter, with every
// algorithm that has a schedule for the kind (valid_composition), int32 or float, sum, max or min,
// random counts and roots, each rank in or out of place at random — and then a closing ring
// all_reduce. Each round has one fault, or none:
//   kill-world    a rank SIGKILLs itself while the world is being made (a thread, after a delay)
//   kill-between  a rank SIGKILLs itself before call k
//   kill-mid      a rank SIGKILLs itself during call k (a thread, after a delay of microseconds)
//   abort-between a rank calls comm.abort(reason) before call k
//   abort-mid     a second thread of a rank calls comm.abort(reason) during call k
//   count, root, algorithm, op, kind
//                 at call k one rank makes another call than its peers: another count, root,
//                 algorithm, op or kind
//   none          no fault: every call must give the exact result
// What is checked, on every rank:
//   * a call that returns gives the exact result of the call as this rank made it (inputs are
//     random integers, fresh each run, exact in every reduction order; outputs are poisoned
//     first; every element is compared, and a guard after the output must keep its poison);
//   * after a kill or an abort, every survivor gets a collcomm::error that names the cause (the
//     dead rank with its pid, or while the world is made its number; "rank V aborted" with the
//     reason) within timeout + margin of the fault (while the world is made: + the bootstrap's
//     timeout), unless the fault came when the rank had nothing left to wait for; after a
//     disagreement, every rank's error names it ("disagree") within timeout + margin of the rank
//     entering the call (or of the first rank's, for a rank that meets the failed world in an
//     earlier call), in that call or, where the rank's part of it completed without a message of
//     the disagreeing rank, in a later one: not always the next, since a rank can complete that
//     too on sends alone (a broadcast from it, the disagreeing rank a leaf) before anyone has
//     noticed; the closing all_reduce needs every rank's data, so no rank gets past it. Every call
//     after a rank's first error throws too;
//   * no rank hangs (run_job kills and reports any rank past its limit);
//   * a new job of as many ranks then makes a world that works (exact results);
//   * the library's segments in /dev/shm (names starting with "collcomm-") and this process's
//     open descriptors are back to where they were before the round. A name that a SIGKILL can
//     leave legitimately (its creator killed before any other rank learned it: segment names that
//     carry the creator's pid) must be gone once the next world has been made.
// Where calls carry fingerprints (collcomm/fingerprint.hpp) a disagreement must wake every rank:
// a timeout is then a failure. Without them, the ranks that wait for a rank that found the
// disagreement run into their timeout, whose message asks whether every rank makes the same
// calls; that is accepted as naming it.
//
// The seed is printed; COLLCOMM_TEST_SEED replays a run, COLLCOMM_SOAK_ROUND=r runs only round r
// of it, COLLCOMM_SOAK_FAULTS=kill-mid,count,... draws only those faults. One line per round.
#include "test_host_fork.hpp"

#include <collcomm/compose.hpp>
#include <collcomm/host.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#if __has_include(<collcomm/fingerprint.hpp>)
constexpr bool calls_carry_fingerprints = true;
#else
constexpr bool calls_carry_fingerprints = false;
#endif

using namespace collcomm_test::mp;
namespace cc = collcomm;
using cc::index_t;

namespace {

// ---- what a round does ---------------------------------------------------------------------------

enum class kind_id { all_reduce, broadcast, all_gather, reduce_scatter };
enum class op_id { sum, max, min };
enum class elem_id { i32, f32 };
enum class fault_id {
  none,
  kill_world,
  kill_between,
  kill_mid,
  abort_between,
  abort_mid,
  count,
  root,
  algorithm,
  op,
  kind
};

constexpr const char* kind_names[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter"};
constexpr const char* op_names[] = {"sum", "max", "min"};
constexpr const char* fault_names[] = {"none",  "kill-world", "kill-between", "kill-mid", "abort-between", "abort-mid",
                                       "count", "root",       "algorithm",    "op",       "kind"};
constexpr int fault_count = sizeof fault_names / sizeof fault_names[0];

bool is_kill(fault_id f) { return f == fault_id::kill_world || f == fault_id::kill_between || f == fault_id::kill_mid; }
bool is_abort(fault_id f) { return f == fault_id::abort_between || f == fault_id::abort_mid; }
bool is_mismatch(fault_id f) { return f >= fault_id::count; }

// Every algorithm the host executor has; a kind runs those with a schedule for it.
using algorithms = std::tuple<cc::algo::ring, cc::algo::tree, cc::algo::one_shot, cc::algo::two_shot,
                              cc::algo::recursive_doubling, cc::algo::direct, cc::algo::linear, cc::algo::pairwise>;
constexpr int algorithm_count = std::tuple_size_v<algorithms>;

template <class F>
void with_kind(kind_id k, F&& f) {
  switch (k) {
    case kind_id::all_reduce:
      return f(cc::kind::all_reduce{});
    case kind_id::broadcast:
      return f(cc::kind::broadcast{});
    case kind_id::all_gather:
      return f(cc::kind::all_gather{});
    case kind_id::reduce_scatter:
      return f(cc::kind::reduce_scatter{});
  }
}
template <class F, std::size_t... I>
void with_algorithm_impl(int a, F&& f, std::index_sequence<I...>) {
  ((a == static_cast<int>(I) ? (f(std::tuple_element_t<I, algorithms>{}), 0) : 0), ...);
}
template <class F>
void with_algorithm(int a, F&& f) {
  with_algorithm_impl(a, f, std::make_index_sequence<algorithm_count>{});
}
template <class F>
void with_op(op_id o, F&& f) {
  switch (o) {
    case op_id::sum:
      return f(cc::op::sum{});
    case op_id::max:
      return f(cc::op::max{});
    case op_id::min:
      return f(cc::op::min{});
  }
}

constexpr bool reducing(kind_id k) { return k == kind_id::all_reduce || k == kind_id::reduce_scatter; }

template <class K, class A>
constexpr bool runs() {
  using Op = std::conditional_t<std::is_same_v<K, cc::kind::all_reduce> || std::is_same_v<K, cc::kind::reduce_scatter>,
                                cc::op::sum, cc::op::none>;
  return cc::valid_composition<K, A, cc::transport::host_shm, Op, float>;
}

// The algorithms with a schedule for kind k, and whether each runs in place.
struct algorithm_choice {
  int index;  // into `algorithms`
  bool in_place;
};
std::vector<algorithm_choice> algorithms_for(kind_id k) {
  std::vector<algorithm_choice> out;
  for (int a = 0; a < algorithm_count; ++a)
    with_kind(k, [&](auto kind) {
      with_algorithm(a, [&](auto algo) {
        using K = decltype(kind);
        using A = decltype(algo);
        if constexpr (runs<K, A>()) out.push_back({a, cc::supports_in_place<A>});
      });
    });
  return out;
}

struct call_spec {
  kind_id kind = kind_id::all_reduce;
  int algorithm = 0;  // index into `algorithms`
  op_id op = op_id::sum;
  elem_id elem = elem_id::i32;
  index_t count = 1;
  int root = 0;
};

index_t in_elems(const call_spec& s, int n) {
  return s.kind == kind_id::reduce_scatter ? static_cast<index_t>(n) * s.count : s.count;
}
index_t out_elems(const call_spec& s, int n) {
  return s.kind == kind_id::all_gather ? static_cast<index_t>(n) * s.count : s.count;
}

std::string describe(const call_spec& s) {
  std::string t = std::string(kind_names[static_cast<int>(s.kind)]) + "/";
  with_algorithm(s.algorithm, [&](auto a) { t += decltype(a)::name; });
  t += s.elem == elem_id::i32 ? "/i32" : "/f32";
  if (reducing(s.kind)) t += std::string("/") + op_names[static_cast<int>(s.op)];
  if (s.kind == kind_id::broadcast) t += "/root" + std::to_string(s.root);
  return t + "/" + std::to_string(s.count);
}

constexpr int max_ranks = 5;
constexpr int max_calls = 4;  // planned calls; the closing all_reduce comes after them

struct round_plan {
  int index = 0;
  std::uint64_t seed = 0;  // the round's: inputs and delays follow from it
  int n = 2;
  cc::host::options opt;
  int ncalls = 1;
  call_spec calls[max_calls + 1];  // [ncalls]: the closing all_reduce
  bool in_place[max_ranks][max_calls + 1] = {};
  fault_id fault = fault_id::none;
  int culprit = 0;                     // the rank that kills itself, aborts or disagrees
  int at = 0;                          // the call it happens at
  call_spec odd;                       // what the culprit calls at `at` in a disagreement
  std::chrono::microseconds delay{0};  // kill-world, kill-mid, abort-mid: after the thread starts

  const call_spec& spec(int rank, int call) const {
    return is_mismatch(fault) && rank == culprit && call == at ? odd : calls[call];
  }
  std::string reason() const { return "soak round " + std::to_string(index); }
};

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

call_spec random_call(std::mt19937_64& g, int n) {
  auto pick = [&](int k) { return static_cast<int>(g() % static_cast<std::uint64_t>(k)); };
  call_spec s;
  s.kind = static_cast<kind_id>(pick(4));
  const auto algos = algorithms_for(s.kind);
  s.algorithm = algos[static_cast<std::size_t>(pick(static_cast<int>(algos.size())))].index;
  s.op = static_cast<op_id>(pick(3));
  s.elem = pick(2) == 0 ? elem_id::i32 : elem_id::f32;
  // Short, a few slots long, or a few thousand elements.
  static constexpr index_t lengths[] = {1, 7, 97, 700, 3000};
  s.count = 1 + static_cast<index_t>(g() % lengths[pick(5)]);
  s.root = pick(n);
  return s;
}

std::vector<fault_id> allowed_faults() {
  std::vector<fault_id> out;
  const char* e = std::getenv("COLLCOMM_SOAK_FAULTS");
  const std::string list = e ? std::string(",") + e + "," : "";
  for (int f = 0; f < fault_count; ++f)
    if (list.empty() || list.find(std::string(",") + fault_names[f] + ",") != std::string::npos)
      out.push_back(static_cast<fault_id>(f));
  return out;
}

// Round `index` of the run with `seed`: a function of both only, so that one round replays alone.
round_plan draw_round(std::uint64_t seed, int index, const std::vector<fault_id>& faults) {
  round_plan p;
  p.index = index;
  p.seed = mix(seed ^ mix(static_cast<std::uint64_t>(index) + 1));
  std::mt19937_64 g(p.seed);
  auto pick = [&](int k) { return static_cast<int>(g() % static_cast<std::uint64_t>(k)); };
  p.n = 2 + pick(max_ranks - 1);
  p.opt.channels = 1 + pick(3);
  static constexpr std::size_t slot_sizes[] = {256, 1024, 4096};
  p.opt.slot_bytes = slot_sizes[pick(3)];
  p.opt.slots = 2 << pick(3);
  p.opt.timeout = std::chrono::milliseconds(pick(2) == 0 ? 1000 : 1500);
  p.opt.window_bytes = std::size_t{1} << 20;  // direct calls stage through it: 5 x 3000 x 4 bytes, twice
  p.ncalls = 1 + pick(max_calls);
  for (int c = 0; c < p.ncalls; ++c) p.calls[c] = random_call(g, p.n);
  p.calls[p.ncalls] = call_spec{kind_id::all_reduce, 0, op_id::sum, elem_id::i32, 64, 0};
  p.fault = faults[static_cast<std::size_t>(pick(static_cast<int>(faults.size())))];
  p.culprit = pick(p.n);
  p.at = pick(p.fault == fault_id::kill_between || p.fault == fault_id::abort_between ? p.ncalls + 1 : p.ncalls);
  switch (p.fault) {
    case fault_id::kill_world:
      p.delay = std::chrono::microseconds(pick(5000));
      break;
    case fault_id::kill_mid:
    case fault_id::abort_mid:
      p.delay = std::chrono::microseconds(pick(1000));
      break;
    default:
      break;
  }
  call_spec& c = p.calls[p.at];
  call_spec& o = p.odd;
  auto other_algorithm = [&](kind_id k, int not_this) {
    auto algos = algorithms_for(k);
    std::erase_if(algos, [&](const algorithm_choice& a) { return a.index == not_this; });
    return algos[static_cast<std::size_t>(pick(static_cast<int>(algos.size())))].index;
  };
  switch (p.fault) {
    case fault_id::count:
      o = c;
      o.count = c.count == 1 || pick(2) == 0 ? c.count + 1 + pick(8)
                                             : c.count - 1 - pick(static_cast<int>(std::min<index_t>(c.count - 1, 8)));
      break;
    case fault_id::root:
      c.kind = kind_id::broadcast;
      c.algorithm = other_algorithm(c.kind, -1);
      o = c;
      o.root = (c.root + 1 + pick(p.n - 1)) % p.n;
      break;
    case fault_id::algorithm:
      o = c;
      o.algorithm = other_algorithm(c.kind, c.algorithm);
      break;
    case fault_id::op:
      if (!reducing(c.kind)) {
        c.kind = pick(2) == 0 ? kind_id::all_reduce : kind_id::reduce_scatter;
        c.algorithm = other_algorithm(c.kind, -1);
      }
      o = c;
      o.op = static_cast<op_id>((static_cast<int>(c.op) + 1 + pick(2)) % 3);
      break;
    case fault_id::kind:
      o = c;
      o.kind = static_cast<kind_id>((static_cast<int>(c.kind) + 1 + pick(3)) % 4);
      o.algorithm = other_algorithm(o.kind, -1);
      break;
    default:
      break;
  }
  // In place or not: each rank on its own (only its buffers), where the algorithm allows it.
  for (int r = 0; r < p.n; ++r)
    for (int k = 0; k < p.ncalls; ++k) {
      bool ok = false;
      for (const auto& a : algorithms_for(p.spec(r, k).kind))
        if (a.index == p.spec(r, k).algorithm) ok = a.in_place;
      p.in_place[r][k] = ok && pick(2) == 0;
    }
  return p;
}

// A world of n ranks, one random call and the closing one, no fault: the job after a round.
round_plan recovery_of(const round_plan& round) {
  std::mt19937_64 g(mix(round.seed ^ 0x5eedull));
  round_plan p;
  p.index = round.index;
  p.seed = g();
  p.n = round.n;
  p.opt = round.opt;
  p.ncalls = 1;
  p.calls[0] = random_call(g, p.n);
  p.calls[1] = round.calls[round.ncalls];
  return p;
}

// ---- what a rank reports (a page shared with the parent) -----------------------------------------

enum class call_state : std::int32_t { not_made, entered, exact, wrong, threw };

struct call_record {
  call_state state;
  std::int32_t err_code;  // errc + 1
  std::int64_t enter_ns, end_ns;
  std::int64_t wrong, first_wrong;  // wrong elements; the first one's index
  double got, want;                 // there
  char msg[512];                    // the error's message
};

constexpr int phase_world = -1;  // making the world; then the index of the call, then done

struct rank_record {
  std::int32_t phase;        // read by the rank's fault thread too (atomic_ref)
  std::int32_t in_collcomm;  // 1 while the rank is inside a collective call (atomic_ref)
  std::int32_t world_err_code;
  std::int64_t world_err_ns;
  char world_msg[1024];
  call_record calls[max_calls + 1];
  // The culprit of a kill or an abort: when it struck, in which phase, and whether inside the call.
  std::int64_t fault_ns;
  std::int32_t fault_phase;
  std::int32_t fault_inside;
};

template <class T>
class shared_array {  // MAP_SHARED anonymous: written by the children, read by the parent
 public:
  explicit shared_array(std::size_t n) : bytes_(sizeof(T) * n) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of the shared records failed");
    p_ = static_cast<T*>(p);
  }
  ~shared_array() { ::munmap(p_, bytes_); }
  shared_array(const shared_array&) = delete;
  shared_array& operator=(const shared_array&) = delete;
  T& operator[](std::size_t i) { return p_[i]; }
  void clear() { std::memset(static_cast<void*>(p_), 0, bytes_); }

 private:
  std::size_t bytes_;
  T* p_;
};

// ---- one rank ------------------------------------------------------------------------------------

template <class T>
T poison_value() {
  return static_cast<T>(-7777777);  // out of the range of every result (|x| <= 5 x 1000), exact in float
}

// Rank `rank`'s input of call `call` in the round as `s` says it: in_elems random integers in
// [-1000, 1000], a function of the round's seed, the call, the rank, the kind and the count, so
// that every rank knows every rank's, and data of a peer that disagrees about the kind or the
// count does not pass for this rank's view.
template <class T>
std::vector<T> input_of(const round_plan& p, int call, int rank, const call_spec& s) {
  const std::uint64_t key = (static_cast<std::uint64_t>(call) * 131 + static_cast<std::uint64_t>(rank)) * 8 +
                            static_cast<std::uint64_t>(s.kind);
  std::mt19937_64 g(mix(p.seed ^ mix(key) ^ mix(mix(static_cast<std::uint64_t>(s.count)))));
  std::uniform_int_distribution<int> d(-1000, 1000);
  std::vector<T> v(in_elems(s, p.n));
  for (T& x : v) x = static_cast<T>(d(g));
  return v;
}

template <class T>
T combine(op_id o, T a, T b) {
  switch (o) {
    case op_id::sum:
      return a + b;
    case op_id::max:
      return std::max(a, b);
    case op_id::min:
      return std::min(a, b);
  }
  return a;
}

// The output of call `call` on `rank` if every rank made it as `s` says.
template <class T>
std::vector<T> reference(const round_plan& p, int call, int rank, const call_spec& s) {
  const int n = p.n;
  std::vector<std::vector<T>> x(static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q) x[static_cast<std::size_t>(q)] = input_of<T>(p, call, q, s);
  std::vector<T> out(out_elems(s, n));
  const index_t c = s.count;
  switch (s.kind) {
    case kind_id::all_reduce:
    case kind_id::reduce_scatter: {
      const index_t from = s.kind == kind_id::reduce_scatter ? static_cast<index_t>(rank) * c : 0;
      for (index_t i = 0; i < c; ++i) {
        T v = x[0][from + i];
        for (int q = 1; q < n; ++q) v = combine(s.op, v, x[static_cast<std::size_t>(q)][from + i]);
        out[i] = v;
      }
      break;
    }
    case kind_id::broadcast:
      out = x[static_cast<std::size_t>(s.root)];
      break;
    case kind_id::all_gather:
      for (int q = 0; q < n; ++q)
        std::copy(x[static_cast<std::size_t>(q)].begin(), x[static_cast<std::size_t>(q)].end(),
                  out.begin() + static_cast<std::ptrdiff_t>(static_cast<index_t>(q) * c));
      break;
  }
  return out;
}

template <class T>
void make_call(host_comm& comm, const call_spec& s, const T* send, T* recv) {
  bool made = false;
  with_kind(s.kind, [&](auto kind) {
    with_algorithm(s.algorithm, [&](auto algo) {
      using K = decltype(kind);
      using A = decltype(algo);
      if constexpr (runs<K, A>()) {
        made = true;
        if constexpr (std::is_same_v<K, cc::kind::all_reduce>)
          with_op(s.op, [&](auto op) { cc::all_reduce<A>(comm, send, recv, s.count, op); });
        else if constexpr (std::is_same_v<K, cc::kind::reduce_scatter>)
          with_op(s.op, [&](auto op) { cc::reduce_scatter<A>(comm, send, recv, s.count, op); });
        else if constexpr (std::is_same_v<K, cc::kind::all_gather>)
          cc::all_gather<A>(comm, send, recv, s.count);
        else
          cc::broadcast<A>(comm, send, recv, s.count, s.root);
      }
    });
  });
  if (!made) throw std::logic_error("soak: no schedule for " + describe(s));
}

// One call on this rank, as it makes it, into `rec`: its buffers poisoned, then every element of
// the output (and of a guard after it) compared with the reference.
template <class T>
void run_call(host_comm& comm, const round_plan& p, int call, const call_spec& s, bool in_place, call_record& rec,
              std::int32_t& in_collcomm) {
  const int n = p.n, r = comm.rank();
  constexpr index_t guard = 16;
  const index_t is = in_elems(s, n), os = out_elems(s, n), c = s.count;
  const std::vector<T> in = input_of<T>(p, call, r, s);
  std::vector<T> a, b;  // out of place: a the input, b the output; in place: a both
  const T* send = nullptr;
  T* recv = nullptr;
  index_t out_at = 0;  // where the output starts in the buffer that holds it
  if (!in_place) {
    a = in;
    b.assign(os + guard, poison_value<T>());
    send = a.data();
    recv = b.data();
  } else {
    a.assign(std::max(is, os) + guard, poison_value<T>());
    index_t in_at = 0;
    if (s.kind == kind_id::all_gather) in_at = static_cast<index_t>(r) * c;
    if (s.kind == kind_id::reduce_scatter) out_at = static_cast<index_t>(r) * c;
    std::copy(in.begin(), in.end(), a.begin() + static_cast<std::ptrdiff_t>(in_at));
    send = a.data() + in_at;
    recv = a.data() + out_at;
  }
  rec.state = call_state::entered;
  rec.enter_ns = now_ns();
  std::atomic_ref<std::int32_t> inside(in_collcomm);
  try {
    inside.store(1);
    make_call<T>(comm, s, send, recv);
    inside.store(0);
  } catch (const cc::error& e) {
    inside.store(0);
    rec.end_ns = now_ns();
    rec.state = call_state::threw;
    rec.err_code = static_cast<int>(e.code()) + 1;
    std::snprintf(rec.msg, sizeof rec.msg, "%s", e.what());
    return;
  }
  rec.end_ns = now_ns();
  const std::vector<T> want = reference<T>(p, call, r, s);
  const std::vector<T>& buf = in_place ? a : b;
  // The output, then the guard (poison) after it; in place, the guard after the whole buffer.
  auto check = [&](index_t i, T expect) {
    const T got = buf[i];
    if (got == expect) return;
    if (rec.wrong++ == 0) {
      rec.first_wrong = i;
      rec.got = static_cast<double>(got);
      rec.want = static_cast<double>(expect);
    }
  };
  for (index_t i = 0; i < os; ++i) check(out_at + i, want[i]);
  for (index_t i = buf.size() - guard; i < buf.size(); ++i) check(i, poison_value<T>());
  rec.state = rec.wrong == 0 ? call_state::exact : call_state::wrong;
}

void record_world_error(rank_record& me, const cc::error& e) {
  me.world_err_code = static_cast<int>(e.code()) + 1;
  me.world_err_ns = now_ns();
  std::snprintf(me.world_msg, sizeof me.world_msg, "%s", e.what());
}

// Rank boot.rank() of round p: makes the world and every call (the later ones too after an error:
// they must throw), with the culprit's fault where the plan puts it.
int run_rank(bs::tcp& boot, const round_plan& p, rank_record& me) {
  const int r = boot.rank();
  const bool culprit = r == p.culprit;
  std::atomic_ref<std::int32_t> phase(me.phase);
  phase.store(phase_world);
  // A fault thread strikes (records when and in which phase, then kills or aborts) holding
  // `turn`, and the rank moves to its next phase holding it too: the phase recorded is the one
  // the fault came in, however the two threads are scheduled.
  std::mutex turn;
  auto next_phase = [&](int v) {
    const std::lock_guard<std::mutex> hold(turn);
    phase.store(v);
  };
  auto strike = [&] {
    me.fault_ns = now_ns();
    me.fault_phase = phase.load();
    me.fault_inside = std::atomic_ref<std::int32_t>(me.in_collcomm).load();
  };
  auto kill_self = [&] {
    strike();
    ::kill(::getpid(), SIGKILL);
  };
  std::optional<host_comm> comm;
  std::thread fault_thread;  // joined before comm goes
  // A fault thread strikes after p.delay, or as soon as the rank leaves the phase it started in:
  // in that phase, or at the very start of the next.
  auto after_delay_in = [&](int in_phase) {
    const auto until = std::chrono::steady_clock::now() + p.delay;
    while (phase.load() == in_phase && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  };
  if (culprit && p.fault == fault_id::kill_world)
    fault_thread = std::thread([&] {
      after_delay_in(phase_world);
      const std::lock_guard<std::mutex> hold(turn);
      kill_self();
    });
  try {
    comm.emplace(boot, p.opt);
  } catch (const cc::error& e) {
    record_world_error(me, e);
  }
  if (comm) {
    for (int c = 0; c <= p.ncalls; ++c) {
      next_phase(c);
      if (culprit && c == p.at) {
        switch (p.fault) {
          case fault_id::kill_between:
            kill_self();
            break;
          case fault_id::abort_between:
            strike();
            comm->abort(p.reason());
            break;
          case fault_id::kill_mid:
            fault_thread = std::thread([&, c] {
              after_delay_in(c);
              const std::lock_guard<std::mutex> hold(turn);
              kill_self();
            });
            break;
          case fault_id::abort_mid:
            fault_thread = std::thread([&, c] {
              after_delay_in(c);
              const std::lock_guard<std::mutex> hold(turn);
              strike();
              comm->abort(p.reason());
            });
            break;
          default:
            break;
        }
      }
      const call_spec& s = p.spec(r, c);
      const bool in_place = c < p.ncalls && p.in_place[r][c];
      if (s.elem == elem_id::i32)
        run_call<std::int32_t>(*comm, p, c, s, in_place, me.calls[c], me.in_collcomm);
      else
        run_call<float>(*comm, p, c, s, in_place, me.calls[c], me.in_collcomm);
    }
  }
  next_phase(p.ncalls + 1);
  if (fault_thread.joinable()) fault_thread.join();  // a kill thread never returns: the process ends
  return 0;
}

// ---- the parent's checks -------------------------------------------------------------------------

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// "rank V" as a word ("rank 1" is not in "rank 12"), or V in a "rank(s) a, b" list.
bool names_rank(const std::string& s, int v) {
  const std::string word = "rank " + std::to_string(v);
  for (std::size_t at = s.find(word); at != std::string::npos; at = s.find(word, at + 1)) {
    const std::size_t end = at + word.size();
    if (end == s.size() || !std::isdigit(static_cast<unsigned char>(s[end]))) return true;
  }
  return false;
}

struct first_error {
  bool any = false;
  int call = phase_world;  // where: phase_world or a call
  int code = 0;
  std::int64_t ns = 0;
  std::string msg;
};
first_error first_error_of(rank_record& rec, int ncalls) {
  first_error f;
  if (rec.world_err_code != 0) return {true, phase_world, rec.world_err_code, rec.world_err_ns, rec.world_msg};
  for (int c = 0; c <= ncalls; ++c)
    if (rec.calls[c].state == call_state::threw)
      return {true, c, rec.calls[c].err_code, rec.calls[c].end_ns, rec.calls[c].msg};
  return f;
}

struct round_outcome {
  std::vector<std::string> failures;
  std::string summary;  // for the round's line
};

// The checks of one job's records (see the file comment). `margin`: added to the timeout.
void check_job(const round_plan& p, const job& j, shared_array<rank_record>& recs, std::chrono::milliseconds margin,
               round_outcome& out, const char* which) {
  auto fail = [&](int r, const std::string& what) {
    out.failures.push_back(std::string(which) + ", rank " + std::to_string(r) + ": " + what);
  };
  const std::int64_t bound_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(p.opt.timeout + margin).count();
  const rank_record& culprit = recs[static_cast<std::size_t>(p.culprit)];
  const bool killed = is_kill(p.fault);
  // Where the fault struck, and whether every other rank must have seen it: the ranks can all
  // finish only when it came during the closing call (a rank that has no more to wait for need not
  // notice) or after it.
  int struck_at = p.at;
  if (killed || is_abort(p.fault)) struck_at = culprit.fault_phase;
  const bool noticed_by_all =
      p.fault != fault_id::none &&
      (struck_at < p.ncalls ||
       (struck_at == p.ncalls && (p.fault == fault_id::kill_between || p.fault == fault_id::abort_between)));
  if (killed && culprit.fault_ns == 0) fail(p.culprit, "the fault did not happen (no kill recorded)");
  std::int64_t latest = 0;
  int errors = 0, timeouts = 0, late = 0;
  std::vector<int> silent;  // disagreement rounds: ranks that returned from every call (see below)
  for (int r = 0; r < p.n; ++r) {
    rank_record& rec = recs[static_cast<std::size_t>(r)];
    const int code = j.codes[static_cast<std::size_t>(r)];
    const bool victim = killed && r == p.culprit;
    if (code == -1000) {
      fail(r, "hung: killed by the parent past the job's limit, in phase " + std::to_string(rec.phase));
      continue;
    }
    if (victim) {
      if (code != -SIGKILL) fail(r, "the rank meant to die ended with code " + std::to_string(code));
    } else if (code != 0) {
      fail(r, "ended with code " + std::to_string(code));
    }
    // Every call that returned gave the exact result of the call as this rank made it.
    for (int c = 0; c <= p.ncalls; ++c) {
      const call_record& cr = rec.calls[c];
      if (cr.state == call_state::wrong) {
        char buf[256];
        std::snprintf(buf, sizeof buf,
                      "call %d (%s) returned wrong data without an error: %" PRId64
                      " wrong elements, the first at %" PRId64 ": %g, not %g",
                      c, describe(p.spec(r, c)).c_str(), cr.wrong, cr.first_wrong, cr.got, cr.want);
        fail(r, buf);
      }
    }
    if (victim) continue;
    const first_error e = first_error_of(rec, p.ncalls);
    // After the first error, every call throws.
    if (e.any)
      for (int c = std::max(e.call + 1, 0); c <= p.ncalls; ++c)
        if (rec.calls[c].state == call_state::exact || rec.calls[c].state == call_state::wrong)
          fail(r, "call " + std::to_string(c) + " returned after an error in " +
                      (e.call == phase_world ? std::string("making the world") : "call " + std::to_string(e.call)));
    if (p.fault == fault_id::none) {
      if (e.any) fail(r, "an error in a round without a fault: " + e.msg);
      continue;
    }
    if (!e.any) {
      // A disagreement whose stale messages sit on connections that no later call of this round
      // reads (a broadcast root that only sent, to a rank that then reads from others only) can
      // leave ranks that returned every call with their own view's exact result (checked above);
      // the rank that meets such a message reports it, and the world fails then. So a rank may
      // be silent only where another rank named the disagreement.
      if (noticed_by_all && !killed && !is_abort(p.fault)) {
        silent.push_back(r);
        continue;
      }
      if (noticed_by_all)
        fail(r, "no error, though " + std::string(fault_names[static_cast<int>(p.fault)]) + " by rank " +
                    std::to_string(p.culprit) + " came in phase " + std::to_string(struck_at));
      continue;
    }
    ++errors;
    if (e.code == static_cast<int>(cc::errc::timeout) + 1) ++timeouts;
    const std::string where =
        e.call == phase_world ? std::string("making the world") : "call " + std::to_string(e.call);
    if (killed || is_abort(p.fault)) {
      if (e.ns < culprit.fault_ns)
        fail(r, "an error in " + where + " before the fault: " + e.msg);
      else if (e.ns - culprit.fault_ns > bound_ns + (e.call == phase_world ? 5'000'000'000 : 0))
        fail(r, "the error came " + std::to_string((e.ns - culprit.fault_ns) / 1'000'000) +
                    " ms after the fault, more than the timeout + margin: " + e.msg);
      latest = std::max(latest, e.ns - culprit.fault_ns);
    }
    if (killed) {
      // In a call the world names the dead rank and its pid; while the world is made, the
      // bootstrap or the statuses name the rank.
      const bool named = e.call == phase_world ? names_rank(e.msg, p.culprit)
                                               : contains(e.msg, "rank " + std::to_string(p.culprit) + " (pid");
      if (!named)
        fail(r, "the error in " + where + " does not name the dead rank " + std::to_string(p.culprit) + ": " + e.msg);
    } else if (is_abort(p.fault)) {
      if (e.code != static_cast<int>(cc::errc::aborted) + 1 ||
          !contains(e.msg, "rank " + std::to_string(p.culprit) + " aborted") || !contains(e.msg, p.reason()))
        fail(r, "the error in " + where + " is not rank " + std::to_string(p.culprit) + "'s abort (\"" + p.reason() +
                    "\"): " + e.msg);
    } else {  // a disagreement at call p.at
      // A rank still in an earlier call when the world fails gets the failure there.
      const bool timed_out = e.code == static_cast<int>(cc::errc::timeout) + 1;
      const bool named =
          contains(e.msg, "disagree") || (!calls_carry_fingerprints && timed_out && contains(e.msg, "same arguments"));
      if (!named) fail(r, "the error in " + where + " does not name the disagreement: " + e.msg);
      if (e.call > p.at + 1) ++late;  // see the file comment
      // From the rank's entering the disagreeing call, or the first rank's if it never did.
      std::int64_t entered = rec.calls[p.at].enter_ns;
      if (entered == 0)
        for (int q = 0; q < p.n; ++q)
          if (const std::int64_t t = recs[static_cast<std::size_t>(q)].calls[p.at].enter_ns; t != 0)
            entered = entered == 0 ? t : std::min(entered, t);
      if (e.ns - entered > bound_ns)
        fail(r, "the error came " + std::to_string((e.ns - entered) / 1'000'000) +
                    " ms after the disagreeing call began, more than the timeout + margin: " + e.msg);
      latest = std::max(latest, e.ns - entered);
    }
  }
  if (!silent.empty()) {
    bool named = false;
    for (int r = 0; r < p.n; ++r) {
      const first_error e = first_error_of(recs[static_cast<std::size_t>(r)], p.ncalls);
      named = named || (e.any && contains(e.msg, "disagree"));
    }
    for (int r : silent)
      if (!named)
        fail(r, "no error, though " + std::string(fault_names[static_cast<int>(p.fault)]) + " by rank " +
                    std::to_string(p.culprit) + " came in phase " + std::to_string(struck_at) +
                    ", and no rank named the disagreement");
  }
  std::ostringstream s;
  if (p.fault != fault_id::none) {
    s << "errors " << errors << "/" << p.n - (killed ? 1 : 0);
    if (errors > 0) s << " within " << latest / 1'000'000 << " ms";
    if (timeouts > 0) s << ", " << timeouts << " by timeout";
    if (late > 0) s << ", " << late << " after the next call";
    if (killed || is_abort(p.fault)) {
      s << ", struck ";
      if (struck_at == phase_world)
        s << "while the world was made";
      else if (struck_at > p.ncalls)
        s << "at the end";
      else
        s << (culprit.fault_inside ? "inside" : "before") << " call " << struck_at;
    }
  } else {
    s << "exact";
  }
  out.summary = s.str();
}

// Segment names of this process's children (the names that carry their creator's pid).
std::string creator_pid(const std::string& name) {
  // "collcomm-<pid>-<start>-<pidns>-<16 hex>-<kind>" carries it; "collcomm-<16 hex>-<suffix>" not.
  std::size_t a = 9, b = a;
  while (b < name.size() && std::isdigit(static_cast<unsigned char>(name[b]))) ++b;
  if (b == a || b >= name.size() || name[b] != '-') return {};
  std::size_t dashes = 0;
  for (char ch : name.substr(b)) dashes += ch == '-';
  return dashes == 4 ? name.substr(a, b - a) : std::string();
}

std::string join(const std::set<std::string>& s) {
  std::string t;
  for (const std::string& x : s) t += (t.empty() ? "" : ", ") + x;
  return t;
}

std::uint64_t soak_seed() {
  if (const char* e = std::getenv("COLLCOMM_TEST_SEED"); e != nullptr && *e != '\0') {
    const auto s = static_cast<std::uint64_t>(std::strtoull(e, nullptr, 0));
    std::printf("host soak: seed = %llu (COLLCOMM_TEST_SEED)\n", static_cast<unsigned long long>(s));
    return s;
  }
  return fresh_seed("host soak");
}

}  // namespace

TEST_CASE("soak: process worlds under kills, aborts and disagreements, each round followed by a new job") {
  const std::uint64_t seed = soak_seed();
  const char* secs = std::getenv("COLLCOMM_SOAK_SECONDS");
  const double seconds = secs && *secs ? std::strtod(secs, nullptr) : 150.0;
  const char* only = std::getenv("COLLCOMM_SOAK_ROUND");
  const int only_round = only && *only ? std::atoi(only) : -1;
  const auto faults = allowed_faults();
  const char* faults_set = std::getenv("COLLCOMM_SOAK_FAULTS");  // the rounds drawn depend on it
  const std::string faults_env = faults_set && *faults_set ? std::string(" COLLCOMM_SOAK_FAULTS=") + faults_set : "";
  REQUIRE_MESSAGE(!faults.empty(), "COLLCOMM_SOAK_FAULTS names none of the faults");
  const auto margin = 1500ms;
  const auto boot_timeout = 5s;
  std::printf("host soak: %.0f s, fingerprints %s; a line per round: its fault, world, calls and outcome\n", seconds,
              calls_carry_fingerprints ? "on" : "off");

  shared_array<rank_record> recs(max_ranks);
  reports rep(max_ranks);
  const int fds_at_start = count_fds();
  const auto t0 = std::chrono::steady_clock::now();
  int rounds = 0, failed_rounds = 0;
  std::vector<int> per_fault(fault_count, 0), failed_per_fault(fault_count, 0);
  for (int index = only_round >= 0 ? only_round : 0;; ++index) {
    if (only_round >= 0 ? index > only_round
                        : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= seconds)
      break;
    const round_plan p = draw_round(seed, index, faults);
    const auto shm_before = collcomm_segments();
    const int fds_before = count_fds();
    round_outcome out;

    auto run = [&](const round_plan& plan, const char* which) {
      recs.clear();
      const auto limit =
          boot_timeout +
          (plan.ncalls + 2) * (std::chrono::duration_cast<std::chrono::milliseconds>(plan.opt.timeout) + margin) + 10s;
      const job j = run_job(
          plan.n,
          [&](bs::tcp& boot, rank_report&) {
            return run_rank(boot, plan, recs[static_cast<std::size_t>(boot.rank())]);
          },
          rep, std::chrono::duration_cast<std::chrono::milliseconds>(limit), boot_timeout);
      round_outcome o;
      check_job(plan, j, recs, margin, o, which);
      for (auto& f : o.failures) out.failures.push_back(std::move(f));
      return std::make_pair(j, o.summary);
    };

    const auto [round_job, summary] = run(p, "the round");
    // Names the round left. A SIGKILL may leave one legitimately only if its creator was killed
    // before any other rank learned it: the name carries the creator's pid, it must be the killed
    // rank's, and the next world made must remove it. Any other is a leak. A name of that form
    // made by another process (another job on this host) is not this round's.
    auto creator_rank = [](const std::string& name, const job& j) {
      const std::string pid = creator_pid(name);
      if (pid.empty()) return -1;  // a name without its creator's pid: counted as this round's
      for (std::size_t r = 0; r < j.pids.size(); ++r)
        if (pid == std::to_string(j.pids[r])) return static_cast<int>(r);
      return -2;
    };
    std::set<std::string> left;
    for (const std::string& s : leaked_segments(shm_before)) {
      const int by = creator_rank(s, round_job);
      if (by == -2) continue;
      left.insert(s);
      if (!is_kill(p.fault) || by != p.culprit)
        out.failures.push_back("the round left segment " + s + " in /dev/shm, made by " +
                               (by >= 0 ? "rank " + std::to_string(by) + ", which survived" : "a rank"));
    }
    if (count_fds() != fds_before)
      out.failures.push_back("the round left " + std::to_string(count_fds() - fds_before) + " descriptors open");

    const round_plan rec_plan = recovery_of(p);
    const job recovery_job = run(rec_plan, "the new job after the round").first;
    std::set<std::string> still;
    for (const std::string& s : leaked_segments(shm_before))
      if (left.count(s) || creator_rank(s, recovery_job) != -2 || creator_rank(s, round_job) != -2) still.insert(s);
    for (const std::string& s : still)
      out.failures.push_back(left.count(s)
                                 ? "segment " + s + ", left by the round, is still there after a new world was made"
                                 : "the new job left segment " + s);
    std::string left_note;
    if (!left.empty()) {
      left_note = ", left " + join(left);
      left_note += std::any_of(left.begin(), left.end(), [&](const std::string& s) { return still.count(s) > 0; })
                       ? " (not removed by the next world)"
                       : " (removed by the next world)";
    }
    for (const std::string& s : left) ::shm_unlink(("/" + s).c_str());  // do not let one leak fail every later round
    for (const std::string& s : still) ::shm_unlink(("/" + s).c_str());
    const int fds_after = count_fds();
    if (fds_after != fds_before)
      out.failures.push_back("after the new job " + std::to_string(fds_after - fds_before) +
                             " descriptors more are open");

    ++rounds;
    ++per_fault[static_cast<int>(p.fault)];
    std::string calls;
    for (int c = 0; c < p.ncalls; ++c) calls += (c ? " " : "") + describe(p.calls[c]);
    std::string fault = fault_names[static_cast<int>(p.fault)];
    if (p.fault != fault_id::none) {
      fault += " rank " + std::to_string(p.culprit);
      if (p.fault != fault_id::kill_world) fault += " at call " + std::to_string(p.at);
      if (is_mismatch(p.fault)) fault += " (" + describe(p.odd) + ")";
    }
    std::printf("round %d: n %d, channels %d, slots %d x %zu B, timeout %lld ms | %s | %s | %s%s%s\n", index, p.n,
                p.opt.channels, p.opt.slots, p.opt.slot_bytes, static_cast<long long>(p.opt.timeout.count()),
                fault.c_str(), calls.c_str(), summary.c_str(), left_note.c_str(),
                out.failures.empty() ? " | ok" : " | FAILED");
    std::fflush(stdout);
    if (!out.failures.empty()) {
      ++failed_rounds;
      ++failed_per_fault[static_cast<int>(p.fault)];
      std::string all;
      for (const auto& f : out.failures) all += "\n  " + f;
      FAIL_CHECK("round " << index << " (" << fault << ", n " << p.n << ", calls " << calls
                          << "), replay with COLLCOMM_TEST_SEED=" << seed << " COLLCOMM_SOAK_ROUND=" << index
                          << faults_env << ":" << all);
    }
  }
  std::string tally;
  for (int f = 0; f < fault_count; ++f)
    if (per_fault[f] > 0)
      tally += std::string(" ") + fault_names[f] + " " + std::to_string(per_fault[f] - failed_per_fault[f]) + "/" +
               std::to_string(per_fault[f]);
  std::printf("host soak: %d rounds in %.0f s, %d failed; passed per fault:%s\n", rounds,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), failed_rounds,
              tally.c_str());
  CHECK(rounds > 0);
  CHECK_MESSAGE(count_fds() == fds_at_start,
                "descriptors open at the start " << fds_at_start << ", at the end " << count_fds());
}
