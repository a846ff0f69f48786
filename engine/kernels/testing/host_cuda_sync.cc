// host_cuda's sync points: __syncthreads and the warp operations, as the
// scheduler completes them, and the diagnosis of a block where no thread can
// run.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/kernels/testing/host_cuda_run.h"

namespace host_cuda::detail {
namespace {

bool IsShuffle(WarpOpKind k) {
  return k == WarpOpKind::kShfl || k == WarpOpKind::kShflUp || k == WarpOpKind::kShflDown || k == WarpOpKind::kShflXor;
}

const char* Name(WarpOpKind k) {
  switch (k) {
    case WarpOpKind::kSyncWarp: return "__syncwarp";
    case WarpOpKind::kShfl: return "__shfl_sync";
    case WarpOpKind::kShflUp: return "__shfl_up_sync";
    case WarpOpKind::kShflDown: return "__shfl_down_sync";
    case WarpOpKind::kShflXor: return "__shfl_xor_sync";
    case WarpOpKind::kAll: return "__all_sync";
    case WarpOpKind::kAny: return "__any_sync";
    case WarpOpKind::kBallot: return "__ballot_sync";
  }
  return "?";
}

const char* Name(BarrierKind k) {
  switch (k) {
    case BarrierKind::kSync: return "__syncthreads";
    case BarrierKind::kCount: return "__syncthreads_count";
    case BarrierKind::kAnd: return "__syncthreads_and";
    case BarrierKind::kOr: return "__syncthreads_or";
  }
  return "?";
}

std::string Hex(unsigned m) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", m);
  return buf;
}

// The lane a shuffle reads, as PTX shfl.sync computes it: b[4:0] is the
// source lane, delta or lane mask; c = the width's segment mask and clamp. A
// source past the lane's segment (below it for up, above it for the others)
// is the lane itself.
unsigned ShuffleSource(WarpOpKind kind, unsigned lane, int64_t param, int width) {
  const int64_t seg_mask = (kWarpLanes - width) & 31, min_lane = lane & seg_mask;
  const int64_t max_lane = min_lane | (31 & ~seg_mask), b = param & 31;
  int64_t j = lane;
  bool in_range = true;
  switch (kind) {
    case WarpOpKind::kShflUp:
      j = lane - b;
      in_range = j >= min_lane;
      break;
    case WarpOpKind::kShflDown:
      j = lane + b;
      in_range = j <= max_lane;
      break;
    case WarpOpKind::kShflXor:
      j = lane ^ b;
      in_range = j <= max_lane;
      break;
    default:  // kShfl: the source lane within the segment
      j = min_lane | (b & ~seg_mask & 31);
      break;
  }
  return in_range ? static_cast<unsigned>(j) : lane;
}

}  // namespace

std::string Coords(const uint3& v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}
std::string At(Site s) { return std::string(s.file) + ":" + std::to_string(s.line); }
bool SameSite(Site a, Site b) { return a.line == b.line && std::strcmp(a.file, b.file) == 0; }

int LaunchRun::SyncThreads(BarrierKind kind, int predicate, Site site) {
  Fiber* f = current_;
  f->wait = Wait::kBarrier;
  f->barrier = kind;
  f->predicate = predicate != 0;
  f->site = site;
  Yield(f);
  return static_cast<int>(f->result);
}

uint64_t LaunchRun::WarpOp(WarpOpKind kind, unsigned mask, uint64_t payload, int64_t param, int width, Site site) {
  Fiber* f = current_;
  const unsigned warp = f->linear / kWarpLanes, lane = f->linear % kWarpLanes;
  if ((mask >> lane & 1u) == 0) {
    error_ = Where(*f) + ": " + Name(kind) + " at " + At(site) + ": mask " + Hex(mask) +
             " does not name the calling lane " + std::to_string(lane);
    Abandon();
  }
  if (IsShuffle(kind) && (width < 1 || width > 32 || (width & (width - 1)) != 0)) {
    error_ = Where(*f) + ": " + Name(kind) + " at " + At(site) + ": width " + std::to_string(width) +
             " is not a power of two in [1, 32]";
    Abandon();
  }
  std::vector<PendingOp>& ops = warp_ops_[warp];
  PendingOp* op = nullptr;
  for (PendingOp& o : ops) {
    if (o.kind == kind && o.mask == mask && o.width == width && (o.arrived >> lane & 1u) == 0) {
      op = &o;
      break;
    }
  }
  if (op == nullptr) {
    ops.push_back(PendingOp{kind, mask, width, mask & ExistingLanes(warp), 0, site});
    op = &ops.back();
  }
  op->arrived |= 1u << lane;
  f->wait = Wait::kWarpOp;
  f->op = kind;
  f->mask = mask;
  f->site = site;
  f->payload = payload;
  f->param = param;
  Yield(f);
  return f->result;
}

bool LaunchRun::CompleteWarpOps() {
  bool any = false;
  for (unsigned w = 0; w < warp_ops_.size(); ++w) {
    std::vector<PendingOp>& ops = warp_ops_[w];
    for (size_t k = 0; k < ops.size();) {
      if (ops[k].arrived != ops[k].expected) {
        ++k;
        continue;
      }
      Complete(w, ops[k]);
      ops.erase(ops.begin() + static_cast<ptrdiff_t>(k));
      any = true;
    }
  }
  return any;
}

void LaunchRun::Complete(unsigned warp, const PendingOp& op) {
  Fiber* const* lanes = &fibers_[warp * kWarpLanes];
  unsigned votes = 0;
  for (unsigned l = 0; l < kWarpLanes; ++l) {
    if ((op.arrived >> l & 1u) != 0 && lanes[l]->payload != 0) votes |= 1u << l;
  }
  for (unsigned l = 0; l < kWarpLanes; ++l) {
    if ((op.arrived >> l & 1u) == 0) continue;
    Fiber* f = lanes[l];
    switch (op.kind) {
      case WarpOpKind::kSyncWarp: f->result = 0; break;
      case WarpOpKind::kAll: f->result = votes == op.arrived; break;
      case WarpOpKind::kAny: f->result = votes != 0; break;
      case WarpOpKind::kBallot: f->result = votes; break;
      default: {
        const unsigned src = ShuffleSource(op.kind, l, f->param, op.width);
        // A source lane that does not take part: undefined on the device, poison here.
        f->result = src == l ? f->payload : (op.arrived >> src & 1u) != 0 ? lanes[src]->payload : ~uint64_t{0};
      }
    }
    f->wait = Wait::kRunnable;
  }
}

bool LaunchRun::ReleaseBarrier() {
  if (live_ != threads_) return false;
  const Fiber& first = *fibers_[0];
  int count = 0;
  for (const Fiber* f : fibers_) {
    if (f->wait != Wait::kBarrier || f->barrier != first.barrier || !SameSite(f->site, first.site)) return false;
    count += f->predicate;
  }
  int result = 0;
  switch (first.barrier) {
    case BarrierKind::kSync: break;
    case BarrierKind::kCount: result = count; break;
    case BarrierKind::kAnd: result = count == static_cast<int>(threads_); break;
    case BarrierKind::kOr: result = count > 0; break;
  }
  for (Fiber* f : fibers_) {
    f->result = static_cast<uint64_t>(result);
    f->wait = Wait::kRunnable;
  }
  return true;
}

// Why no thread can run: a warp operation waiting for a lane that cannot
// come, or a barrier that not every thread reaches.
std::string LaunchRun::Diagnose() const {
  const std::string block = "block " + Coords(block_idx_);
  for (unsigned w = 0; w < warp_ops_.size(); ++w) {
    for (const PendingOp& op : warp_ops_[w]) {
      const unsigned missing = op.expected & ~op.arrived;
      if (missing == 0) continue;
      const unsigned lane = __builtin_ctz(missing);
      const Fiber& waiter = *fibers_[w * kWarpLanes + __builtin_ctz(op.arrived)];
      const Fiber& other = *fibers_[w * kWarpLanes + lane];
      std::string why = "which never arrives";
      if (other.wait == Wait::kExited) why = "which has exited";
      if (other.wait == Wait::kBarrier)
        why = std::string("which waits at ") + Name(other.barrier) + " at " + At(other.site);
      if (other.wait == Wait::kWarpOp) {
        why =
            std::string("which waits at ") + Name(other.op) + " at " + At(other.site) + " with mask " + Hex(other.mask);
      }
      return block + ": " + Name(op.kind) + " at " + At(op.site) + " with mask " + Hex(op.mask) + " in thread " +
             Coords(waiter.tid) + " waits for lane " + std::to_string(lane) + " (thread " + Coords(other.tid) + "), " +
             why;
    }
  }
  const Fiber* first = nullptr;
  unsigned at_barrier = 0, exited = 0;
  const Fiber* an_exited = nullptr;
  for (const Fiber* f : fibers_) {
    if (f->wait == Wait::kExited) {
      ++exited;
      if (an_exited == nullptr) an_exited = f;
    }
    if (f->wait != Wait::kBarrier) continue;
    ++at_barrier;
    if (first == nullptr) first = f;
    if (f->barrier != first->barrier || !SameSite(f->site, first->site)) {
      return block + ": threads wait at different barriers: " + Name(first->barrier) + " at " + At(first->site) +
             " (thread " + Coords(first->tid) + ") and " + Name(f->barrier) + " at " + At(f->site) + " (thread " +
             Coords(f->tid) + ")";
    }
  }
  if (first != nullptr && an_exited != nullptr) {
    return block + ": " + Name(first->barrier) + " at " + At(first->site) + " is reached by " +
           std::to_string(at_barrier) + " of " + std::to_string(threads_) + " threads; thread " +
           Coords(an_exited->tid) + (exited > 1 ? " and " + std::to_string(exited - 1) + " others" : "") +
           " exited without reaching it";
  }
  return block + ": no thread can run";
}

}  // namespace host_cuda::detail
