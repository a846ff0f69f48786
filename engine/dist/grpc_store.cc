#include "engine/dist/grpc_store.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
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

// A client context with the deadline `timeout` from now (none if infinite).
// Returns the deadline (absl::InfiniteFuture() if none).
absl::Time Prepare(grpc::ClientContext* context, absl::Duration timeout, bool wait_for_ready) {
  context->set_wait_for_ready(wait_for_ready);
  if (timeout == absl::InfiniteDuration()) return absl::InfiniteFuture();
  const absl::Time deadline = absl::Now() + timeout;
  context->set_deadline(absl::ToChronoTime(deadline));
  return deadline;
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

void GrpcStore::FillScope(v1::RendezvousScope* scope) const {
  scope->set_job_id(options_.job_id);
  scope->set_generation(options_.generation);
  scope->set_rank(options_.rank);
  scope->set_secret(options_.secret);
}

namespace {

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
      if (!waited_for.empty() && absl::Now() >= deadline) {
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
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()), absl::StrCat(where, ": ", message));
  }
}

}  // namespace

absl::Status GrpcStore::Set(const std::string& key, const std::string& value) {
  v1::KvSetRequest request;
  FillScope(request.mutable_scope());
  request.set_key(key);
  request.set_value(value);
  v1::KvSetResponse response;
  grpc::ClientContext context;
  const absl::Time deadline = Prepare(&context, options_.call_timeout, options_.wait_for_ready);
  grpc::Status status = stub_->KvSet(&context, request, &response);
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
  grpc::ClientContext context;
  const absl::Time deadline = Prepare(&context, options_.call_timeout, options_.wait_for_ready);
  grpc::Status status = stub_->KvGet(&context, request, &response);
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
  grpc::ClientContext context;
  const absl::Time deadline = Prepare(&context, options_.call_timeout, options_.wait_for_ready);
  grpc::Status status = stub_->KvAdd(&context, request, &response);
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
  const bool bounded = timeout != absl::InfiniteDuration();
  // A zero proto timeout means "until the generation's rendezvous deadline";
  // a non-positive Store timeout means "do not wait": ask for the least wait.
  const absl::Duration wait = std::max(timeout, absl::Nanoseconds(1));
  if (bounded) ToProto(wait, request.mutable_timeout());
  v1::KvWaitResponse response;
  grpc::ClientContext context;
  const absl::Time deadline =
      Prepare(&context, bounded ? wait + options_.deadline_slack : absl::InfiniteDuration(), options_.wait_for_ready);
  grpc::Status status = stub_->KvWait(&context, request, &response);
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

}  // namespace ringmaster::engine::dist
