// bench/probes/ipc_pingpong.cu — can spinning kernels of two processes on ONE GPU make progress
// together (CUDA IPC memory, no MPS)? Forks two processes before CUDA starts; process 0 exports a
// device buffer of two counters with cudaIpcGetMemHandle, process 1 opens it; both run a
// one-thread kernel that ping-pongs `iters` times with system-scope atomics (bounded spins).
// Prints the round-trip time, or how far they got before the bound.
//   ipc_pingpong [iters] [spin_ms]
#include <cuda/atomic>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>

__global__ void pingpong(unsigned long long* words, int me, int start, int iters, unsigned long long spin_ns,
                         int* done) {
  cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> ping(words[0]), pong(words[1]);
  auto now = [] {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  };
  for (int i = start + 1; i <= start + iters; ++i) {
    if (me == 0) {
      ping.store(i, cuda::memory_order_release);
      const auto t0 = now();
      while (pong.load(cuda::memory_order_acquire) < static_cast<unsigned long long>(i))
        if (now() - t0 > spin_ns) {
          *done = -(i - start);
          return;
        }
    } else {
      const auto t0 = now();
      while (ping.load(cuda::memory_order_acquire) < static_cast<unsigned long long>(i))
        if (now() - t0 > spin_ns) {
          *done = -(i - start);
          return;
        }
      pong.store(i, cuda::memory_order_release);
    }
  }
  *done = iters;  // (a timed-out wait leaves -i: the message it waited for)
}

#define OK(x)                                                          \
  do {                                                                 \
    cudaError_t e = (x);                                               \
    if (e != cudaSuccess) {                                            \
      std::printf("proc %d: %s: %s\n", me, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 1000;
  const double spin_ms = argc > 2 ? std::atof(argv[2]) : 10000;
  int pipefd[2];
  if (pipe(pipefd) != 0) return 1;
  const pid_t child = fork();
  const int me = child == 0 ? 1 : 0;
  unsigned long long* words = nullptr;
  if (me == 0) {
    OK(cudaMalloc(&words, 64));
    OK(cudaMemset(words, 0, 64));
    cudaIpcMemHandle_t h;
    OK(cudaIpcGetMemHandle(&h, words));
    if (write(pipefd[1], &h, sizeof h) != sizeof h) return 1;
  } else {
    cudaIpcMemHandle_t h;
    if (read(pipefd[0], &h, sizeof h) != sizeof h) return 1;
    OK(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&words), h, cudaIpcMemLazyEnablePeerAccess));
  }
  int* done = nullptr;
  OK(cudaMallocManaged(&done, sizeof(int)));
  *done = 0;
  for (int round = 0; round < 2; ++round) {  // round 0 warms up (module load), round 1 is timed
    const auto t0 = std::chrono::steady_clock::now();
    pingpong<<<1, 1>>>(words, me, round * iters, iters, static_cast<unsigned long long>(spin_ms * 1e6),
                       done);  // counters only grow
    OK(cudaDeviceSynchronize());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("proc %d round %d: done=%d of %d in %.3f s: %.2f us per round trip\n", me, round, *done, iters, s,
                s * 1e6 / iters);
    std::fflush(stdout);
    if (*done < 0) break;
  }
  if (me == 0) {
    int st = 0;
    waitpid(child, &st, 0);
  }
  return 0;
}
