// Greedy activation memory planning (see memory_planner.h and docs/memory-planning.md).
// In-place hints first join buffers into chains that share one offset; chains are then
// placed largest first at the lowest aligned offset free of every placed buffer whose
// live interval intersects a member's. O(n^2 log n) in the number of buffers, which is
// fine for the few thousand activations of a transformer plan.
#include "compiler/memory_planner.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "kiln/support/status.h"

namespace kiln::compiler {
namespace {

struct Buf {
  int64_t id, size, first, last, align;  // size = bytes rounded up to align
};

// A chain of buffers sharing storage in place, placed as one.
struct Group {
  std::vector<size_t> members;  // indices into bufs, in chain order
  int64_t size = 0, align = 1, first = 0, min_id = 0;
};

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Rounds v (>= 0) up to a multiple of align (a power of two); false on overflow.
bool AlignUp(int64_t v, int64_t align, int64_t* out) {
  int64_t t;
  if (AddOverflows(v, align - 1, &t)) return false;
  *out = t & ~(align - 1);
  return true;
}

bool Intersect(const Buf& a, const Buf& b) { return a.first <= b.last && b.first <= a.last; }

absl::Status Overflow(const char* what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("memory plan: %s overflows a 64-bit byte count", what));
}

}  // namespace

absl::StatusOr<MemoryPlan> PlanMemory(std::span<const BufferRequest> requests) {
  const size_t n = requests.size();
  std::vector<Buf> bufs(n);
  absl::flat_hash_map<int64_t, size_t> index;
  MemoryPlan plan;
  for (size_t i = 0; i < n; ++i) {
    const BufferRequest& r = requests[i];
    if (r.bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("memory plan: buffer %d has negative size %d", r.id, r.bytes));
    }
    if (r.last_step < r.first_step) {
      return absl::InvalidArgumentError(
          absl::StrFormat("memory plan: buffer %d has last_step %d before first_step %d", r.id,
                          r.last_step, r.first_step));
    }
    if (!IsPowerOfTwo(r.alignment)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("memory plan: buffer %d has alignment %d, not a positive power of two",
                          r.id, r.alignment));
    }
    if (!index.emplace(r.id, i).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("memory plan: duplicate buffer id %d", r.id));
    }
    Buf& b = bufs[i];
    b = {r.id, 0, r.first_step, r.last_step, r.alignment};
    if (!AlignUp(r.bytes, r.alignment, &b.size)) return Overflow("an aligned size");
    if (AddOverflows(plan.no_reuse_bytes, b.size, &plan.no_reuse_bytes)) {
      return Overflow("the no-reuse total");
    }
  }

  // In-place claims, taken in id order so the result does not depend on input order.
  std::vector<size_t> by_id(n);
  for (size_t i = 0; i < n; ++i) by_id[i] = i;
  std::sort(by_id.begin(), by_id.end(),
            [&](size_t a, size_t b) { return bufs[a].id < bufs[b].id; });
  constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> pred(n, kNone), succ(n, kNone);
  for (size_t i : by_id) {
    const BufferRequest& r = requests[i];
    if (!r.inplace_of.has_value()) continue;
    auto it = index.find(*r.inplace_of);
    if (it == index.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "memory plan: buffer %d is in place of unknown buffer %d", r.id, *r.inplace_of));
    }
    const size_t src = it->second;
    if (src == i) {
      return absl::InvalidArgumentError(
          absl::StrFormat("memory plan: buffer %d is in place of itself", r.id));
    }
    if (bufs[src].last != r.first_step) {
      return absl::InvalidArgumentError(
          absl::StrFormat("memory plan: buffer %d (first_step %d) cannot be in place of buffer %d "
                          "(last_step %d): the live ranges must touch exactly",
                          r.id, r.first_step, bufs[src].id, bufs[src].last));
    }
    // A source written and last read at the same step is never taken over: this keeps
    // first_step strictly increasing along a chain, so chains are acyclic and members
    // that are not neighbours never share a step.
    if (bufs[i].size > bufs[src].size || bufs[i].align > bufs[src].align ||
        bufs[src].first == bufs[src].last || succ[src] != kNone) {
      continue;
    }
    pred[i] = src;
    succ[src] = i;
  }

  std::vector<Group> groups;
  for (size_t i = 0; i < n; ++i) {
    if (pred[i] != kNone) continue;
    Group g;
    g.first = bufs[i].first;
    g.min_id = bufs[i].id;
    for (size_t m = i; m != kNone; m = succ[m]) {
      g.members.push_back(m);
      g.size = std::max(g.size, bufs[m].size);
      g.align = std::max(g.align, bufs[m].align);
      g.min_id = std::min(g.min_id, bufs[m].id);
      if (m != i) plan.inplace.push_back(bufs[m].id);
    }
    groups.push_back(std::move(g));
  }
  std::sort(plan.inplace.begin(), plan.inplace.end());
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return std::tie(b.size, a.first, a.min_id) < std::tie(a.size, b.first, b.min_id);
  });

  // Place each group at the lowest aligned offset outside every forbidden range: a placed
  // buffer p conflicting in time with member m forbids offsets in
  // [p.offset - m.size + 1, p.offset + p.size).
  plan.offsets.assign(n, 0);
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> forbidden;
  for (const Group& g : groups) {
    forbidden.clear();
    for (size_t m : g.members) {
      const Buf& bm = bufs[m];
      if (bm.size == 0) continue;
      for (size_t p : placed) {
        const Buf& bp = bufs[p];
        if (bp.size == 0 || !Intersect(bm, bp)) continue;
        const int64_t off = plan.offsets[p];
        forbidden.emplace_back(std::max<int64_t>(0, off - bm.size + 1), off + bp.size);
      }
    }
    std::sort(forbidden.begin(), forbidden.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : forbidden) {
      if (offset < lo) break;
      if (offset < hi && !AlignUp(hi, g.align, &offset)) return Overflow("an offset");
    }
    int64_t end;
    if (AddOverflows(offset, g.size, &end)) return Overflow("an offset plus size");
    plan.arena_bytes = std::max(plan.arena_bytes, end);
    for (size_t m : g.members) {
      plan.offsets[m] = offset;
      placed.push_back(m);
    }
  }

  // With mixed alignments, padding can (rarely) push the greedy arena past the no-reuse
  // sum. Then lay the groups out back to back by decreasing alignment instead: every
  // group's size is a multiple of its alignment (its source's, the largest in the
  // chain), so there is no padding and the arena is at most no_reuse_bytes.
  if (plan.arena_bytes > plan.no_reuse_bytes) {
    std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
      return std::tie(b.align, b.size, a.first, a.min_id) <
             std::tie(a.align, a.size, b.first, b.min_id);
    });
    int64_t offset = 0;
    for (const Group& g : groups) {
      for (size_t m : g.members) plan.offsets[m] = offset;
      offset += g.size;  // sum of sources' sizes <= no_reuse_bytes: no overflow
    }
    plan.arena_bytes = offset;
  }

  // Peak live bytes by an event sweep (steps may be sparse). At one step, starts come
  // before ends, and an end at step t means "gone after t". A taken-over source stops
  // counting one step early.
  std::vector<std::tuple<int64_t, int, int64_t>> events;  // (step, 0 start / 1 end, size)
  for (size_t i = 0; i < n; ++i) {
    const Buf& b = bufs[i];
    const int64_t last = succ[i] != kNone ? b.last - 1 : b.last;
    events.emplace_back(b.first, 0, b.size);
    events.emplace_back(last, 1, b.size);
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0;
  for (const auto& [step, kind, size] : events) {
    // Cannot overflow: live <= no_reuse_bytes, which was checked above.
    live += kind == 0 ? size : -size;
    plan.peak_live_bytes = std::max(plan.peak_live_bytes, live);
  }
  return plan;
}

}  // namespace kiln::compiler
