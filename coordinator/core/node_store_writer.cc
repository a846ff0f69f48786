#include "coordinator/core/node_store_writer.h"

#include <utility>

namespace ringmaster::coordinator {

absl::StatusOr<std::string> NodeStoreWriter::Put(const v1::NodeInfo& node) {
  Pending mine{&node};
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&mine);
  cv_.wait(lock, [&] { return mine.done || !writing_; });
  if (mine.done) return *std::move(mine.result);
  // No batch is being written: this caller writes everything queued, its own
  // row included.
  writing_ = true;
  std::vector<Pending*> batch;
  batch.swap(queue_);
  lock.unlock();
  WriteBatch(batch);  // the results are published by `done`, under mu_
  lock.lock();
  for (Pending* p : batch) p->done = true;
  writing_ = false;
  cv_.notify_all();
  return *std::move(mine.result);
}

void NodeStoreWriter::WriteBatch(const std::vector<Pending*>& batch) {
  int64_t transactions = 1;
  if (batch.size() == 1) {
    batch.front()->result = store_->PutNode(*batch.front()->node);
  } else {
    std::vector<v1::NodeInfo> nodes;
    nodes.reserve(batch.size());
    for (const Pending* p : batch) nodes.push_back(*p->node);
    absl::StatusOr<std::vector<std::string>> ids = store_->PutNodes(nodes);
    if (ids.ok()) {
      for (size_t i = 0; i < batch.size(); ++i) batch[i]->result = std::move((*ids)[i]);
    } else {  // nothing was written: each row on its own, so an error is its caller's only
      for (Pending* p : batch) p->result = store_->PutNode(*p->node);
      transactions += static_cast<int64_t>(batch.size());
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  transactions_ += transactions;
}

int64_t NodeStoreWriter::transactions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return transactions_;
}

}  // namespace ringmaster::coordinator
