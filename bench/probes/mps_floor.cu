// bench/probes/mps_floor.cu — what N processes on one GPU pay per kernel replayed from a CUDA graph
// when they run at once (under MPS), with nothing of collcomm: the floor under a world of
// processes' small calls from a graph (bench/RESULTS.md, "Processes: the floor").
//
//   mps_floor N [mode=empty|meet|code|jump] [calls=200] [reps=9] [launch=graph|stream] [params=0] [smem=0]
//             [threads=512] [code_kb=8] [passes=1] [spread=0] [pdl=0]
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
//   jump   as `code` with 8 KiB, but each 128-byte line ends in a taken branch 1 KiB ahead (or back
//          to the next column of lines), so no line follows the one before it: what a taken branch
//          to a line not fetched yet costs, against `code`'s straight run
//   spread 1: the kernels of modes meet, code and jump ask for 116 KiB of dynamic shared memory,
//          so that no two blocks (of any process) share an SM
//   pdl    1: modes empty and meet (no params, no smem) launch as programmatic dependents of the
//          stream's previous launch: a kernel waits (griddepcontrol.wait) for the previous one to end
//          before it reads anything, then lets the next be placed (the empty kernel at once, the
//          meeting one once its call has met) — what collcomm's programmatic launches can save
// Each launch of modes meet, code and jump counts the SM it ran on; every process prints how many
// SMs its launches used and which it used most (processes whose launches share SMs run their
// warps on the same schedulers).
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
  int sms_used[max_procs], top_sm[max_procs];  // SMs the process's launches ran on; the one most used
  double top_share[max_procs];                 // its share of the launches
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

bool pdl = false;  // argument `pdl`

// Programmatic dependent launch's two instructions (the CUDA runtime's; compute capability 9.0 on).
__device__ __forceinline__ void wait_for_previous() {
#if __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}
__device__ __forceinline__ void let_next_be_placed() {
#if __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// Mode empty with pdl: waits for the previous launch, then lets the next be placed.
__global__ void empty_pdl_kernel() {
  wait_for_previous();
  let_next_be_placed();
}

// Launches k (one block of block_threads) as a programmatic dependent of the stream's previous launch.
template <class... Params, class... Args>
void launch_dependent(void (*k)(Params...), size_t smem, cudaStream_t s, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(static_cast<unsigned>(block_threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute at{};
  at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &at;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, k, args...));
}

// Counts the launch on the SM it runs on (sms: 256 counters).
__device__ void count_sm(unsigned* sms) {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  atomicAdd(&sms[id & 255], 1u);
}

// Lines: 128-byte lines of instructions per pass (8 multiply-adds each).
template <int Lines>
__global__ void code_kernel(unsigned long long* bad, unsigned* sms, unsigned seed, int passes) {
  if (threadIdx.x != 0) return;
  count_sm(sms);
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

// Mode jump's program: 64 lines of seven multiply-adds and a branch, laid out as 8 rows of 8
// (row r, column c at r * 1 KiB + c * 128 B) and run column by column, so each line's branch
// (predicate p, always true) goes 1 KiB ahead, or from the last row back to the first row's next
// column. With p false the lines would run in layout order, so the layout is ptxas's to keep.
#define JUMP_LINE(r, c, nr, nc)                                                                \
  "J" #r "_" #c                                                                                \
  ":\n\t"                                                                                      \
  "mad.lo.u32 %0, %0, %8, %9;\n\tmad.lo.u32 %1, %1, %8, %9;\n\tmad.lo.u32 %2, %2, %8, %9;\n\t" \
  "mad.lo.u32 %3, %3, %8, %9;\n\tmad.lo.u32 %4, %4, %8, %9;\n\tmad.lo.u32 %5, %5, %8, %9;\n\t" \
  "mad.lo.u32 %6, %6, %8, %9;\n\t@p bra J" #nr "_" #nc ";\n\t"
#define JUMP_ROW(r, nr)                                                                                              \
  JUMP_LINE(r, 0, nr, 0)                                                                                             \
  JUMP_LINE(r, 1, nr, 1) JUMP_LINE(r, 2, nr, 2) JUMP_LINE(r, 3, nr, 3) JUMP_LINE(r, 4, nr, 4) JUMP_LINE(r, 5, nr, 5) \
      JUMP_LINE(r, 6, nr, 6) JUMP_LINE(r, 7, nr, 7)
#define JUMP_LAST_ROW                                                                                           \
  JUMP_LINE(7, 0, 0, 1)                                                                                         \
  JUMP_LINE(7, 1, 0, 2) JUMP_LINE(7, 2, 0, 3) JUMP_LINE(7, 3, 0, 4) JUMP_LINE(7, 4, 0, 5) JUMP_LINE(7, 5, 0, 6) \
      JUMP_LINE(7, 6, 0, 7) JUMP_LINE(7, 7, 8, 8)

__global__ void jump_kernel(unsigned long long* bad, unsigned* sms, unsigned seed, int passes) {
  if (threadIdx.x != 0) return;
  count_sm(sms);
  unsigned x[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) x[c] = seed + c;
#pragma unroll 1
  for (int p = 0; p < passes; ++p)
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ge.s32 p, %9, 0;\n\t" JUMP_ROW(0, 1) JUMP_ROW(1, 2) JUMP_ROW(2, 3)
                     JUMP_ROW(3, 4) JUMP_ROW(4, 5) JUMP_ROW(5, 6) JUMP_ROW(6, 7) JUMP_LAST_ROW "J8_8:\n\t}"
                 : "+r"(x[0]), "+r"(x[1]), "+r"(x[2]), "+r"(x[3]), "+r"(x[4]), "+r"(x[5]), "+r"(x[6]), "+r"(x[7])
                 : "r"(seed), "r"(p));
  unsigned h = 0;
#pragma unroll
  for (int c = 0; c < 8; ++c) h ^= x[c];
  if (h == 0x9e3779b9u) ++*bad;
}
#undef JUMP_LINE
#undef JUMP_ROW
#undef JUMP_LAST_ROW
int code_kb = 8, passes = 1;  // arguments of modes `code` and `jump`
bool jump = false;            // mode `jump`
size_t spread_bytes = 0;      // dynamic shared memory of the meet, code and jump kernels (argument `spread`)
constexpr size_t spread_size = 116 * 1024;

// Thread 0: call k of this process (its own count) arrives at the shared counter and waits for
// all n. `bad` counts launches that saw the counter past what this call can reach. Pdl: it first
// waits for the previous launch (whose count it reads), and lets the next be placed once all met.
template <bool Pdl = false>
__global__ void meet_kernel(unsigned long long* counter, unsigned long long* calls, unsigned long long* bad,
                            unsigned* sms, int n) {
  if (threadIdx.x != 0) return;
  if constexpr (Pdl) wait_for_previous();
  count_sm(sms);
  const unsigned long long k = *calls;
  *calls = k + 1;
  cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> c(*counter);
  const unsigned long long before = c.fetch_add(1, cuda::std::memory_order_relaxed);
  if (before >= (k + 1) * n) ++*bad;
  while (c.load(cuda::std::memory_order_relaxed) < (k + 1) * n) {}
  if constexpr (Pdl) let_next_be_placed();
}

// The launch of one call: the plain kernels without parameters or shared memory, else the shaped
// ones (8 bytes of parameters where only shared memory is asked for).
void launch_one(bool meet, int params, int smem, cudaStream_t s, unsigned long long* counter, unsigned long long* mine,
                int n) {
  unsigned* sms = reinterpret_cast<unsigned*>(mine + 2);
  if (jump) return jump_kernel<<<1, block_threads, spread_bytes, s>>>(mine + 1, sms, 12345u, passes);
  if (code_kb > 0) {
    switch (code_kb) {
      case 2:
        return code_kernel<16><<<1, block_threads, spread_bytes, s>>>(mine + 1, sms, 12345u, passes);
      case 8:
        return code_kernel<64><<<1, block_threads, spread_bytes, s>>>(mine + 1, sms, 12345u, passes);
      default:
        return code_kernel<256><<<1, block_threads, spread_bytes, s>>>(mine + 1, sms, 12345u, passes);
    }
  }
  const bool shared = smem > 0;
  switch (params) {
    case 0:
      if (shared) return launch_sized<8>(meet, shared, s, counter, mine, n);
      if (pdl && meet)
        launch_dependent(meet_kernel<true>, spread_bytes, s, counter, mine, mine + 1, sms, n);
      else if (pdl)
        launch_dependent(empty_pdl_kernel, 0, s);
      else if (meet)
        meet_kernel<<<1, block_threads, spread_bytes, s>>>(counter, mine, mine + 1, sms, n);
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
  // This process's call count, count of bad launches and launches per SM (256 counters).
  constexpr size_t mine_bytes = 2 * sizeof(unsigned long long) + 256 * sizeof(unsigned);
  if (meet || code_kb > 0) {
    CK(cudaMalloc(&mine, mine_bytes));
    CK(cudaMemset(mine, 0, mine_bytes));
  }
  if (spread_bytes > 0) {
    const int a = cudaFuncAttributeMaxDynamicSharedMemorySize, b = static_cast<int>(spread_bytes);
    CK(cudaFuncSetAttribute(meet_kernel<false>, static_cast<cudaFuncAttribute>(a), b));
    CK(cudaFuncSetAttribute(meet_kernel<true>, static_cast<cudaFuncAttribute>(a), b));
    CK(cudaFuncSetAttribute(jump_kernel, static_cast<cudaFuncAttribute>(a), b));
    CK(cudaFuncSetAttribute(code_kernel<16>, static_cast<cudaFuncAttribute>(a), b));
    CK(cudaFuncSetAttribute(code_kernel<64>, static_cast<cudaFuncAttribute>(a), b));
    CK(cudaFuncSetAttribute(code_kernel<256>, static_cast<cudaFuncAttribute>(a), b));
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
  p->sms_used[me] = 0;
  if (mine) {
    unsigned counts[256];
    CK(cudaMemcpy(counts, mine + 2, sizeof counts, cudaMemcpyDeviceToHost));
    unsigned long long total = 0;
    int top = 0;
    for (int i = 0; i < 256; ++i) {
      total += counts[i];
      p->sms_used[me] += counts[i] > 0;
      if (counts[i] > counts[top]) top = i;
    }
    p->top_sm[me] = top;
    p->top_share[me] = total ? static_cast<double>(counts[top]) / static_cast<double>(total) : 0.0;
  }
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
  jump = mode == "jump";
  code_kb = mode == "code" || jump ? (argc > 9 ? std::atoi(argv[9]) : 8) : 0;
  passes = argc > 10 ? std::atoi(argv[10]) : 1;
  const int spread = argc > 11 ? std::atoi(argv[11]) : 0;
  spread_bytes = spread == 1 ? spread_size : 0;
  const int pdl_arg = argc > 12 ? std::atoi(argv[12]) : 0;
  pdl = pdl_arg == 1;
  if (n < 1 || n > max_procs || calls < 1 || reps < 1 ||
      (mode != "empty" && mode != "meet" && mode != "code" && !jump) ||
      ((mode == "code" || jump) && ((code_kb != 2 && code_kb != 8 && code_kb != 32) || passes < 1 || passes > 64)) ||
      (jump && code_kb != 8) || (spread != 0 && spread != 1) || (spread == 1 && mode == "empty") ||
      (launch != "graph" && launch != "stream") ||
      (params != 0 && params != 8 && params != 256 && params != 2432 && params != 4096) ||
      (smem != 0 && smem != 4096) || block_threads < 1 || block_threads > 1024 || (pdl_arg != 0 && pdl_arg != 1) ||
      (pdl && (params != 0 || smem != 0 || (mode != "empty" && mode != "meet")))) {
    std::fprintf(
        stderr,
        "usage: mps_floor N(1..%d) [empty|meet|code|jump] [calls] [reps] [graph|stream] [params: 0|8|256|2432|4096] "
        "[smem: 0|4096] [threads: 1..1024] [code_kb: 2|8|32 (jump: 8)] [passes: 1..64] [spread: 0|1 (not empty)] "
        "[pdl: 0|1 (empty, meet; params 0, smem 0)]\n",
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
  if (spread == 1) std::printf(" spread=1");
  if (pdl) std::printf(" pdl=1");
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
  if (mode != "empty") {
    std::printf("  SMs used (most used: share):");
    for (int i = 0; i < n; ++i)
      std::printf(" [%d] %d (%d: %.0f%%)", i, p->sms_used[i], p->top_sm[i], 100 * p->top_share[i]);
    std::printf("\n");
  }
  return wrong == 0 ? 0 : 1;
}
