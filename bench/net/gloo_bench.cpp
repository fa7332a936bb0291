// bench/net/gloo_bench.cpp — Gloo's collectives over its TCP transport (host buffers, f32, one
// rank per process), timed by bench_common.hpp's sweep.
//
// Rendezvous: a gloo::rendezvous::FileStore in a folder every rank sees (ranks in separate
// network namespaces share the filesystem). The device binds the address --addr (the
// namespace's interface address), else --ifname.
//   gloo_bench --store DIR [--addr A | --ifname IF] [--algo ring|bcube]
//              [--colls ...] [--min-bytes ...] [--max-bytes ...] (as collcomm_net_bench)
// Rank and size: RANK and WORLD_SIZE.
#include "bench_common.hpp"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <memory>

int main(int argc, char** argv) {
  const netbench::args a{argc, argv};
  const char* rank_s = std::getenv("RANK");
  const char* size_s = std::getenv("WORLD_SIZE");
  if (!rank_s || !size_s) {
    std::fprintf(stderr, "gloo_bench: set RANK and WORLD_SIZE\n");
    return 2;
  }
  const int rank = std::atoi(rank_s), size = std::atoi(size_s);
  gloo::transport::tcp::attr attr;
  const std::string addr = a.str("addr", ""), ifname = a.str("ifname", "");
  if (!addr.empty()) attr.hostname = addr;
  else if (!ifname.empty()) attr.iface = ifname;
  attr.ai_family = AF_INET;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(a.str("store", "/tmp/gloo_bench_store"));
  gloo::rendezvous::PrefixStore store(a.str("prefix", "gloo_bench"), file_store);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(std::chrono::seconds(120));
  ctx->connectFullMesh(store, dev);

  const std::string algo_s = a.str("algo", "ring");
  const auto algo = algo_s == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                      : gloo::AllreduceOptions::Algorithm::RING;
  std::uint32_t tag = 0;
  netbench::backend b;
  b.rank = rank;
  b.size = size;
  b.run = [&](netbench::coll c, const float* s, float* r, std::size_t count) {
    switch (c) {
      case netbench::coll::all_reduce: {
        gloo::AllreduceOptions o(ctx);
        o.setAlgorithm(algo);
        o.setInput(const_cast<float*>(s), count);
        o.setOutput(r, count);
        o.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&gloo::sum<float>));
        o.setTag(tag);
        gloo::allreduce(o);
        break;
      }
      case netbench::coll::all_gather: {
        gloo::AllgatherOptions o(ctx);
        o.setInput(const_cast<float*>(s), count);
        o.setOutput(r, count * static_cast<std::size_t>(size));
        o.setTag(tag);
        gloo::allgather(o);
        break;
      }
      case netbench::coll::broadcast: {
        gloo::BroadcastOptions o(ctx);
        if (rank == 0) o.setInput(const_cast<float*>(s), count);
        o.setOutput(r, count);
        o.setRoot(0);
        o.setTag(tag);
        gloo::broadcast(o);
        break;
      }
    }
  };
  b.max_all = [&](double* v, std::size_t n) {
    gloo::AllreduceOptions o(ctx);
    o.setOutput(v, n);
    o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&gloo::max<double>));
    o.setTag(tag + 1);
    gloo::allreduce(o);
  };
  netbench::print_header(b, "gloo 0.0~git20220518 (tcp transport)", "algo=" + algo_s + " device=" + dev->str());
  const std::size_t bad = netbench::sweep(b, netbench::sweep_from_args(a));
  return bad == 0 ? 0 : 1;
}
