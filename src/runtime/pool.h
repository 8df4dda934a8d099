// A thread-safe free list of per-run resources (a CPU arena block; on CUDA a device arena
// with its stream, staging and captured graphs). Run is const and may be called from many
// threads at once: each call leases one resource and returns it when it ends, so the
// steady state allocates nothing.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::runtime {

template <typename T>
class ResourcePool {
 public:
  // One from the free list, or `make()` (returning StatusOr<std::unique_ptr<T>>).
  template <typename Make>
  absl::StatusOr<std::unique_ptr<T>> Acquire(Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        std::unique_ptr<T> r = std::move(free_.back());
        free_.pop_back();
        return r;
      }
    }
    return make();
  }
  void Release(std::unique_ptr<T> r) {
    if (!r) return;
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(r));
  }
  // Drops every free resource (executor teardown).
  std::vector<std::unique_ptr<T>> TakeAll() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(free_);
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<T>> free_;
};

// Returns the leased resource to its pool when the run ends, however it ends.
template <typename T>
class Lease {
 public:
  Lease(ResourcePool<T>& pool, std::unique_ptr<T> r) : pool_(pool), r_(std::move(r)) {}
  ~Lease() { pool_.Release(std::move(r_)); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  T* get() const { return r_.get(); }
  T* operator->() const { return r_.get(); }

 private:
  ResourcePool<T>& pool_;
  std::unique_ptr<T> r_;
};

}  // namespace kiln::runtime
