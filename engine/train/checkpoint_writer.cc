#include "engine/train/checkpoint_writer.h"

#include <utility>

#include "spdlog/spdlog.h"

namespace ringmaster::engine {

CheckpointWriter::CheckpointWriter() : thread_([this] { Loop(); }) {}

CheckpointWriter::~CheckpointWriter() {
  absl::Status uncollected = Wait();
  if (!uncollected.ok()) spdlog::error("checkpoint write failed: {}", uncollected.ToString());
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

absl::Status CheckpointWriter::Start(Write write) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !pending_.has_value(); });
  if (absl::Status error = TakeErrorLocked(); !error.ok()) return error;
  pending_ = std::move(write);
  cv_.notify_all();
  return absl::OkStatus();
}

absl::Status CheckpointWriter::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !pending_.has_value(); });
  return TakeErrorLocked();
}

absl::Status CheckpointWriter::Poll() {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.has_value()) return absl::OkStatus();
  return TakeErrorLocked();
}

bool CheckpointWriter::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.has_value();
}

absl::Status CheckpointWriter::TakeErrorLocked() { return std::exchange(error_, absl::OkStatus()); }

void CheckpointWriter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return shutdown_ || pending_.has_value(); });
    if (!pending_.has_value()) return;  // shut down with nothing in flight
    Write write = std::move(*pending_);  // pending_ stays set: in flight
    lock.unlock();
    absl::Status status = write();
    lock.lock();
    // Start refuses new writes while an error is uncollected: at most one.
    if (!status.ok()) error_ = std::move(status);
    pending_.reset();
    cv_.notify_all();
  }
}

}  // namespace ringmaster::engine
