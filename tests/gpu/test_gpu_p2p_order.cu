// Separate send and recv calls among ranks of one GPU (label gpu). The ranks of a GPU launch their
// i-th calls together, so MPI's even/odd order (even ranks send then receive, odd ranks receive
// then send) puts a send and a receive that only meet in different launches: it works while the
// unreceived messages fit the connections' slots, and beyond that it is refused at once — on
// every rank, naming both ranks and saying to use send_recv — instead of hanging until the
// timeout. In a collcomm::group the same calls become one send_recv per rank and complete at
// every size. Fresh random data, poisoned outputs, every element checked; the world stays usable.
#include <collcomm/gpu.hpp>

#include <doctest/doctest.h>

#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace collcomm;

namespace {

std::uint64_t seed_now() {
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
         std::random_device{}();
}

// n ranks on the current GPU, each in its own thread, MPI's even/odd exchange around a ring of
// `count` floats: rank r sends to r+1 and receives from r-1. Returns each rank's error ("" none);
// `got` holds what each rank received. in_group: each rank's two calls are made in a collcomm::group.
std::vector<std::string> even_odd_ring(gpu::world& w, index_t count, const std::vector<std::vector<float>>& x,
                                       std::vector<std::vector<float>>& got, bool in_group) {
  const int n = w.size();
  std::barrier sync(n);
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(w.device_of(r));
      communicator<transport::nvlink> comm(w, r);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      float *in = nullptr, *out = nullptr;
      cudaMalloc(&in, count * sizeof(float));
      cudaMalloc(&out, (count + 1) * sizeof(float));
      cudaMemcpy(in, x[static_cast<std::size_t>(r)].data(), count * sizeof(float), cudaMemcpyHostToDevice);
      cudaMemset(out, 0xA5, (count + 1) * sizeof(float));  // poison, one past the end too
      gpu::preload(comm, [&] { send_recv(comm, in, out, count, (r + 1) % n, (r + n - 1) % n, s); });
      cudaDeviceSynchronize();
      sync.arrive_and_wait();
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      try {
        auto calls = [&] {
          if (r % 2 == 0) {
            send(comm, in, count, next, s);
            recv(comm, out, count, prev, s);
          } else {
            recv(comm, out, count, prev, s);
            send(comm, in, count, next, s);
          }
        };
        if (in_group)
          collcomm::group(calls);
        else
          calls();
        cudaStreamSynchronize(s);
        comm.check();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
      cudaStreamSynchronize(s);
      sync.arrive_and_wait();
      got[static_cast<std::size_t>(r)].resize(static_cast<std::size_t>(count) + 1);
      cudaMemcpy(got[static_cast<std::size_t>(r)].data(), out, (count + 1) * sizeof(float), cudaMemcpyDeviceToHost);
      sync.arrive_and_wait();  // nobody frees while a peer's kernel may run
      cudaFree(in);
      cudaFree(out);
      cudaStreamDestroy(s);
    });
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace

TEST_CASE("send and recv in MPI's even/odd order among 3 ranks of one GPU") {
  const int n = 3;
  gpu::options o;
  o.channels = 2;
  o.timeout = std::chrono::milliseconds(60000);
  gpu::world w(n, {}, o);
  const std::uint64_t capacity = static_cast<std::uint64_t>(o.channels) * o.slots * (o.slot_bytes / 2);
  std::mt19937_64 g(seed_now());
  std::uniform_int_distribution<int> v(-1000, 1000);

  for (const bool in_group : {false, true})
    for (const index_t count :
         {index_t{1}, index_t{1031}, index_t{capacity / sizeof(float) / 2}, index_t{capacity / sizeof(float) * 4}}) {
      CAPTURE(in_group);
      CAPTURE(count);
      std::vector<std::vector<float>> x(n, std::vector<float>(static_cast<std::size_t>(count)));
      for (auto& row : x)
        for (auto& e : row) e = static_cast<float>(v(g));
      std::vector<std::vector<float>> got(n);
      const auto t0 = std::chrono::steady_clock::now();
      const auto errors = even_odd_ring(w, count, x, got, in_group);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const bool fits = in_group || static_cast<std::uint64_t>(count) * sizeof(float) <= capacity;
      for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        const auto& e = errors[static_cast<std::size_t>(r)];
        const auto& out = got[static_cast<std::size_t>(r)];
        if (fits) {
          CHECK(e == "");
          const auto& want = x[static_cast<std::size_t>((r + n - 1) % n)];
          std::size_t wrong = 0;
          for (std::size_t i = 0; i < want.size(); ++i) wrong += out[i] != want[i];
          CHECK(wrong == 0);
        } else {
          // Refused before anything moved: every rank's error names send_recv and group, the output untouched.
          CHECK(e.find("send_recv(comm, send, recv, count, send_peer, recv_peer, stream)") != std::string::npos);
          CHECK(e.find("collcomm::group") != std::string::npos);
          std::uint32_t first = 0;
          std::memcpy(&first, out.data(), sizeof first);
          CHECK(first == 0xA5A5A5A5u);
        }
        std::uint32_t past = 0;
        std::memcpy(&past, out.data() + count, sizeof past);
        CHECK(past == 0xA5A5A5A5u);
      }
      if (!fits) CHECK(seconds < 30.0);  // at once, not after the 60 s timeout
    }

  // The world is still usable: a send_recv ring of fresh data.
  const index_t count = capacity / sizeof(float) * 4;
  std::vector<std::vector<float>> x(n, std::vector<float>(static_cast<std::size_t>(count)));
  for (auto& row : x)
    for (auto& e : row) e = static_cast<float>(v(g));
  std::vector<std::string> errors(n);
  std::vector<std::vector<float>> got(n, std::vector<float>(static_cast<std::size_t>(count)));
  std::barrier sync(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        communicator<transport::nvlink> comm(w, r);
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        float *in = nullptr, *out = nullptr;
        cudaMalloc(&in, count * sizeof(float));
        cudaMalloc(&out, count * sizeof(float));
        cudaMemcpy(in, x[static_cast<std::size_t>(r)].data(), count * sizeof(float), cudaMemcpyHostToDevice);
        cudaMemset(out, 0xA5, count * sizeof(float));
        cudaDeviceSynchronize();
        sync.arrive_and_wait();
        send_recv(comm, in, out, count, (r + 1) % n, (r + n - 1) % n, s);
        cudaStreamSynchronize(s);
        comm.check();
        cudaMemcpy(got[static_cast<std::size_t>(r)].data(), out, count * sizeof(float), cudaMemcpyDeviceToHost);
        sync.arrive_and_wait();
        cudaFree(in);
        cudaFree(out);
        cudaStreamDestroy(s);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(errors[static_cast<std::size_t>(r)] == "");
    std::size_t wrong = 0;
    for (index_t i = 0; i < count; ++i)
      wrong += got[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] !=
               x[static_cast<std::size_t>((r + n - 1) % n)][static_cast<std::size_t>(i)];
    CHECK(wrong == 0);
  }
}

// A group with several peers and a message to oneself, the calls in a different order on even and
// odd ranks, messages larger than the connections hold: step d of the group sends to r + d and
// receives from r - d on every rank, so the ranks' launches match.
TEST_CASE("group: both directions of a ring and a copy to oneself among 4 ranks of one GPU") {
  const int n = 4;
  gpu::options o;
  o.channels = 2;
  o.timeout = std::chrono::milliseconds(60000);
  gpu::world w(n, {}, o);
  const index_t count =
      static_cast<index_t>(static_cast<std::uint64_t>(o.channels) * o.slots * o.slot_bytes / sizeof(float) * 3 + 5);
  std::mt19937_64 g(seed_now());
  std::uniform_int_distribution<int> v(-1000, 1000);
  std::vector<std::vector<float>> x(
      n, std::vector<float>(static_cast<std::size_t>(3 * count)));  // to next, to prev, to itself
  for (auto& row : x)
    for (auto& e : row) e = static_cast<float>(v(g));
  std::vector<std::string> errors(n);
  std::vector<std::vector<float>> got(n);  // from prev, from next, from itself
  std::barrier sync(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(w.device_of(r));
      communicator<transport::nvlink> comm(w, r);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      float *in = nullptr, *out = nullptr;
      cudaMalloc(&in, 3 * count * sizeof(float));
      cudaMalloc(&out, 3 * count * sizeof(float));
      cudaMemcpy(in, x[static_cast<std::size_t>(r)].data(), 3 * count * sizeof(float), cudaMemcpyHostToDevice);
      cudaMemset(out, 0xA5, 3 * count * sizeof(float));
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      gpu::preload(comm, [&] { send_recv(comm, in, out, count, next, prev, s); });
      cudaDeviceSynchronize();
      sync.arrive_and_wait();
      try {
        collcomm::group([&] {
          if (r % 2 == 0) {
            recv(comm, out + count, count, next, s);
            send(comm, in, count, next, s);
            recv(comm, out + 2 * count, count, r, s);
            send(comm, in + count, count, prev, s);
            send(comm, in + 2 * count, count, r, s);
            recv(comm, out, count, prev, s);
          } else {
            send(comm, in + 2 * count, count, r, s);
            send(comm, in + count, count, prev, s);
            recv(comm, out, count, prev, s);
            send(comm, in, count, next, s);
            recv(comm, out + 2 * count, count, r, s);
            recv(comm, out + count, count, next, s);
          }
        });
        cudaStreamSynchronize(s);
        comm.check();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
      cudaStreamSynchronize(s);
      sync.arrive_and_wait();
      got[static_cast<std::size_t>(r)].resize(static_cast<std::size_t>(3 * count));
      cudaMemcpy(got[static_cast<std::size_t>(r)].data(), out, 3 * count * sizeof(float), cudaMemcpyDeviceToHost);
      sync.arrive_and_wait();
      cudaFree(in);
      cudaFree(out);
      cudaStreamDestroy(s);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(errors[static_cast<std::size_t>(r)] == "");
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    const auto& out = got[static_cast<std::size_t>(r)];
    std::size_t wrong = 0;
    for (index_t i = 0; i < count; ++i) {
      wrong += out[static_cast<std::size_t>(i)] != x[static_cast<std::size_t>(prev)][static_cast<std::size_t>(i)];
      wrong += out[static_cast<std::size_t>(count + i)] !=
               x[static_cast<std::size_t>(next)][static_cast<std::size_t>(count + i)];
      wrong += out[static_cast<std::size_t>(2 * count + i)] !=
               x[static_cast<std::size_t>(r)][static_cast<std::size_t>(2 * count + i)];
    }
    CHECK(wrong == 0);
  }
}
