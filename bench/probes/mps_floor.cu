// bench/probes/mps_floor.cu — what N processes on one GPU pay per kernel replayed from a CUDA graph
// when they run at once (under MPS), with nothing of collcomm: the floor under a world of
// processes' small calls from a graph (bench/RESULTS.md, "Processes: the floor").
//
//   mps_floor N [mode=empty|meet|code] [calls=200] [reps=9] [launch=graph|stream] [params=0] [smem=0]
//             [threads=512] [code_kb=8] [passes=1]
//
// N processes (forked before any CUDA call) each capture `calls` launches of a one-block kernel of
// `threads` threads into a graph on a stream of their own, replay it once untimed, then `reps` times
// between two CUDA events, every replay started by all processes together (a spin barrier in
// shared host memory); with `stream`, the `calls` launches themselves are timed the same way,
// stream-launched. Printed per process: µs per launch, the median and the range of reps.
//   empty  the kernel does nothing
//   meet   the kernel meets every process's kernel of the same call: thread 0 adds 1 to a counter
//          in process 0's memory (CUDA IPC) and spins until it reaches N x (calls so far) — the
//          least a per-call meeting of processes costs (one atomic, one poll); every launch checked
//   params  bytes of kernel parameters besides the pointers (0, 8, 256, 2432 or 4096), read by thread 0
//           (first and last byte): what a launch's parameter block costs when processes launch at once
//   smem    bytes of static shared memory the kernel declares and thread 0 touches (0 or 4096)
//   threads the kernels' block size (1..1024): what a launch of fewer warps saves
//   code   the kernel's thread 0 runs `code_kb` KiB (2, 8 or 32) of straight-line instructions
//          (eight independent chains of integer multiply-adds, 16 bytes each) `passes` times: what
//          running code costs a launch, the first pass (instructions fetched cold, if a launch finds
//          them so) against the later ones
#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::_Exit(1);                                                                           \
    }                                                                                          \
  } while (0)

namespace {

constexpr int max_procs = 64;
int block_threads = 512;  // threads of every kernel launched (argument `threads`)

// Shared by the processes (an anonymous shared mapping made before fork).
struct page {
  std::atomic<int> arrived;
  cudaIpcMemHandle_t counter;
  double median[max_procs], lo[max_procs], hi[max_procs];
  unsigned long long wrong[max_procs];
};

// Every process arrives; returns once all `n` have arrived `round` times (gives up after 60 s).
void meet_host(page* p, int n, int round) {
  p->arrived.fetch_add(1);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (p->arrived.load() < n * round)
    if (std::chrono::steady_clock::now() > end) std::_Exit(2);
}

template <int P>
struct blob {
  unsigned char b[P];
};

// A kernel of P bytes of parameters (none if P is 0) and S bytes of static shared memory (none if
// 0); thread 0 reads the parameters' first and last bytes and touches the shared memory. With
// `meet`, thread 0 then meets as meet_kernel does (below).
template <int P, int S, bool Meet>
__global__ void shaped_kernel(const __grid_constant__ blob<P> b, unsigned long long* counter, unsigned long long* calls,
                              unsigned long long* bad, int n) {
  if (threadIdx.x != 0) return;
  unsigned seen = b.b[0] + b.b[P - 1];
  if constexpr (S > 0) {
    __shared__ volatile unsigned char s[S];
    s[seen % S] = 1;
    seen += s[(seen + 1) % S];
  }
  if (seen == 0xFFFFu) ++*bad;  // never (the bytes are zero): keeps the loads
  if constexpr (Meet) {
    const unsigned long long k = *calls;
    *calls = k + 1;
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> c(*counter);
    const unsigned long long before = c.fetch_add(1, cuda::std::memory_order_relaxed);
    if (before >= (k + 1) * n) ++*bad;
    while (c.load(cuda::std::memory_order_relaxed) < (k + 1) * n) {}
  }
}

template <int P, int S>
void launch_shaped(bool meet, cudaStream_t s, unsigned long long* counter, unsigned long long* mine, int n) {
  const blob<P> b{};
  if (meet)
    shaped_kernel<P, S, true><<<1, block_threads, 0, s>>>(b, counter, mine, mine + 1, n);
  else
    shaped_kernel<P, S, false><<<1, block_threads, 0, s>>>(b, counter, mine, mine + 1, n);
}

// The shaped kernel of P bytes of parameters, with 4 KiB of static shared memory or none.
template <int P>
void launch_sized(bool meet, bool shared, cudaStream_t s, unsigned long long* counter, unsigned long long* mine,
                  int n) {
  if (shared)
    launch_shaped<P, 4096>(meet, s, counter, mine, n);
  else
    launch_shaped<P, 0>(meet, s, counter, mine, n);
}

__global__ void empty_kernel() {}

// Lines: 128-byte lines of instructions per pass (8 multiply-adds each).
template <int Lines>
__global__ void code_kernel(unsigned long long* bad, unsigned seed, int passes) {
  if (threadIdx.x != 0) return;
  unsigned x[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) x[c] = seed + c;
#pragma unroll 1
  for (int p = 0; p < passes; ++p) {
#pragma unroll
    for (int i = 0; i < Lines; ++i)
#pragma unroll
      for (int c = 0; c < 8; ++c) asm volatile("mad.lo.u32 %0, %0, %1, %2;" : "+r"(x[c]) : "r"(seed), "r"(p));
  }
  unsigned h = 0;
#pragma unroll
  for (int c = 0; c < 8; ++c) h ^= x[c];
  if (h == 0x9e3779b9u) ++*bad;  // keeps the chains (never checked as wrong: bad is not read back)
}
int code_kb = 8, passes = 1;  // arguments of mode `code`

// Thread 0: call k of this process (its own count) arrives at the shared counter and waits for
// all n. `bad` counts launches that saw the counter past what this call can reach.
__global__ void meet_kernel(unsigned long long* counter, unsigned long long* calls, unsigned long long* bad, int n) {
  if (threadIdx.x != 0) return;
  const unsigned long long k = *calls;
  *calls = k + 1;
  cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> c(*counter);
  const unsigned long long before = c.fetch_add(1, cuda::std::memory_order_relaxed);
  if (before >= (k + 1) * n) ++*bad;
  while (c.load(cuda::std::memory_order_relaxed) < (k + 1) * n) {}
}

// The launch of one call: the plain kernels without parameters or shared memory, else the shaped
// ones (8 bytes of parameters where only shared memory is asked for).
void launch_one(bool meet, int params, int smem, cudaStream_t s, unsigned long long* counter, unsigned long long* mine,
                int n) {
  if (code_kb > 0) {
    switch (code_kb) {
      case 2:
        return code_kernel<16><<<1, block_threads, 0, s>>>(mine + 1, 12345u, passes);
      case 8:
        return code_kernel<64><<<1, block_threads, 0, s>>>(mine + 1, 12345u, passes);
      default:
        return code_kernel<256><<<1, block_threads, 0, s>>>(mine + 1, 12345u, passes);
    }
  }
  const bool shared = smem > 0;
  switch (params) {
    case 0:
      if (shared) return launch_sized<8>(meet, shared, s, counter, mine, n);
      if (meet)
        meet_kernel<<<1, block_threads, 0, s>>>(counter, mine, mine + 1, n);
      else
        empty_kernel<<<1, block_threads, 0, s>>>();
      return;
    case 256:
      return launch_sized<256>(meet, shared, s, counter, mine, n);
    case 2432:
      return launch_sized<2432>(meet, shared, s, counter, mine, n);
    case 4096:
      return launch_sized<4096>(meet, shared, s, counter, mine, n);
    default:
      return launch_sized<8>(meet, shared, s, counter, mine, n);
  }
}

void run_process(page* p, int me, int n, bool meet, int calls, int reps, bool graph, int params, int smem) {
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  unsigned long long *counter = nullptr, *mine = nullptr;
  int round = 0;
  if (meet) {
    if (me == 0) {
      CK(cudaMalloc(&counter, sizeof(unsigned long long)));
      CK(cudaMemset(counter, 0, sizeof(unsigned long long)));
      CK(cudaIpcGetMemHandle(&p->counter, counter));
    }
    meet_host(p, n, ++round);
    if (me != 0)
      CK(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&counter), p->counter, cudaIpcMemLazyEnablePeerAccess));
  }
  if (meet || code_kb > 0) {  // this process's call count and count of bad launches
    CK(cudaMalloc(&mine, 2 * sizeof(unsigned long long)));
    CK(cudaMemset(mine, 0, 2 * sizeof(unsigned long long)));
  }
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  auto launch_all = [&] {
    for (int i = 0; i < calls; ++i) launch_one(meet, params, smem, s, counter, mine, n);
  };
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  launch_all();
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaDeviceSynchronize());
  meet_host(p, n, ++round);
  CK(cudaGraphLaunch(ge, s));  // untimed
  CK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    meet_host(p, n, ++round);
    CK(cudaEventRecord(a, s));
    if (graph)
      CK(cudaGraphLaunch(ge, s));
    else
      launch_all();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(1000.0 * ms / calls);
  }
  std::sort(us.begin(), us.end());
  p->median[me] = us[us.size() / 2];
  p->lo[me] = us.front();
  p->hi[me] = us.back();
  p->wrong[me] = 0;
  if (meet) {
    unsigned long long h[2];
    CK(cudaMemcpy(h, mine, sizeof h, cudaMemcpyDeviceToHost));
    p->wrong[me] = h[1] + (h[0] != static_cast<unsigned long long>(calls) * (reps + 1) ? 1 : 0);
  }
  meet_host(p, n, ++round);  // no process unmaps the counter while a peer's kernel may poll it
  if (meet && me != 0) CK(cudaIpcCloseMemHandle(counter));
  meet_host(p, n, ++round);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2;
  const std::string mode = argc > 2 ? argv[2] : "empty";
  const int calls = argc > 3 ? std::atoi(argv[3]) : 200;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 9;
  const std::string launch = argc > 5 ? argv[5] : "graph";
  const int params = argc > 6 ? std::atoi(argv[6]) : 0;
  const int smem = argc > 7 ? std::atoi(argv[7]) : 0;
  block_threads = argc > 8 ? std::atoi(argv[8]) : 512;
  code_kb = mode == "code" ? (argc > 9 ? std::atoi(argv[9]) : 8) : 0;
  passes = argc > 10 ? std::atoi(argv[10]) : 1;
  if (n < 1 || n > max_procs || calls < 1 || reps < 1 || (mode != "empty" && mode != "meet" && mode != "code") ||
      (mode == "code" && ((code_kb != 2 && code_kb != 8 && code_kb != 32) || passes < 1 || passes > 64)) ||
      (launch != "graph" && launch != "stream") ||
      (params != 0 && params != 8 && params != 256 && params != 2432 && params != 4096) ||
      (smem != 0 && smem != 4096) || block_threads < 1 || block_threads > 1024) {
    std::fprintf(
        stderr,
        "usage: mps_floor N(1..%d) [empty|meet|code] [calls] [reps] [graph|stream] [params: 0|8|256|2432|4096] "
        "[smem: 0|4096] [threads: 1..1024] [code_kb: 2|8|32] [passes: 1..64]\n",
        max_procs);
    return 2;
  }
  void* m = mmap(nullptr, sizeof(page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 2;
  page* p = new (m) page{};
  std::vector<pid_t> kids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      run_process(p, i, n, mode == "meet", calls, reps, launch == "graph", params, smem);
      std::_Exit(0);
    }
    kids.push_back(pid);
  }
  int bad = 0;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      bad = 1;
    }
  }
  std::printf("mps_floor n=%d mode=%s launch=%s calls=%d reps=%d params=%d smem=%d threads=%d", n, mode.c_str(),
              launch.c_str(), calls, reps, params, smem, block_threads);
  if (code_kb > 0) std::printf(" code_kb=%d passes=%d", code_kb, passes);
  std::printf(":");
  if (bad) {
    std::printf(" a process failed\n");
    return 1;
  }
  unsigned long long wrong = 0;
  for (int i = 0; i < n; ++i) {
    std::printf(" [%d] %.2f (%.2f-%.2f)", i, p->median[i], p->lo[i], p->hi[i]);
    wrong += p->wrong[i];
  }
  std::printf(" us per launch; wrong %llu\n", wrong);
  return wrong == 0 ? 0 : 1;
}
