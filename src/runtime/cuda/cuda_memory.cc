// The device-memory helpers of kiln::GenerationSession (runtime/cuda_backend.h): copies,
// zero fill and paged row writes on the device's default stream, each waited for.
#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/kv_cache.h"
#include "kiln/support/status.h"
#include "runtime/cuda/cuda_util.h"
#include "runtime/cuda_backend.h"

namespace kiln::runtime {
namespace {

// Makes `ordinal` current for the scope and restores the caller's device after.
class DeviceScope {
 public:
  explicit DeviceScope(int ordinal) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = ordinal;
    status_ = CudaStatus(cudaSetDevice(ordinal), "cudaSetDevice");
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  const absl::Status& status() const { return status_; }

 private:
  int previous_ = 0;
  absl::Status status_;
};

}  // namespace

absl::Status CudaCopies(int ordinal, std::span<const CudaCopy> copies) {
  if (copies.empty()) return absl::OkStatus();
  DeviceScope scope(ordinal);
  KILN_RETURN_IF_ERROR(scope.status());
  for (const CudaCopy& c : copies)
    if (c.bytes > 0)
      KILN_CUDA_TRY(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, nullptr),
                    "copying a cache block");
  KILN_CUDA_TRY(cudaStreamSynchronize(nullptr), "copying cache blocks");
  return absl::OkStatus();
}

absl::Status CudaZero(int ordinal, void* p, size_t bytes) {
  DeviceScope scope(ordinal);
  KILN_RETURN_IF_ERROR(scope.status());
  KILN_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, nullptr), "zeroing a cache pool");
  KILN_CUDA_TRY(cudaStreamSynchronize(nullptr), "zeroing a cache pool");
  return absl::OkStatus();
}

absl::Status CudaWritePagedRows(int ordinal, std::span<const CudaPagedRows> writes) {
  if (writes.empty()) return absl::OkStatus();
  DeviceScope scope(ordinal);
  KILN_RETURN_IF_ERROR(scope.status());
  // One upload of the positions 0 .. seq - 1 and every table, then a kernel per write.
  int64_t seq = 0;
  for (const CudaPagedRows& w : writes) seq = std::max(seq, w.seq);
  std::vector<int64_t> host(static_cast<size_t>(seq));
  std::iota(host.begin(), host.end(), int64_t{0});
  std::vector<size_t> table_at;
  for (const CudaPagedRows& w : writes) {
    if (w.block_size <= 0 || static_cast<int64_t>(w.table.size()) * w.block_size < w.seq)
      return absl::InternalError("CudaWritePagedRows: the table does not cover the rows");
    for (int64_t id : w.table)
      if (id < 0 || id >= w.blocks)
        return absl::InternalError(absl::StrCat("CudaWritePagedRows: block id ", id,
                                                " is outside the pool of ", w.blocks));
    table_at.push_back(host.size());
    host.insert(host.end(), w.table.begin(), w.table.end());
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> dev,
                        AllocateCudaBuffer(ordinal, host.size() * sizeof(int64_t)));
  KILN_CUDA_TRY(cudaMemcpyAsync(dev.get(), host.data(), host.size() * sizeof(int64_t),
                                cudaMemcpyHostToDevice, nullptr),
                "uploading block tables");
  const int64_t* d = static_cast<const int64_t*>(dev.get());
  for (size_t i = 0; i < writes.size(); ++i) {
    const CudaPagedRows& w = writes[i];
    cuda::CacheWriteArgs a;
    a.cache = a.y = w.pool;
    a.rows = w.rows;
    a.positions = d;
    a.batch = 1;
    a.heads = w.heads;
    a.seq = w.seq;
    a.row_bytes = w.row_bytes;
    a.width = static_cast<int64_t>(w.table.size());
    a.block_size = w.block_size;
    a.blocks = w.blocks;
    a.slots = a.width * w.block_size;
    a.table = d + table_at[i];
    if (const cudaError_t e = cuda::CacheWrite(a, nullptr); e != cudaSuccess) {
      cudaStreamSynchronize(nullptr);  // the launched ones still read `dev`
      return CudaStatus(e, "writing prompt rows into the cache");
    }
  }
  KILN_CUDA_TRY(cudaStreamSynchronize(nullptr), "writing prompt rows into the cache");
  return absl::OkStatus();
}

}  // namespace kiln::runtime
