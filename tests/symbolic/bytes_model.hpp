// tests/symbolic/bytes_model.hpp — the known optimum (or the algorithm's stated figure) of bytes
// each rank moves, per algorithm and kind, in elements (sizeof 1). Keyed by the algorithm's name,
// so that this file needs no algorithm header and a new algorithm shows up as "no model yet".
//
// Slack: schedules cut their share into pieces rounded up to align_elems (channel_range, piece), so
// a rank can move up to `align` more elements than the ideal per piece it sends in a partial slice
// or channel. The slack allowed is (pieces a rank sends per slice) * align * channels, and only
// where a formula is a bound rather than an exact count; every figure below that can be exact is
// checked exactly (a ring's mean, reduce_scatter, all_gather, chains, direct reads).
#pragma once

#include "symbolic_executor.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

namespace collcomm_symbolic {

struct bytes_expectation {
  bool known = false;
  std::string formula;    // for messages and the report
  double max_sent = -1;   // bound on the max over ranks of FIFO elements sent (-1: unchecked)
  double mean_sent = -1;  // exact mean over ranks (-1: unchecked)
  double max_peer = -1;   // bound on the max over ranks of elements read from peers
  double mean_peer = -1;  // exact mean over ranks
  double slack = 0;       // allowed over max_sent / max_peer
};

inline int log2_floor(int n) {
  int l = 0;
  while ((2 << l) <= n) ++l;
  return l;
}

// What algorithm `algo` should move for kind `kind` (names as in A::name, K::name).
inline bytes_expectation expected_bytes(std::string_view algo, std::string_view kind, const config& c) {
  bytes_expectation e;
  const double n = c.nranks, cnt = static_cast<double>(c.count);
  const double align = static_cast<double>(c.align_elems), ch = c.channels;
  const bool pow2 = (c.nranks & (c.nranks - 1)) == 0;
  auto set = [&](const char* f, double max_sent, double mean_sent, double max_peer, double mean_peer, double slack) {
    e.known = true;
    e.formula = f;
    e.max_sent = max_sent;
    e.mean_sent = mean_sent;
    e.max_peer = max_peer;
    e.mean_peer = mean_peer;
    e.slack = slack;
  };
  if (algo == "ring") {
    if (kind == "all_reduce")
      set("2(N-1)/N*count per rank", 2 * (n - 1) / n * cnt, 2 * (n - 1) / n * cnt, 0, 0, 2 * (n - 1) * align * ch);
    else if (kind == "reduce_scatter" || kind == "all_gather")
      set("(N-1)*count per rank", (n - 1) * cnt, (n - 1) * cnt, 0, 0, 0);
    else if (kind == "broadcast" || kind == "reduce")
      set("count on every rank of the chain but its end", n > 1 ? cnt : 0, (n - 1) / n * cnt, 0, 0, 0);
  } else if (algo == "tree") {
    if (kind == "all_reduce")
      // Each tree carries half: a rank sends its half up in both trees (count) and down to at most
      // two children in the tree where it is interior (count).
      set("<= 2*count per rank (double binary tree)", n > 1 ? 2 * cnt : 0, -1, 0, 0, 4 * align * ch + 4 * c.slot_elems);
    else if (kind == "broadcast")
      set("<= 2*count (two children), (N-1)*count in all", n > 1 ? 2 * cnt : 0, (n - 1) / n * cnt, 0, 0, 0);
    else if (kind == "reduce")
      set("count on every rank but the root", n > 1 ? cnt : 0, (n - 1) / n * cnt, 0, 0, 0);
  } else if (algo == "recursive_doubling") {
    const int m = 1 << log2_floor(c.nranks);
    if (kind == "all_reduce")
      set(pow2 ? "log2(N)*count per rank" : "<= (log2(m)+1)*count, m the largest power of two <= N",
          (log2_floor(c.nranks) + (pow2 ? 0 : 1)) * cnt, pow2 ? log2_floor(c.nranks) * cnt : -1, 0, 0, 0);
    else if (kind == "all_gather")
      set(pow2 ? "(N-1)*count per rank" : "<= (m-1)*count + (N-m)*count + (N-1)*count",
          pow2 ? (n - 1) * cnt : (m - 1 + (n - m) + n - 1) * cnt, pow2 ? (n - 1) * cnt : -1, 0, 0, 0);
    (void)m;
  } else if (algo == "one_shot") {
    if (kind == "all_reduce") set("peer reads (N-1)*count per rank", 0, 0, (n - 1) * cnt, (n - 1) * cnt, 0);
  } else if (algo == "two_shot") {
    if (kind == "all_reduce")
      set("peer reads 2(N-1)/N*count per rank", 0, 0, 2 * (n - 1) / n * cnt, 2 * (n - 1) / n * cnt,
          2 * (n - 1) * align * ch);
  } else if (algo == "direct") {
    if (kind == "reduce_scatter" || kind == "all_gather" || kind == "all_to_all")
      set("peer reads (N-1)*count per rank", 0, 0, (n - 1) * cnt, (n - 1) * cnt, 0);
  } else if (algo == "pairwise") {
    if (kind == "all_to_all") set("(N-1)*count per rank", (n - 1) * cnt, (n - 1) * cnt, 0, 0, 0);
  } else if (algo == "linear") {
    if (kind == "gather")
      set("count per non-root rank, 0 at the root", n > 1 ? cnt : 0, (n - 1) / n * cnt, 0, 0, 0);
    else if (kind == "scatter")
      set("(N-1)*count at the root, 0 elsewhere", (n - 1) * cnt, (n - 1) / n * cnt, 0, 0, 0);
  } else if (algo == "p2p") {
    if (kind == "send_recv") set("count per sending rank", cnt, -1, 0, 0, 0);
  }
  return e;
}

// "" when the report meets the expectation, else what is off.
inline std::string check_bytes(const bytes_expectation& e, const report& r) {
  auto fmt = [](double x) { return std::to_string(x); };
  const double eps = 1e-9;
  if (e.max_sent >= 0 && static_cast<double>(r.max_sent()) > e.max_sent + e.slack + eps)
    return "max sent " + fmt(static_cast<double>(r.max_sent())) + " > " + fmt(e.max_sent) + " + slack " + fmt(e.slack) +
           " (" + e.formula + ")";
  if (e.mean_sent >= 0 && std::fabs(r.mean_sent() - e.mean_sent) > 1e-6 * (1 + e.mean_sent))
    return "mean sent " + fmt(r.mean_sent()) + " != " + fmt(e.mean_sent) + " (" + e.formula + ")";
  if (e.max_peer >= 0 && static_cast<double>(r.max_peer_read()) > e.max_peer + e.slack + eps)
    return "max peer read " + fmt(static_cast<double>(r.max_peer_read())) + " > " + fmt(e.max_peer) + " + slack " +
           fmt(e.slack) + " (" + e.formula + ")";
  if (e.mean_peer >= 0 && std::fabs(r.mean_peer_read() - e.mean_peer) > 1e-6 * (1 + e.mean_peer))
    return "mean peer read " + fmt(r.mean_peer_read()) + " != " + fmt(e.mean_peer) + " (" + e.formula + ")";
  return "";
}

// ---- elements sent across hosts (config::host_ids) ------------------------------------------

// The hosts of a configuration: H, the ranks per host, the largest and smallest.
struct host_shape {
  int hosts = 1, max_local = 0, min_local = 0;
  bool equal = true;
};

inline host_shape shape_of_hosts(const config& c) {
  host_shape s;
  if (c.host_ids.empty()) {
    s.max_local = s.min_local = c.nranks;
    return s;
  }
  const collcomm::topology_table t = collcomm::topology_table::from_host_ids(c.host_ids);
  s.hosts = t.nhosts();
  s.max_local = 0;
  s.min_local = c.nranks;
  for (int h = 0; h < s.hosts; ++h) {
    s.max_local = std::max(s.max_local, t.view().local_size(h));
    s.min_local = std::min(s.min_local, t.view().local_size(h));
  }
  s.equal = s.max_local == s.min_local;
  return s;
}

// Elements each rank of hierarchical<Intra,Inter> (by name) sends to ranks on other hosts: the
// expectation's max_sent / mean_sent stand for cross-host elements here. H hosts, L ranks per host
// when they are equal, P the most ranks on one host, Lmin the fewest, C the count.
//   all_reduce     Inter ring: mean 2(H-1)*C/N exactly (each part's Inter all_reduce runs among H
//                  owners, and only there do elements cross); max 2(H-1)/H * C/L on equal hosts,
//                  2(H-1)/H * C * ceil(P/Lmin)/P in general (a rank owns up to ceil(P/L_h) parts),
//                  plus the remainder part (< P*align per channel) and the ring's rounding.
//                  Inter tree: max 2 * the same share.
//   reduce_scatter P rings (Inter ring), one crossing per host per ring: mean H(N-1)*C/N exactly;
//                  max (N-1)*C/L on equal hosts, (N-1)*C*ceil(P/Lmin)/P in general, plus rounding.
//   all_gather     Inter ring among H owners for each of the P parts: mean P*H*(H-1)*C/N exactly;
//                  max (H-1)*C on equal hosts, (H-1)*C*ceil(P/Lmin) in general.
//   broadcast      one carrier per host: mean (H-1)*C/N exactly; max C (Inter ring), 2C (tree).
// One host: nothing crosses.
inline bytes_expectation expected_cross_host_bytes(std::string_view algo, std::string_view kind, const config& c) {
  bytes_expectation e;
  if (algo.substr(0, 13) != "hierarchical<") return e;
  const std::string_view inter = algo.substr(algo.find(',') + 1, algo.size() - algo.find(',') - 2);
  const host_shape hs = shape_of_hosts(c);
  const double n = c.nranks, cnt = static_cast<double>(c.count), H = hs.hosts, P = hs.max_local;
  const double align = static_cast<double>(c.align_elems), ch = c.channels;
  const double spread = std::ceil(P / hs.min_local) / P;  // the share of C one rank carries, at most
  e.known = true;
  if (hs.hosts == 1) {
    e.formula = "nothing crosses hosts on one host";
    e.max_sent = e.mean_sent = 0;
    return e;
  }
  if (kind == "all_reduce") {
    const double f = inter == "tree" ? 2 : 2 * (H - 1) / H;
    e.formula = inter == "tree" ? "<= 2*C*ceil(P/Lmin)/P across hosts (Inter tree)"
                                : "2(H-1)/H*C/L across hosts per rank (mean 2(H-1)C/N)";
    e.max_sent = f * cnt * spread;
    e.mean_sent = inter == "ring" ? 2 * (H - 1) * cnt / n : -1;
    e.slack =
        f * P * align * ch + 2 * (H - 1) * align * ch * (P + 1) + (inter == "tree" ? 4 * c.slot_elems * (P + 1) : 0);
  } else if (kind == "reduce_scatter") {
    e.formula = "(N-1)*C/L across hosts per rank (mean H(N-1)C/N)";
    e.max_sent = (n - 1) * cnt * spread;
    e.mean_sent = inter == "ring" ? H * (n - 1) * cnt / n : -1;
    e.slack = (n - 1) * align * ch * std::ceil(P / hs.min_local);
  } else if (kind == "all_gather") {
    e.formula = "(H-1)*C across hosts per rank (mean P*H*(H-1)C/N)";
    e.max_sent = (H - 1) * cnt * std::ceil(P / hs.min_local);
    e.mean_sent = inter == "ring" ? P * H * (H - 1) * cnt / n : -1;
  } else if (kind == "broadcast") {
    e.formula = inter == "tree" ? "<= 2*C across hosts (mean (H-1)C/N)" : "<= C across hosts (mean (H-1)C/N)";
    e.max_sent = inter == "tree" ? 2 * cnt : cnt;
    e.mean_sent = (H - 1) * cnt / n;
  } else {
    e.known = false;
  }
  return e;
}

// "" when the report's cross-host counts meet the expectation, else what is off.
inline std::string check_cross_host_bytes(const bytes_expectation& e, const report& r) {
  auto fmt = [](double x) { return std::to_string(x); };
  if (e.max_sent >= 0 && static_cast<double>(r.max_cross_host()) > e.max_sent + e.slack + 1e-9)
    return "max cross-host " + fmt(static_cast<double>(r.max_cross_host())) + " > " + fmt(e.max_sent) + " + slack " +
           fmt(e.slack) + " (" + e.formula + ")";
  if (e.mean_sent >= 0 && std::fabs(r.mean_cross_host() - e.mean_sent) > 1e-6 * (1 + e.mean_sent))
    return "mean cross-host " + fmt(r.mean_cross_host()) + " != " + fmt(e.mean_sent) + " (" + e.formula + ")";
  return "";
}

}  // namespace collcomm_symbolic
