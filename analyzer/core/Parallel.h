// A parallel loop over indexes on a few threads.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace shardlint {

// Runs `body(0)` .. `body(n - 1)` on up to `jobs` threads (the calling one included). `body` must
// not throw (catch inside it).
template <class Body>
void parallelFor(size_t n, unsigned jobs, Body&& body) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < n;) body(k);
  };
  size_t threads = std::min<size_t>(jobs, n);
  if (threads <= 1) return worker();
  std::vector<std::thread> pool;
  for (size_t j = 1; j < threads; ++j) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

}  // namespace shardlint
