#include "engine/dist/grpc_store.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/grpc_status.h"
#include "common/retry.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::engine::dist {
namespace {

// common/grpc_security.h's kMaxGrpcMessageBytes (the engine does not depend
// on common's gRPC security library).
constexpr int kMaxMessageBytes = 32 << 20;

std::string Quoted(const std::string& key) { return absl::StrCat("'", key, "'"); }

std::string KeysPhrase(const std::vector<std::string>& keys) {
  std::vector<std::string> quoted;
  quoted.reserve(keys.size());
  for (const std::string& key : keys) quoted.push_back(Quoted(key));
  return absl::StrCat(keys.size() == 1 ? "key " : "keys ", absl::StrJoin(quoted, ", "),
                      keys.size() == 1 ? " was" : " were");
}

void ToProto(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t seconds = absl::ToInt64Seconds(d);
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d - absl::Seconds(seconds))));
}

// The deadline `timeout` from now (absl::InfiniteFuture() if infinite).
absl::Time DeadlineIn(absl::Duration timeout) {
  return timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcStore>> GrpcStore::Connect(const GrpcStoreOptions& options) {
  if (options.target.empty()) {
    return absl::InvalidArgumentError("grpc store: target: required (e.g. unix:/path/agent.sock)");
  }
  if (options.job_id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("grpc store ", options.target, ": job id: required"));
  }
  if (options.generation < 0) {
    return absl::InvalidArgumentError(absl::StrCat("grpc store ", options.target,
                                                   ": generation: must be >= 0, got ", options.generation));
  }
  // sockaddr_un holds 108 bytes with the terminating NUL; gRPC would only
  // fail at the first call, with UNKNOWN.
  constexpr size_t kMaxUnixPath = 107;
  if (absl::StartsWith(options.target, "unix:") && options.target.size() - 5 > kMaxUnixPath) {
    return absl::InvalidArgumentError(absl::StrCat("grpc store ", options.target, ": unix socket path longer than ",
                                                   kMaxUnixPath, " bytes"));
  }
  // A local socket (the worker's, mode 0600) or a test's service: plaintext.
  // Explicit message limits, as every Ringmaster channel (a value is <= 1 MiB).
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(), args);
  return std::make_unique<GrpcStore>(v1::RendezvousService::NewStub(channel), options);
}

GrpcStore::GrpcStore(std::unique_ptr<v1::RendezvousService::StubInterface> stub, GrpcStoreOptions options)
    : stub_(std::move(stub)), options_(std::move(options)) {}

std::string GrpcStore::Where() const { return absl::StrCat("grpc store ", options_.target); }

grpc::Status GrpcStore::WithBackoff(absl::Time deadline,
                                    const std::function<grpc::Status(grpc::ClientContext*)>& call) const {
  // gRPC measures the deadline in real time: so does the retry.
  Clock* clock = Clock::Real();
  std::optional<Retry> retry;  // made at the first refusal (its seed costs a syscall)
  while (true) {
    grpc::ClientContext context;
    context.set_wait_for_ready(options_.wait_for_ready);
    if (deadline != absl::InfiniteFuture()) context.set_deadline(absl::ToChronoTime(deadline));
    grpc::Status status = call(&context);
    if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) return status;
    if (!retry.has_value()) {
      RetryPolicy policy;
      policy.initial = options_.initial_backoff;
      policy.max = options_.max_backoff;
      policy.jitter = 0.5;  // callers turned away together come back apart
      policy.deadline = options_.max_retry_window;
      retry.emplace(clock, policy);
    }
    const std::optional<absl::Duration> delay = retry->NextDelay();
    if (!delay.has_value() || clock->Now() + *delay >= deadline) return status;
    clock->SleepFor(*delay);
  }
}

void GrpcStore::FillScope(v1::RendezvousScope* scope) const {
  scope->set_job_id(options_.job_id);
  scope->set_generation(options_.generation);
  scope->set_rank(options_.rank);
  scope->set_secret(options_.secret);
}

namespace {

constexpr absl::Duration kClockSkew = absl::Milliseconds(20);

// The Status of a failed call. `waited_for` names the keys a blocking call
// waited for; a DEADLINE_EXCEEDED that the client's own deadline caused is
// reported as those keys not being set within `timeout`.
absl::Status FromGrpc(const grpc::Status& status, const std::string& where, const std::string& method,
                      const std::vector<std::string>& waited_for, absl::Duration timeout,
                      absl::Time deadline) {
  const std::string& message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(absl::StrCat(where, ": unavailable: ", message));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      // gRPC's timer and absl's clock may disagree by a little (a loaded
      // machine has seen gRPC end the call before absl::Now() reached the
      // deadline): a deadline within kClockSkew counts as ours.
      if (!waited_for.empty() && absl::Now() + kClockSkew >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat(where, ": ", KeysPhrase(waited_for), " not set within ", absl::FormatDuration(timeout)));
      }
      if (waited_for.empty()) {
        return absl::DeadlineExceededError(
            absl::StrCat(where, ": ", method, ": no answer within ", absl::FormatDuration(timeout)));
      }
      return absl::DeadlineExceededError(absl::StrCat(where, ": ", message));
    default:
      // FAILED_PRECONDITION (fenced generation), INVALID_ARGUMENT, ...: the
      // service's code and message.
      return FromGrpcStatus(status, where);
  }
}

}  // namespace

absl::Status GrpcStore::Set(const std::string& key, const std::string& value) {
  v1::KvSetRequest request;
  FillScope(request.mutable_scope());
  request.set_key(key);
  request.set_value(value);
  v1::KvSetResponse response;
  const absl::Time deadline = DeadlineIn(options_.call_timeout);
  grpc::Status status =
      WithBackoff(deadline, [&](grpc::ClientContext* context) { return stub_->KvSet(context, request, &response); });
  if (status.ok()) return absl::OkStatus();
  return FromGrpc(status, Where(), absl::StrCat("set ", Quoted(key)), {}, options_.call_timeout, deadline);
}

absl::StatusOr<std::string> GrpcStore::Get(const std::string& key, absl::Duration timeout) {
  if (timeout > absl::ZeroDuration()) {
    absl::StatusOr<std::vector<std::string>> values = WaitFor({key}, timeout);
    if (!values.ok()) return values.status();
    return std::move((*values)[0]);
  }
  v1::KvGetRequest request;
  FillScope(request.mutable_scope());
  request.set_key(key);
  v1::KvGetResponse response;
  const absl::Time deadline = DeadlineIn(options_.call_timeout);
  grpc::Status status =
      WithBackoff(deadline, [&](grpc::ClientContext* context) { return stub_->KvGet(context, request, &response); });
  if (!status.ok()) {
    return FromGrpc(status, Where(), absl::StrCat("get ", Quoted(key)), {}, options_.call_timeout, deadline);
  }
  if (!response.found()) {
    return absl::DeadlineExceededError(absl::StrCat(Where(), ": ", KeysPhrase({key}), " not set within ",
                                                    absl::FormatDuration(absl::ZeroDuration())));
  }
  return std::move(*response.mutable_value());
}

absl::StatusOr<int64_t> GrpcStore::Add(const std::string& key, int64_t delta) {
  v1::KvAddRequest request;
  FillScope(request.mutable_scope());
  request.set_key(key);
  request.set_delta(delta);
  v1::KvAddResponse response;
  const absl::Time deadline = DeadlineIn(options_.call_timeout);
  // RESOURCE_EXHAUSTED is answered before anything is added: retrying is safe.
  grpc::Status status =
      WithBackoff(deadline, [&](grpc::ClientContext* context) { return stub_->KvAdd(context, request, &response); });
  if (!status.ok()) {
    return FromGrpc(status, Where(), absl::StrCat("add to key ", Quoted(key)), {}, options_.call_timeout, deadline);
  }
  return response.value();
}

absl::Status GrpcStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  if (keys.empty()) return absl::OkStatus();
  return WaitFor(keys, timeout).status();
}

absl::StatusOr<std::vector<std::string>> GrpcStore::WaitFor(const std::vector<std::string>& keys,
                                                            absl::Duration timeout) {
  v1::KvWaitRequest request;
  FillScope(request.mutable_scope());
  for (const std::string& key : keys) request.add_keys(key);
  v1::KvWaitResponse response;
  const absl::Time deadline = WaitDeadline(timeout);
  bool retry = false;
  grpc::Status status = WithBackoff(deadline, [&](grpc::ClientContext* context) {
    SetWaitTimeout(timeout, deadline, retry, request.mutable_timeout());
    retry = true;
    return stub_->KvWait(context, request, &response);
  });
  if (!status.ok()) return FromGrpc(status, Where(), "wait", keys, timeout, deadline);
  if (response.values_size() != static_cast<int>(keys.size())) {
    return absl::InternalError(absl::StrCat(Where(), ": wait for ", keys.size(), " keys returned ",
                                            response.values_size(), " values"));
  }
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (std::string& value : *response.mutable_values()) values.push_back(std::move(value));
  return values;
}

absl::Time GrpcStore::WaitDeadline(absl::Duration timeout) const {
  // A non-positive Store timeout means "do not wait": ask for the least wait.
  return timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                             : DeadlineIn(std::max(timeout, absl::Nanoseconds(1)) +
                                                          options_.deadline_slack);
}

void GrpcStore::SetWaitTimeout(absl::Duration timeout, absl::Time deadline, bool retry,
                               google::protobuf::Duration* out) const {
  // A zero proto timeout means "until the generation's rendezvous deadline".
  if (timeout == absl::InfiniteDuration()) return;
  // The whole wait, or for a retry what is left of it; at least a
  // nanosecond (zero would mean none).
  const absl::Duration wait = retry ? deadline - options_.deadline_slack - absl::Now() : timeout;
  ToProto(std::max(wait, absl::Nanoseconds(1)), out);
}

absl::Status GrpcStore::Publish(const std::string& communicator, const std::string& id) {
  v1::PublishNcclUniqueIdRequest request;
  FillScope(request.mutable_scope());
  request.set_communicator(communicator);
  request.set_unique_id(id);
  v1::PublishNcclUniqueIdResponse response;
  const absl::Time deadline = DeadlineIn(options_.call_timeout);
  grpc::Status status = WithBackoff(
      deadline, [&](grpc::ClientContext* context) { return stub_->PublishNcclUniqueId(context, request, &response); });
  if (status.ok()) return absl::OkStatus();
  return FromGrpc(status, Where(), absl::StrCat("publish the NCCL unique id of ", Quoted(communicator)), {},
                  options_.call_timeout, deadline);
}

absl::StatusOr<std::string> GrpcStore::Fetch(const std::string& communicator, absl::Duration timeout) {
  v1::GetNcclUniqueIdRequest request;
  FillScope(request.mutable_scope());
  request.set_communicator(communicator);
  v1::GetNcclUniqueIdResponse response;
  const absl::Time deadline = WaitDeadline(timeout);
  bool retry = false;
  grpc::Status status = WithBackoff(deadline, [&](grpc::ClientContext* context) {
    SetWaitTimeout(timeout, deadline, retry, request.mutable_timeout());
    retry = true;
    return stub_->GetNcclUniqueId(context, request, &response);
  });
  if (!status.ok()) {
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && absl::Now() + kClockSkew >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(Where(), ": the NCCL unique id of ", Quoted(communicator),
                                                      " was not published within ", absl::FormatDuration(timeout)));
    }
    return FromGrpc(status, Where(), absl::StrCat("fetch the NCCL unique id of ", Quoted(communicator)), {}, timeout,
                    deadline);
  }
  return std::move(*response.mutable_unique_id());
}

}  // namespace ringmaster::engine::dist
