#include "coordinator/service/rpc_metrics_interceptor.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace ringmaster::coordinator {
namespace {

class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(CoordinatorMetrics* metrics, std::string method, bool unary)
      : metrics_(metrics), method_(std::move(method)), unary_(unary), start_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      metrics_->ObserveRpc(method_, absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())),
                           absl::Now() - start_, unary_);
    }
    methods->Proceed();
  }

 private:
  CoordinatorMetrics* const metrics_;
  const std::string method_;
  const bool unary_;
  const absl::Time start_;
};

std::string MethodLabel(absl::string_view method) {
  absl::ConsumePrefix(&method, "/");
  absl::ConsumePrefix(&method, "ringmaster.v1.");
  return std::string(method);
}

}  // namespace

grpc::experimental::Interceptor* RpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new RpcMetricsInterceptor(metrics_, MethodLabel(info->method() == nullptr ? "" : info->method()),
                                   info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY);
}

}  // namespace ringmaster::coordinator
