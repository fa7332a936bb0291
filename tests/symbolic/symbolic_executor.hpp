// tests/symbolic/symbolic_executor.hpp — the symbolic executor: proves a schedule correct without
// running data.
//
// A schedule is data-independent, so calling `A::run(K{}, recorder, args)` once per rank and
// channel with a recording primitives object gives the whole program (a *trace*). The traces are
// then simulated over bounded FIFO connections, one per (channel, src, dst), `slots` messages deep,
// with a symbolic value per element instead of data:
//
//   sym { mask: which ranks' contributions it holds (N <= 64), idx: the element index in the
//         contributors' input buffer, fin: the op's post was applied, raw: still the original input
//         in storage (the op's pre not applied yet), valid: not poison }
//
// and checks, per element, that every rank ends with exactly the contributions the kind requires,
// each once, from the right offset, finalized exactly once where the kind reduces; that no message
// is left unreceived and no rank blocks (deadlock: the blocked ranks and what they wait for are
// named); that in-place calls (input and output aliased exactly as the table in kinds.hpp says)
// never read input after overwriting it; that the direct primitives read peers only across
// barriers and never race; and that channels touch disjoint data.
//
// FIFO progress model (config::atomic_ops == false, the default): an op first takes all its
// receives (each needs a message at the head of its connection), which frees those slots, then
// waits for a free slot on every send connection. With atomic_ops == true an op waits for its
// messages and its free send slots together (NCCL's simple protocol), which deadlocks more easily
// with slots == 1; schedules are checked under both.
//
// Hosts: config::host_ids (one id per rank, ranks with equal ids share a host; empty: no
// topology) becomes coll_args::topo for every rank (topology.hpp), and report::cross_host_sent
// counts, per rank, the elements it sends to ranks on other hosts.
//
// API:
//   config c{.nranks = 8, .count = 97};
//   report r = verify<kind::all_reduce, algo::ring>(c);   // r.ok, r.message, r.bytes_sent, ...
//   report b = measure<kind::all_reduce, algo::ring>(c);  // bytes only, from the traces: cheap
// Bytes are counted in elements (sizeof 1): elements each rank sends over FIFO connections (one
// per destination), and elements it loads from peers' buffers with the direct primitives.
#pragma once

#include <collcomm/algo/primitives.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/topology.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace collcomm_symbolic {

using collcomm::buf_ref;
using collcomm::buffer;
using collcomm::coll_args;
using collcomm::index_t;
using collcomm::no_peer;
using collcomm::peers;

struct config {
  int nranks = 1;
  index_t count = 0;
  int root = 0;  // rooted kinds
  int channels = 1;
  bool in_place = false;    // kinds with an in-place form (kinds.hpp); ignored by the others
  index_t slot_elems = 8;   // what the recorder's slot_elems() answers
  index_t align_elems = 1;  // what the recorder's align_elems() answers
  int slots = 2;            // FIFO depth of every connection, in messages
  bool atomic_ops = false;  // see the progress model above
  // send_recv: per rank, where its input goes and where its output comes from (no_peer: none).
  // Empty: the ring pattern send_peer = r+1, recv_peer = r-1.
  std::vector<int> send_peer, recv_peer;
  // Per rank, the id of its host (ranks with equal ids share one); empty: coll_args::topo is null.
  std::vector<std::uint64_t> host_ids;
};

struct report {
  bool ok = true;
  std::string message;                   // the first error found, with where it happened
  std::vector<index_t> bytes_sent;       // per rank: FIFO elements sent (one per destination)
  std::vector<index_t> peer_bytes_read;  // per rank: elements loaded from peers (direct family)
  std::vector<index_t> cross_host_sent;  // per rank: FIFO elements sent to ranks on other hosts
                                         // (all zero without config::host_ids)
  index_t max_sent() const {
    index_t m = 0;
    for (auto b : bytes_sent) m = b > m ? b : m;
    return m;
  }
  index_t max_peer_read() const {
    index_t m = 0;
    for (auto b : peer_bytes_read) m = b > m ? b : m;
    return m;
  }
  index_t max_cross_host() const {
    index_t m = 0;
    for (auto b : cross_host_sent) m = b > m ? b : m;
    return m;
  }
  double mean_cross_host() const { return mean(cross_host_sent); }
  double mean_sent() const { return mean(bytes_sent); }
  double mean_peer_read() const { return mean(peer_bytes_read); }

 private:
  static double mean(const std::vector<index_t>& v) {
    double s = 0;
    for (auto b : v) s += static_cast<double>(b);
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  }
};

// ---- the trace: one record per primitive call ----------------------------------------------

enum class opcode : std::uint8_t {
  send,
  recv,
  recv_reduce_send,
  recv_reduce_copy,
  recv_reduce_copy_send,
  recv_copy_send,
  copy_send,
  copy,
  barrier,
  direct_reduce_copy,
  direct_copy
};

inline const char* opcode_name(opcode c) {
  switch (c) {
    case opcode::send:
      return "send";
    case opcode::recv:
      return "recv";
    case opcode::recv_reduce_send:
      return "recv_reduce_send";
    case opcode::recv_reduce_copy:
      return "recv_reduce_copy";
    case opcode::recv_reduce_copy_send:
      return "recv_reduce_copy_send";
    case opcode::recv_copy_send:
      return "recv_copy_send";
    case opcode::copy_send:
      return "copy_send";
    case opcode::copy:
      return "copy";
    case opcode::barrier:
      return "barrier";
    case opcode::direct_reduce_copy:
      return "direct_reduce_copy";
    case opcode::direct_copy:
      return "direct_copy";
  }
  return "?";
}

struct op {
  opcode code{};
  bool fin = false;
  bool has_src = false, has_dst = false;
  peers from, to;  // FIFO receives and sends
  buf_ref src{}, dst{};
  index_t n = 0;
  int direct_peer = no_peer;  // direct_copy's `from`
};

// The primitives object schedules run against while recording. Implements every member of the
// contract in include/collcomm/algo/primitives.hpp.
class recorder {
 public:
  recorder(std::vector<op>& trace, index_t slot, index_t align) : trace_(trace), slot_(slot), align_(align) {}
  index_t slot_elems() const { return slot_; }
  index_t align_elems() const { return align_; }

  void send(peers to, buf_ref src, index_t n) { fifo(opcode::send, {}, to, &src, nullptr, n, false); }
  void recv(peers from, buf_ref dst, index_t n) { fifo(opcode::recv, from, {}, nullptr, &dst, n, false); }
  void recv_reduce_send(peers from, buf_ref src, peers to, index_t n) {
    fifo(opcode::recv_reduce_send, from, to, &src, nullptr, n, false);
  }
  void recv_reduce_copy(peers from, buf_ref src, buf_ref dst, index_t n, bool fin) {
    fifo(opcode::recv_reduce_copy, from, {}, &src, &dst, n, fin);
  }
  void recv_reduce_copy_send(peers from, buf_ref src, buf_ref dst, peers to, index_t n, bool fin) {
    fifo(opcode::recv_reduce_copy_send, from, to, &src, &dst, n, fin);
  }
  void recv_copy_send(peers from, buf_ref dst, peers to, index_t n) {
    fifo(opcode::recv_copy_send, from, to, nullptr, &dst, n, false);
  }
  void copy_send(buf_ref src, buf_ref dst, peers to, index_t n, bool fin = false) {
    fifo(opcode::copy_send, {}, to, &src, &dst, n, fin);
  }
  void copy(buf_ref src, buf_ref dst, index_t n, bool fin = false) { fifo(opcode::copy, {}, {}, &src, &dst, n, fin); }
  void barrier() {
    op o;
    o.code = opcode::barrier;
    trace_.push_back(o);
  }
  void direct_reduce_copy(buf_ref src, buf_ref dst, index_t n, bool fin) {
    if (n == 0) return;
    op o;
    o.code = opcode::direct_reduce_copy;
    o.has_src = o.has_dst = true;
    o.src = src;
    o.dst = dst;
    o.n = n;
    o.fin = fin;
    trace_.push_back(o);
  }
  void direct_copy(int from, buf_ref src, buf_ref dst, index_t n) {
    if (n == 0) return;
    op o;
    o.code = opcode::direct_copy;
    o.has_src = o.has_dst = true;
    o.src = src;
    o.dst = dst;
    o.n = n;
    o.direct_peer = from;
    trace_.push_back(o);
  }

 private:
  void fifo(opcode c, peers from, peers to, const buf_ref* src, const buf_ref* dst, index_t n, bool fin) {
    if (n == 0) return;  // a no-op at both ends (the contract)
    op o;
    o.code = c;
    o.from = from;
    o.to = to;
    if (src) {
      o.has_src = true;
      o.src = *src;
    }
    if (dst) {
      o.has_dst = true;
      o.dst = *dst;
    }
    o.n = n;
    o.fin = fin;
    trace_.push_back(o);
  }
  std::vector<op>& trace_;
  index_t slot_, align_;
};

// ---- symbolic values --------------------------------------------------------------------------

struct sym {
  std::uint64_t mask = 0;  // contributors
  std::uint32_t idx = 0;   // element index in the contributors' input
  bool valid = false;      // false: poison (never written)
  bool fin = false;        // post applied
  bool raw = false;        // original input still in storage: pre not applied yet
};

// One element of a rank's storage, with what the checks of the direct family and of channel
// independence need to know about who touched it when.
struct cell {
  sym v;
  std::int16_t write_epoch = -1, peer_read_epoch = -1;
  std::int8_t write_channel = -1, peer_read_channel = -1;
  std::int8_t peer_reader = -1;
};

inline std::string mask_string(std::uint64_t m, int nranks) {
  const std::uint64_t full = nranks >= 64 ? ~0ull : ((1ull << nranks) - 1);
  if (m == full && nranks > 1) return "all " + std::to_string(nranks) + " ranks";
  std::string s = "ranks {";
  bool first = true;
  for (int i = 0; i < 64;) {
    if (!(m >> i & 1)) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < 64 && (m >> (j + 1) & 1)) ++j;
    if (!first) s += ",";
    first = false;
    s += std::to_string(i);
    if (j > i) s += "-" + std::to_string(j);
    i = j + 1;
  }
  return s + "}";
}

inline std::string sym_string(const sym& v, int nranks) {
  if (!v.valid) return "poison (never written)";
  std::string s = "{" + mask_string(v.mask, nranks) + ", element " + std::to_string(v.idx);
  s += v.fin ? ", finalized" : ", not finalized";
  if (v.raw) s += ", raw input";
  return s + "}";
}

struct failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {

template <class K, class T>
inline constexpr bool is_kind = std::is_same_v<K, T>;

template <class K>
constexpr bool has_in_place() {
  return !is_kind<K, collcomm::kind::all_to_all> && !is_kind<K, collcomm::kind::send_recv>;
}

// Algorithms that cannot run in place say `static constexpr bool in_place_safe = false;` (the host
// API then refuses in-place calls); the sweep checks them out of place only.
template <class A>
constexpr bool in_place_safe() {
  if constexpr (requires { A::in_place_safe; })
    return static_cast<bool>(A::in_place_safe);
  else
    return true;
}

// Where a rank's input and output live in its storage.
struct view {
  bool exists = false;  // false: not significant on this rank; any access is an error
  index_t base = 0, size = 0;
};

struct rank_state {
  std::vector<cell> storage;
  view input, output;
  coll_args args;
  std::vector<std::vector<op>> trace;  // per channel
};

struct message {
  std::vector<sym> vals;
  int sender_op = 0;
};

inline std::string ref_string(buf_ref b, index_t n) {
  std::string s = b.which == buffer::input ? "in[" : "out[";
  return s + std::to_string(b.offset) + ".." + std::to_string(b.offset + n) + ")";
}

inline std::string peers_string(const peers& p) {
  std::string s = "{";
  for (int i = 0; i < p.size; ++i) s += (i ? "," : "") + std::to_string(p.rank[i]);
  return s + "}";
}

inline std::string op_string(const op& o) {
  std::string s = opcode_name(o.code);
  s += "(";
  bool first = true;
  auto add = [&](const std::string& x) {
    s += (first ? "" : ", ") + x;
    first = false;
  };
  if (o.code == opcode::direct_copy) add("from " + std::to_string(o.direct_peer));
  if (!o.from.empty()) add("from " + peers_string(o.from));
  if (o.has_src) add("src " + ref_string(o.src, o.n));
  if (o.has_dst) add("dst " + ref_string(o.dst, o.n));
  if (!o.to.empty()) add("to " + peers_string(o.to));
  if (o.code != opcode::barrier) add("n=" + std::to_string(o.n));
  if (o.fin) add("fin");
  return s + ")";
}

constexpr bool op_receives(opcode c) {
  return c == opcode::recv || c == opcode::recv_reduce_send || c == opcode::recv_reduce_copy ||
         c == opcode::recv_reduce_copy_send || c == opcode::recv_copy_send;
}
constexpr bool op_reduces(opcode c) {
  return c == opcode::recv_reduce_send || c == opcode::recv_reduce_copy || c == opcode::recv_reduce_copy_send;
}
constexpr bool op_is_direct(opcode c) {
  return c == opcode::barrier || c == opcode::direct_reduce_copy || c == opcode::direct_copy;
}

template <class K, class A>
class simulator {
 public:
  explicit simulator(const config& c) : c_(c), n_(c.nranks) {}

  std::string where() const {
    std::ostringstream s;
    s << A::name << " " << K::name << " N=" << c_.nranks << " count=" << c_.count << " channels=" << c_.channels;
    if constexpr (K::rooted) s << " root=" << c_.root;
    if constexpr (has_in_place<K>()) s << (c_.in_place ? " in-place" : " out-of-place");
    if (!c_.host_ids.empty()) {
      s << " hosts=[";
      for (size_t r = 0; r < c_.host_ids.size(); ++r) s << (r ? "," : "") << c_.host_ids[r];
      s << "]";
    }
    s << " slots=" << c_.slots << (c_.atomic_ops ? " (atomic ops)" : "") << " slot_elems=" << c_.slot_elems
      << " align=" << c_.align_elems;
    return s.str();
  }

  [[noreturn]] void fail(const std::string& msg) const { throw failure(where() + ": " + msg); }

  std::uint64_t full_mask() const { return n_ >= 64 ? ~0ull : ((1ull << n_) - 1); }

  void setup(bool with_storage) {
    with_storage_ = with_storage;
    if (n_ < 1 || n_ > 64) fail("nranks must be 1..64 (the contribution mask is 64 bits)");
    if (c_.channels < 1 || c_.channels > 127) fail("channels must be 1..127");
    if (c_.slots < 1) fail("slots must be >= 1");
    if (c_.slot_elems < 1 || c_.align_elems < 1 || c_.slot_elems % c_.align_elems != 0)
      fail("slot_elems must be a positive multiple of align_elems (the contract)");
    if (!c_.host_ids.empty()) {
      if (static_cast<int>(c_.host_ids.size()) != n_) fail("host_ids must have one id per rank");
      topo_.emplace(collcomm::topology_table::from_host_ids(c_.host_ids));
    }
    ranks_.resize(static_cast<size_t>(n_));
    for (int r = 0; r < n_; ++r) {
      auto& rs = ranks_[static_cast<size_t>(r)];
      coll_args& a = rs.args;
      a.rank = r;
      a.nranks = n_;
      a.count = c_.count;
      a.root = c_.root;
      a.nchannels = c_.channels;
      a.topo = topo_ ? &topo_->view() : nullptr;
      if constexpr (is_kind<K, collcomm::kind::send_recv>) {
        if (c_.send_peer.empty()) {
          a.send_peer = collcomm::mod(r + 1, n_);
          a.recv_peer = collcomm::mod(r - 1, n_);
        } else {
          a.send_peer = c_.send_peer[static_cast<size_t>(r)];
          a.recv_peer = c_.recv_peer[static_cast<size_t>(r)];
        }
      }
      layout(rs);
    }
  }

  // The storage of one rank and where its input and output sit in it (kinds.hpp's table).
  void layout(rank_state& rs) {
    const coll_args& a = rs.args;
    const index_t in_n = collcomm::input_elems<K>(a), out_n = collcomm::output_elems<K>(a);
    const index_t cnt = a.count, r = static_cast<index_t>(a.rank);
    const bool root = a.rank == a.root;
    bool in_sig = true, out_sig = true;
    if constexpr (is_kind<K, collcomm::kind::broadcast> || is_kind<K, collcomm::kind::scatter>) in_sig = root;
    if constexpr (is_kind<K, collcomm::kind::reduce> || is_kind<K, collcomm::kind::gather>) out_sig = root;
    if constexpr (is_kind<K, collcomm::kind::send_recv>) {
      in_sig = a.send_peer != no_peer;
      out_sig = a.recv_peer != no_peer;
    }
    const bool in_place = has_in_place<K>() && c_.in_place && in_sig && out_sig;
    rs.input = {in_sig, 0, in_sig ? in_n : 0};
    rs.output = {out_sig, 0, out_sig ? out_n : 0};
    if (!with_storage_) return;
    if (!in_place) {
      rs.output.base = rs.input.size;
      rs.storage.assign(rs.input.size + rs.output.size, cell{});
    } else {
      // Offsets of input and output in one shared storage.
      if constexpr (is_kind<K, collcomm::kind::reduce_scatter>) rs.output.base = r * cnt;
      if constexpr (is_kind<K, collcomm::kind::all_gather>) rs.input.base = r * cnt;
      if constexpr (is_kind<K, collcomm::kind::gather>) rs.input.base = static_cast<index_t>(a.root) * cnt;
      if constexpr (is_kind<K, collcomm::kind::scatter>) rs.output.base = static_cast<index_t>(a.root) * cnt;
      const index_t total = std::max(rs.input.base + rs.input.size, rs.output.base + rs.output.size);
      rs.storage.assign(total, cell{});
    }
    for (index_t i = 0; i < rs.input.size; ++i) {
      sym& v = rs.storage[rs.input.base + i].v;
      v.mask = 1ull << a.rank;
      v.idx = static_cast<std::uint32_t>(i);
      v.valid = true;
      v.raw = true;
    }
  }

  // Bytes of one rank's trace.
  void count_bytes(int r, const std::vector<op>& t, report& rep) const {
    for (const op& o : t) {
      rep.bytes_sent[static_cast<size_t>(r)] += o.n * static_cast<index_t>(o.to.size);
      if (topo_)
        for (int d : o.to)
          if (d >= 0 && d < n_ && topo_->view().host(d) != topo_->view().host(r))
            rep.cross_host_sent[static_cast<size_t>(r)] += o.n;
      if (o.code == opcode::direct_reduce_copy)
        rep.peer_bytes_read[static_cast<size_t>(r)] += o.n * static_cast<index_t>(n_ - 1);
      if (o.code == opcode::direct_copy && o.direct_peer != r) rep.peer_bytes_read[static_cast<size_t>(r)] += o.n;
    }
  }

  // Records every rank and channel; without storage (measure) each trace is counted and dropped
  // at once, so that large counts cost no memory.
  void record(report& rep) {
    rep.bytes_sent.assign(static_cast<size_t>(n_), 0);
    rep.peer_bytes_read.assign(static_cast<size_t>(n_), 0);
    rep.cross_host_sent.assign(static_cast<size_t>(n_), 0);
    std::vector<op> scratch;
    for (auto& rs : ranks_) {
      rs.trace.resize(static_cast<size_t>(c_.channels));
      for (int ch = 0; ch < c_.channels; ++ch) {
        coll_args a = rs.args;
        a.channel = ch;
        std::vector<op>& t = with_storage_ ? rs.trace[static_cast<size_t>(ch)] : scratch;
        t.clear();
        recorder rec(t, c_.slot_elems, c_.align_elems);
        A::run(K{}, rec, a);
        count_bytes(rs.args.rank, t, rep);
      }
    }
  }

  // ---- simulation of one channel ----

  // A FIFO that costs nothing until used (N*N of them per channel).
  struct fifo {
    std::vector<message> items;
    size_t head = 0;
    bool empty() const { return head == items.size(); }
    size_t size() const { return items.size() - head; }
    message& front() { return items[head]; }
    const message& front() const { return items[head]; }
    void push_back(message m) { items.push_back(std::move(m)); }
    void pop_front() {
      if (++head == items.size()) {
        items.clear();
        head = 0;
      }
    }
  };
  struct conn {
    fifo q;
  };
  struct progress {
    size_t pc = 0;
    bool received = false;  // the current op took its receives (phase 1: waits to send)
    bool at_barrier = false;
    std::vector<sym> value;  // the current op's value between its phases
    int last_peer_read_epoch = -1;
  };

  void simulate_channel(int ch) {
    ch_ = ch;
    epoch_ = 0;
    conns_.assign(static_cast<size_t>(n_) * static_cast<size_t>(n_), conn{});
    prog_.assign(static_cast<size_t>(n_), progress{});
    for (;;) {
      bool moved = false;
      for (int r = 0; r < n_; ++r)
        while (step(r)) moved = true;
      int waiting = 0;
      for (auto& p : prog_) waiting += p.at_barrier;
      if (waiting == n_) {
        if (!deferred_.empty()) fail(deferred_);
        if (++epoch_ > 32000) fail("more than 32000 barriers on one channel (the executor's epoch counter is 16 bits)");
        for (auto& p : prog_) {
          p.at_barrier = false;
          ++p.pc;
        }
        moved = true;
      }
      if (!moved) break;
    }
    if (!deferred_.empty()) fail(deferred_);
    bool all_done = true;
    for (int r = 0; r < n_; ++r) all_done &= done(r);
    if (!all_done) deadlock();
    for (int s = 0; s < n_; ++s)
      for (int d = 0; d < n_; ++d) {
        const auto& q = conns_[idx(s, d)].q;
        if (!q.empty()) {
          const op& o = trace(s)[static_cast<size_t>(q.front().sender_op)];
          fail("channel " + std::to_string(ch_) + ": send without matching receive: " + std::to_string(q.size()) +
               " message(s) from rank " + std::to_string(s) + " to rank " + std::to_string(d) +
               " never received; the first was sent by rank " + std::to_string(s) + " op #" +
               std::to_string(q.front().sender_op) + " " + op_string(o));
        }
      }
    for (int r = 0; r < n_; ++r) {
      const int lr = prog_[static_cast<size_t>(r)].last_peer_read_epoch;
      if (lr >= 0 && lr >= epoch_)
        fail("channel " + std::to_string(ch_) + ": rank " + std::to_string(r) +
             " reads peers' buffers after the last barrier: a peer may leave and reuse its buffers while it "
             "reads (the contract needs a barrier after the last peer read)");
    }
  }

  size_t idx(int s, int d) const { return static_cast<size_t>(s) * static_cast<size_t>(n_) + static_cast<size_t>(d); }
  const std::vector<op>& trace(int r) const { return ranks_[static_cast<size_t>(r)].trace[static_cast<size_t>(ch_)]; }
  bool done(int r) const { return prog_[static_cast<size_t>(r)].pc >= trace(r).size(); }

  std::string at(int r) const {
    const auto pc = prog_[static_cast<size_t>(r)].pc;
    return "channel " + std::to_string(ch_) + " rank " + std::to_string(r) + " op #" + std::to_string(pc) + " " +
           op_string(trace(r)[pc]);
  }

  [[noreturn]] void deadlock() const {
    std::string s = "deadlock on channel " + std::to_string(ch_) + " (no rank can progress):";
    int shown = 0, blocked = 0;
    for (int r = 0; r < n_; ++r) {
      if (done(r)) continue;
      ++blocked;
      if (shown >= 6) continue;
      ++shown;
      const auto& p = prog_[static_cast<size_t>(r)];
      const op& o = trace(r)[p.pc];
      s += "\n  rank " + std::to_string(r) + " op #" + std::to_string(p.pc) + " " + op_string(o);
      if (o.code == opcode::barrier) {
        s += " waits for every rank at barrier (epoch " + std::to_string(epoch_) + "); not there:";
        for (int q = 0; q < n_; ++q)
          if (!prog_[static_cast<size_t>(q)].at_barrier) s += " " + std::to_string(q) + (done(q) ? "(finished)" : "");
        continue;
      }
      if (!p.received) {
        for (int f : o.from)
          if (conns_[idx(f, r)].q.empty())
            s += " waits for a message from rank " + std::to_string(f) +
                 (done(f) ? " (which has finished: a receive without its send)" : "");
      }
      if (p.received || c_.atomic_ops) {
        for (int t : o.to)
          if (static_cast<int>(conns_[idx(r, t)].q.size()) >= c_.slots)
            s += " waits for a free slot to rank " + std::to_string(t) + " (" + std::to_string(c_.slots) + "/" +
                 std::to_string(c_.slots) + " full" + (done(t) ? ", and that rank has finished" : "") + ")";
      }
    }
    if (blocked > shown) s += "\n  ... and " + std::to_string(blocked - shown) + " more blocked ranks";
    fail(s);
  }

  // Advances rank r by one op or phase; false when it cannot.
  bool step(int r) {
    auto& p = prog_[static_cast<size_t>(r)];
    const auto& t = trace(r);
    if (p.pc >= t.size() || p.at_barrier) return false;
    const op& o = t[p.pc];
    if (o.code == opcode::barrier) {
      if (!A::needs_direct)
        fail(at(r) + ": barrier is a direct primitive, but the algorithm says needs_direct = false");
      p.at_barrier = true;
      return false;
    }
    if (!p.received) {
      check_peers(r, o);
      if (op_is_direct(o.code)) {
        if (!A::needs_direct)
          fail(at(r) +
               ": a direct primitive, but the algorithm says needs_direct = false (it would run over "
               "FIFO-only transports)");
        direct(r, o);
        ++p.pc;
        return true;
      }
      // The slot limit binds messages; a local copy moves any n (ring's N = 1 copies whole ranges).
      if (o.n > c_.slot_elems && (!o.from.empty() || !o.to.empty()))
        fail(at(r) + ": moves " + std::to_string(o.n) +
             " elements, more than slot_elems() = " + std::to_string(c_.slot_elems));
      for (int f : o.from)
        if (conns_[idx(f, r)].q.empty()) return false;
      if (c_.atomic_ops)
        for (int d : o.to)
          if (static_cast<int>(conns_[idx(r, d)].q.size()) >= c_.slots) return false;
      take(r, o, p);
      p.received = true;
    }
    for (int d : o.to)
      if (static_cast<int>(conns_[idx(r, d)].q.size()) >= c_.slots) return false;
    for (int d : o.to) conns_[idx(r, d)].q.push_back(message{p.value, static_cast<int>(p.pc)});
    p.received = false;
    ++p.pc;
    return true;
  }

  void check_peers(int r, const op& o) const {
    auto check = [&](const peers& ps, const char* what) {
      for (int i = 0; i < ps.size; ++i) {
        const int q = ps.rank[i];
        if (q < 0 || q >= n_) fail(at(r) + ": " + what + " peer " + std::to_string(q) + " is out of range");
        for (int j = 0; j < i; ++j)
          if (ps.rank[j] == q) fail(at(r) + ": " + what + " peer " + std::to_string(q) + " is listed twice");
      }
    };
    check(o.from, "receive");
    check(o.to, "send");
    if (op_receives(o.code) && !op_reduces(o.code) && o.from.empty())
      fail(at(r) + ": receives from no peer, so it has no value to store or forward");
    if (o.code == opcode::direct_copy && (o.direct_peer < 0 || o.direct_peer >= n_))
      fail(at(r) + ": peer " + std::to_string(o.direct_peer) + " is out of range");
  }

  // The receive phase of a FIFO op: receives, loads, reduces, finalizes, stores.
  void take(int r, const op& o, progress& p) {
    auto& rs = ranks_[static_cast<size_t>(r)];
    if (op_reduces(o.code) && !K::reduces)
      fail(at(r) + ": " + K::name + " does not reduce, but this op combines values (" + opcode_name(o.code) + ")");
    std::vector<sym> v;
    bool have = false;
    for (int f : o.from) {
      auto& q = conns_[idx(f, r)].q;
      message m = std::move(q.front());
      q.pop_front();
      if (m.vals.size() != o.n)
        fail(at(r) + ": receives a message of " + std::to_string(m.vals.size()) + " elements from rank " +
             std::to_string(f) + " (its op #" + std::to_string(m.sender_op) + " " +
             op_string(trace(f)[static_cast<size_t>(m.sender_op)]) + "), expected " + std::to_string(o.n));
      if (!have) {
        v = std::move(m.vals);
        have = true;
      } else
        for (index_t i = 0; i < o.n; ++i) v[i] = combine(r, o, v[i], m.vals[i], i);
    }
    if (o.has_src) {
      if (!have) v.resize(o.n);
      for (index_t i = 0; i < o.n; ++i) {
        const sym l = load(r, rs, r, o.src, i, o);
        v[i] = have ? combine(r, o, v[i], l, i) : l;
      }
    }
    if (o.fin)
      for (auto& x : v) finalize(r, o, x);
    if (o.has_dst)
      for (index_t i = 0; i < o.n; ++i) store(r, rs, o.dst, i, v[i], o);
    p.value = std::move(v);
  }

  sym combine(int r, const op& o, const sym& a, const sym& b, index_t i) const {
    if (!K::reduces) fail(at(r) + ": " + K::name + " does not reduce, but this op combines two values");
    if (!a.valid || !b.valid) {
      if (!deferred_.empty()) return sym{};
      fail(at(r) + ": element " + std::to_string(i) + " combines a poison value");
    }
    if (a.fin || b.fin)
      fail(at(r) + ": element " + std::to_string(i) + " combines a finalized value " + sym_string(a.fin ? a : b, n_) +
           " (the op's post would be applied before the reduction ends)");
    if (a.mask & b.mask)
      fail(at(r) + ": element " + std::to_string(i) + " double counts " + mask_string(a.mask & b.mask, n_) +
           ": combines " + sym_string(a, n_) + " with " + sym_string(b, n_));
    if (a.idx != b.idx)
      fail(at(r) + ": element " + std::to_string(i) + " combines element " + std::to_string(a.idx) + " with element " +
           std::to_string(b.idx) + " (wrong offset): " + sym_string(a, n_) + " and " + sym_string(b, n_));
    sym s = a;
    s.mask |= b.mask;
    return s;
  }

  void finalize(int r, const op& o, sym& x) const {
    if (!K::reduces) fail(at(r) + ": " + K::name + " does not reduce, but this op finalizes (fin = true)");
    if (!x.valid && !deferred_.empty()) return;
    if (x.fin) fail(at(r) + ": finalizes " + sym_string(x, n_) + " a second time");
    if (x.mask != full_mask())
      fail(at(r) + ": finalizes a partial value " + sym_string(x, n_) + "; every rank's contribution is needed first");
    x.fin = true;
  }

  const view& view_of(const rank_state& rs, buffer b) const { return b == buffer::input ? rs.input : rs.output; }

  cell& locate(int r, rank_state& rs, int owner, buf_ref ref, index_t i, const op& o, const char* what) const {
    const view& vw = view_of(rs, ref.which);
    if (vw.exists && ref.offset + i < vw.size) return rs.storage[vw.base + ref.offset + i];
    const char* name = ref.which == buffer::input ? "input" : "output";
    const std::string who = owner == r ? "" : " of rank " + std::to_string(owner);
    if (!vw.exists)
      fail(at(r) + ": " + what + " " + name + who + ", which is not significant on rank " + std::to_string(owner) +
           " (the user may pass no buffer there)");
    if (ref.offset + i >= vw.size)
      fail(at(r) + ": " + what + " " + name + who + "[" + std::to_string(ref.offset + i) + "], past its " +
           std::to_string(vw.size) + " elements");
    (void)o;
    return rs.storage[vw.base + ref.offset + i];
  }

  // Rank r loads element i of `ref` in rank `owner`'s buffers.
  sym load(int r, rank_state& rs, int owner, buf_ref ref, index_t i, const op& o) {
    cell& c = locate(r, rs, owner, ref, i, o, "reads");
    auto el = [&] {  // built only on failure: this is the hot path
      return (ref.which == buffer::input ? "input[" : "output[") + std::to_string(ref.offset + i) + "]" +
             (owner == r ? "" : " of rank " + std::to_string(owner));
    };
    if (c.write_channel >= 0 && c.write_channel != ch_)
      fail(at(r) + ": reads " + el() + ", written by channel " + std::to_string(c.write_channel) +
           ": channels must work on disjoint data");
    if (owner != r) {
      if (epoch_ == 0)
        fail(at(r) + ": reads " + el() + " before any barrier: the peer may not have entered the call yet");
      if (c.write_channel == ch_ && c.write_epoch == epoch_)
        fail(at(r) + ": reads " + el() + ", which rank " + std::to_string(owner) +
             " wrote in the same barrier epoch (a race: a barrier must order the write before the read)");
      c.peer_read_channel = static_cast<std::int8_t>(ch_);
      if (c.peer_read_epoch < epoch_) c.peer_read_epoch = static_cast<std::int16_t>(epoch_);
      c.peer_reader = static_cast<std::int8_t>(r);
      auto& p = prog_[static_cast<size_t>(r)];
      p.last_peer_read_epoch = epoch_;
    }
    sym v = c.v;
    if (!v.valid) {
      // A peer's element may be written later in this same epoch (a race, reported by the write):
      // defer the poison error to the epoch's end so the race is named instead.
      if (owner != r) {
        if (deferred_.empty()) deferred_ = at(r) + ": reads " + el() + ", which holds no value yet (poison)";
        return v;
      }
      fail(at(r) + ": reads " + el() + ", which holds no value yet (poison)");
    }
    if (ref.which == buffer::input) {
      if (!v.raw)
        fail(at(r) + ": reads " + el() + " after it was overwritten with " + sym_string(v, n_) +
             " (in-place: input and output share storage; read input before overwriting it)");
    } else if (v.raw && K::reduces) {
      fail(at(r) + ": loads " + el() +
           " through `output` while it still holds the original input (in-place): the "
           "op's pre would be skipped; load it through `input`");
    }
    v.raw = false;
    return v;
  }

  void store(int r, rank_state& rs, buf_ref ref, index_t i, const sym& v, const op& o) {
    if (ref.which == buffer::input) fail(at(r) + ": stores into input, which is const");
    cell& c = locate(r, rs, r, ref, i, o, "writes");
    auto el = [&] { return "output[" + std::to_string(ref.offset + i) + "]"; };
    if (c.write_channel >= 0 && c.write_channel != ch_)
      fail(at(r) + ": writes " + el() + ", already written by channel " + std::to_string(c.write_channel) +
           ": channels must work on disjoint data");
    if (c.peer_read_channel == ch_ && c.peer_read_epoch == epoch_)
      fail(at(r) + ": writes " + el() + ", which rank " + std::to_string(c.peer_reader) +
           " reads in the same barrier epoch (a race)");
    c.v = v;
    c.write_channel = static_cast<std::int8_t>(ch_);
    c.write_epoch = static_cast<std::int16_t>(epoch_);
  }

  void direct(int r, const op& o) {
    auto& rs = ranks_[static_cast<size_t>(r)];
    if (o.code == opcode::direct_reduce_copy && !K::reduces)
      fail(at(r) + ": " + K::name + " does not reduce, but this op combines values (direct_reduce_copy)");
    std::vector<sym> v(o.n);
    if (o.code == opcode::direct_copy) {
      auto& peer = ranks_[static_cast<size_t>(o.direct_peer)];
      for (index_t i = 0; i < o.n; ++i) v[i] = load(r, peer, o.direct_peer, o.src, i, o);
    } else {
      for (int q = 0; q < n_; ++q) {
        auto& peer = ranks_[static_cast<size_t>(q)];
        for (index_t i = 0; i < o.n; ++i) {
          const sym l = load(r, peer, q, o.src, i, o);
          v[i] = q == 0 ? l : combine(r, o, v[i], l, i);
        }
      }
      if (o.fin)
        for (auto& x : v) finalize(r, o, x);
    }
    for (index_t i = 0; i < o.n; ++i) store(r, rs, o.dst, i, v[i], o);
  }

  // ---- the reference: what every rank must hold at the end ----

  void check_result() const {
    const index_t cnt = c_.count;
    const std::uint64_t full = full_mask();
    for (int r = 0; r < n_; ++r) {
      const auto& rs = ranks_[static_cast<size_t>(r)];
      const coll_args& a = rs.args;
      if (!rs.output.exists) continue;  // not significant: no access was allowed at all
      for (index_t k = 0; k < rs.output.size; ++k) {
        sym want;
        want.valid = true;
        const index_t blk = cnt ? k / cnt : 0, i = cnt ? k % cnt : 0;
        if constexpr (is_kind<K, collcomm::kind::all_reduce> || is_kind<K, collcomm::kind::reduce>) {
          want.mask = full;
          want.idx = static_cast<std::uint32_t>(k);
          want.fin = true;
        } else if constexpr (is_kind<K, collcomm::kind::reduce_scatter>) {
          want.mask = full;
          want.idx = static_cast<std::uint32_t>(static_cast<index_t>(r) * cnt + k);
          want.fin = true;
        } else if constexpr (is_kind<K, collcomm::kind::all_gather> || is_kind<K, collcomm::kind::gather>) {
          want.mask = 1ull << blk;
          want.idx = static_cast<std::uint32_t>(i);
        } else if constexpr (is_kind<K, collcomm::kind::broadcast>) {
          want.mask = 1ull << a.root;
          want.idx = static_cast<std::uint32_t>(k);
        } else if constexpr (is_kind<K, collcomm::kind::all_to_all>) {
          want.mask = 1ull << blk;
          want.idx = static_cast<std::uint32_t>(static_cast<index_t>(r) * cnt + i);
        } else if constexpr (is_kind<K, collcomm::kind::scatter>) {
          want.mask = 1ull << a.root;
          want.idx = static_cast<std::uint32_t>(static_cast<index_t>(r) * cnt + k);
        } else if constexpr (is_kind<K, collcomm::kind::send_recv>) {
          want.mask = 1ull << a.recv_peer;
          want.idx = static_cast<std::uint32_t>(k);
        }
        const sym& got = rs.storage[rs.output.base + k].v;
        if (!got.valid || got.mask != want.mask || got.idx != want.idx || got.fin != want.fin ||
            (K::reduces && got.raw))
          fail("rank " + std::to_string(r) + " output[" + std::to_string(k) + "] holds " + sym_string(got, n_) +
               ", expected " + sym_string(want, n_));
      }
    }
  }

  report run(bool simulate) {
    report rep;
    try {
      setup(simulate);
      record(rep);
      if (simulate) {
        for (int ch = 0; ch < c_.channels; ++ch) simulate_channel(ch);
        check_result();
      }
    } catch (const failure& e) {
      rep.ok = false;
      rep.message = e.what();
    }
    return rep;
  }

 private:
  config c_;
  int n_;
  std::optional<collcomm::topology_table> topo_;  // from config::host_ids
  std::vector<rank_state> ranks_;
  std::vector<conn> conns_;
  std::vector<progress> prog_;
  bool with_storage_ = true;  // false: measure only (no values, no storage)
  int ch_ = 0;
  int epoch_ = 0;
  std::string deferred_;  // a peer read of poison, reported at the epoch's end unless a race is found first
};

}  // namespace detail

// Records and simulates K's schedule of algorithm A under `c`; report::ok says whether every check
// passed, report::message names the first failure (algorithm, kind, sizes, rank, op, element).
template <class K, class A>
report verify(const config& c) {
  return detail::simulator<K, A>(c).run(true);
}

// Records the schedule only and counts its bytes (no values, no simulation): cheap at any count.
template <class K, class A>
report measure(const config& c) {
  return detail::simulator<K, A>(c).run(false);
}

}  // namespace collcomm_symbolic
