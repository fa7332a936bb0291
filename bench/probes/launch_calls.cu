// bench/probes/launch_calls.cu — what the grouped launch of N ranks (threads of one process, one
// GPU) costs on the host, by design: the CUDA calls each rank and the launching rank make per
// call, each rank a thread with its own stream, calls back to back.
//
//   launch_calls [ranks=8] [calls=4000] [modes=record+wait,memop,is_capturing,events]
//
// Modes (µs per call, wall time of `calls` calls of every thread, then a device sync):
//   record+wait       each thread: cudaEventRecord + cudaStreamWaitEvent, no rendezvous (API cost)
//   memop             each thread: one cuStreamBatchMemOp (write its word, wait for it), no rendezvous
//   is_capturing      each thread: cudaStreamIsCapturing
//   events            the event design: every thread records `ready`, meets the others; the last
//                     makes its stream wait for the other events, launches, records `done`; the
//                     others' streams wait for `done`
//   memops            every thread's stream: one batch (write arrive[i] = k; wait done >= k); meet;
//                     the last: on the group's stream a batch waiting arrive[j] >= k for every j,
//                     the launch, a write of done = k
//   memops_async      as memops, but a rank that is not last returns without waiting for the launch
//   launch_each       each thread launches its own kernel on its own stream every call (one block
//                     of PROBE_THREADS threads, the 2424-byte parameter block; cooperative where
//                     PROBE_COOP=1), no rendezvous: what launches per rank (as processes make them)
//                     cost when the ranks are threads of one process
//   events_shaped     events, launching a kernel shaped like collcomm's grouped launch instead:
//                     a grid of (1, ranks) blocks of PROBE_THREADS (512) threads, a parameter block
//                     of 2424 bytes (kernel_params of 32 rank_params), cooperative where PROBE_COOP=1
//                     (the default), each block spinning PROBE_SPIN_NS (0) on the global timer
// memops and memops_async deadlock when the streams outnumber the GPU's hardware queues
// (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default): a stream's wait blocks the queue it shares with
// the stream whose work would end the wait. Run them with CUDA_DEVICE_MAX_CONNECTIONS=32.
// Each launch's kernel adds 1 to a counter per rank; the counters are checked at the end.
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

using batch_fn = CUresult (*)(CUstream, unsigned, CUstreamBatchMemOpParams*, unsigned);
static batch_fn batch = nullptr;

__global__ void bump(unsigned* counters, int n) {
  if (threadIdx.x < n) atomicAdd(&counters[threadIdx.x], 1u);
}

struct shaped_params {  // the size of collcomm's kernel_params<nvlink handle, float, sum>
  unsigned* counters;
  int n;
  unsigned long long spin_ns;
  char pad[2424 - 24];
};
static_assert(sizeof(shaped_params) == 2424);

__global__ void shaped(const __grid_constant__ shaped_params p) {
  if (p.spin_ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < p.spin_ns);
  }
  if (threadIdx.x == 0 && blockIdx.y < static_cast<unsigned>(p.n)) atomicAdd(&p.counters[blockIdx.y], 1u);
}

static int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

struct group {
  int n;
  shaped_params shaped{};  // events_shaped: read from the environment once, before the calls
  unsigned shaped_threads = 512;
  bool shaped_coop = true;
  std::vector<cudaStream_t> s;
  std::vector<cudaEvent_t> ready;
  cudaEvent_t done;
  cudaStream_t own;
  unsigned* words;  // arrive[n], done at [n]
  unsigned* counters;
  std::atomic<int> arrived{0};
  std::atomic<unsigned long> gen{0};
};

static void memop_write_wait(cudaStream_t s, unsigned* wr, unsigned wv, unsigned* wt, unsigned wtv) {
  CUstreamBatchMemOpParams p[2];
  std::memset(p, 0, sizeof p);
  p[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  p[0].writeValue.address = reinterpret_cast<CUdeviceptr>(wr);
  p[0].writeValue.value = wv;
  p[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  p[1].waitValue.address = reinterpret_cast<CUdeviceptr>(wt);
  p[1].waitValue.value = wtv;
  p[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  if (batch(reinterpret_cast<CUstream>(s), 2, p, 0) != CUDA_SUCCESS) std::abort();
}

// The shaped kernel on a grid of (1, p.n) blocks of the group's threads, cooperative where it says.
static void launch_shaped(const group& g, const shaped_params& p, cudaStream_t s) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1, static_cast<unsigned>(p.n), 1);
  cfg.blockDim = dim3(g.shaped_threads, 1, 1);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = g.shaped_coop ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, shaped, p));
}

static void run_rank(group& g, int i, const std::string& mode, int calls) {
  cudaStream_t s = g.s[i];
  for (int c = 1; c <= calls; ++c) {
    const unsigned k = static_cast<unsigned>(c);
    if (mode == "record+wait") {
      CK(cudaEventRecord(g.ready[i], s));
      CK(cudaStreamWaitEvent(s, g.ready[(i + 1) % g.n], 0));
      continue;
    }
    if (mode == "memop") {
      memop_write_wait(s, g.words + i, k, g.words + i, k);
      continue;
    }
    if (mode == "launch_each") {
      shaped_params p = g.shaped;
      p.counters = g.counters + i;
      p.n = 1;
      launch_shaped(g, p, s);
      continue;
    }
    if (mode == "is_capturing") {
      cudaStreamCaptureStatus st;
      CK(cudaStreamIsCapturing(s, &st));
      continue;
    }
    const bool events = mode.rfind("events", 0) == 0;
    while (g.gen.load(std::memory_order_acquire) + 1 < k) {}  // call k - 1 launched (async: ranks run ahead)
    if (events)
      CK(cudaEventRecord(g.ready[i], s));
    else
      memop_write_wait(s, g.words + i, k, g.words + g.n, k);
    const unsigned long gen = g.gen.load(std::memory_order_relaxed);
    if (g.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 < g.n) {
      if (mode == "memops_async") continue;
      while (g.gen.load(std::memory_order_acquire) == gen) {}
      if (events) CK(cudaStreamWaitEvent(s, g.done, 0));
      continue;
    }
    if (events) {
      for (int j = 0; j < g.n; ++j)
        if (j != i) CK(cudaStreamWaitEvent(s, g.ready[j], 0));
      if (mode == "events_shaped") {
        launch_shaped(g, g.shaped, s);
      } else {
        bump<<<1, 32, 0, s>>>(g.counters, g.n);
      }
      CK(cudaEventRecord(g.done, s));
    } else {
      std::vector<CUstreamBatchMemOpParams> p(static_cast<std::size_t>(g.n));
      std::memset(p.data(), 0, sizeof(p[0]) * p.size());
      for (int j = 0; j < g.n; ++j) {
        p[j].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
        p[j].waitValue.address = reinterpret_cast<CUdeviceptr>(g.words + j);
        p[j].waitValue.value = k;
        p[j].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
      }
      if (batch(reinterpret_cast<CUstream>(g.own), static_cast<unsigned>(g.n), p.data(), 0) != CUDA_SUCCESS)
        std::abort();
      bump<<<1, 32, 0, g.own>>>(g.counters, g.n);
      CUstreamBatchMemOpParams w;
      std::memset(&w, 0, sizeof w);
      w.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
      w.writeValue.address = reinterpret_cast<CUdeviceptr>(g.words + g.n);
      w.writeValue.value = k;
      if (batch(reinterpret_cast<CUstream>(g.own), 1, &w, 0) != CUDA_SUCCESS) std::abort();
    }
    g.arrived.store(0, std::memory_order_relaxed);
    g.gen.store(gen + 1, std::memory_order_release);
  }
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 8;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 4000;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuStreamBatchMemOp", reinterpret_cast<void**>(&batch), 12000, cudaEnableDefault,
                                      &q));
  if (q != cudaDriverEntryPointSuccess || !batch) return std::puts("no cuStreamBatchMemOp"), 1;
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  std::vector<std::string> modes;
  {
    std::string list = argc > 3 ? argv[3] : "record+wait,memop,is_capturing,events";
    for (std::size_t b = 0, e; b <= list.size(); b = e + 1) {
      e = list.find(',', b);
      if (e == std::string::npos) e = list.size();
      if (e > b) modes.push_back(list.substr(b, e - b));
    }
  }
  for (const std::string& m : modes) {
    const char* mode = m.c_str();
    group g;
    g.n = n;
    g.s.resize(n);
    g.ready.resize(n);
    for (int i = 0; i < n; ++i) {
      CK(cudaStreamCreateWithFlags(&g.s[i], cudaStreamNonBlocking));
      CK(cudaEventCreateWithFlags(&g.ready[i], cudaEventDisableTiming));
    }
    CK(cudaEventCreateWithFlags(&g.done, cudaEventDisableTiming));
    CK(cudaStreamCreateWithFlags(&g.own, cudaStreamNonBlocking));
    CK(cudaMalloc(&g.words, sizeof(unsigned) * (n + 1)));
    CK(cudaMalloc(&g.counters, sizeof(unsigned) * n));
    CK(cudaMemset(g.words, 0, sizeof(unsigned) * (n + 1)));
    CK(cudaMemset(g.counters, 0, sizeof(unsigned) * n));
    CK(cudaDeviceSynchronize());
    g.shaped.counters = g.counters;
    g.shaped.n = n;
    g.shaped.spin_ns = static_cast<unsigned long long>(env_int("PROBE_SPIN_NS", 0));
    g.shaped_threads = static_cast<unsigned>(env_int("PROBE_THREADS", 512));
    g.shaped_coop = env_int("PROBE_COOP", 1) != 0;
    std::vector<double> us;
    for (int rep = 0; rep < 3; ++rep) {
      // fresh counts per repetition: words restart at 0
      CK(cudaMemset(g.words, 0, sizeof(unsigned) * (n + 1)));
      CK(cudaDeviceSynchronize());
      g.arrived = 0;
      g.gen = 0;
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> th;
      for (int i = 0; i < n; ++i) th.emplace_back(run_rank, std::ref(g), i, std::string(mode), calls);
      for (auto& t : th) t.join();
      CK(cudaDeviceSynchronize());
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls);
    }
    std::vector<unsigned> cnt(static_cast<std::size_t>(n));
    CK(cudaMemcpy(cnt.data(), g.counters, sizeof(unsigned) * n, cudaMemcpyDeviceToHost));
    const bool launches = std::strncmp(mode, "events", 6) == 0 || std::strncmp(mode, "memops", 6) == 0 ||
                          std::strcmp(mode, "launch_each") == 0;
    bool ok = true;
    for (unsigned c : cnt) ok &= c == (launches ? 3u * static_cast<unsigned>(calls) : 0u);
    std::printf("%-14s ranks %d: %7.2f %7.2f %7.2f us per call%s\n", mode, n, us[0], us[1], us[2],
                ok ? "" : "  COUNTS WRONG");
    for (int i = 0; i < n; ++i) {
      cudaStreamDestroy(g.s[i]);
      cudaEventDestroy(g.ready[i]);
    }
    cudaEventDestroy(g.done);
    cudaStreamDestroy(g.own);
    cudaFree(g.words);
    cudaFree(g.counters);
  }
  return 0;
}
