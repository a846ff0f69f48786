#ifndef RINGMASTER_ENGINE_PARALLEL_BUCKET_REDUCER_H_
#define RINGMASTER_ENGINE_PARALLEL_BUCKET_REDUCER_H_

// BucketReducer: averages gradient buckets over a process group, one
// AllReduce(kAvg) per bucket, strictly in submission order — on its own
// communication thread (threaded = true: the allreduces overlap whatever the
// submitting thread does next, typically the rest of the backward pass), or
// inline in Submit (threaded = false).
//
// Handoff (threaded): Submit(tensor) queues the tensor under the mutex; from
// then on the communication thread is the only user of the tensor's memory
// and of the group, until Wait returns — the submitter must not touch either
// before that. The mutex orders the memory: what the submitter wrote before
// Submit is visible to the allreduce, and the reduced values are visible to
// the submitter after Wait. Results do not depend on timing: the calls are the
// same, in the same order, whatever the thread interleaving.
//
// Errors: the first failing allreduce's status is kept; the buckets after it
// are not sent (the group is broken, process_group.h) and Wait returns that
// status once everything submitted is accounted for. The group's own deadline
// bounds every call, so Wait cannot hang on a dead peer.
//
// Thread-safety: Submit and Wait are called by one thread (the training
// thread); the destructor waits for the submitted buckets, then stops the
// communication thread.

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "engine/core/tensor.h"
#include "engine/dist/process_group.h"

namespace ringmaster::engine::parallel {

class BucketReducer {
 public:
  // When one submitted bucket's allreduce ran (by the injected clock).
  struct Timing {
    absl::Time start;
    absl::Time end;
  };

  // group and clock are not owned and must outlive the reducer.
  BucketReducer(dist::ProcessGroup& group, Clock& clock, bool threaded);
  ~BucketReducer();
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;

  // Averages `tensor` in place over the group (now, or on the thread).
  void Submit(Tensor tensor);
  // Blocks until every submitted bucket is reduced (or skipped after an
  // error); returns the first error and, in `timings`, one entry per bucket
  // reduced since the previous Wait, in submission order. Resets for the next
  // round.
  absl::Status Wait(std::vector<Timing>* timings);

 private:
  // Runs one allreduce unless an earlier one failed. Called with mu_ unlocked.
  void Reduce(const Tensor& tensor);
  void Loop();

  dist::ProcessGroup& group_;
  Clock& clock_;
  const bool threaded_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Tensor> queue_;     // submitted, not yet started
  int pending_ = 0;              // submitted, not yet finished
  absl::Status error_;           // first error of this round
  std::vector<Timing> timings_;  // this round's reduced buckets
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace ringmaster::engine::parallel

#endif  // RINGMASTER_ENGINE_PARALLEL_BUCKET_REDUCER_H_
