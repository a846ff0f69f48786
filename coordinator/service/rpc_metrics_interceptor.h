#ifndef RINGMASTER_COORDINATOR_RPC_METRICS_INTERCEPTOR_H_
#define RINGMASTER_COORDINATOR_RPC_METRICS_INTERCEPTOR_H_

// A gRPC server interceptor that records every RPC in CoordinatorMetrics:
// ringmaster_rpcs_total{method,code} for all, ringmaster_rpc_latency_seconds
// {method} for unary ones (from the interceptor's creation, when the call
// arrives, to its status being sent; streams last as long as their clients
// keep them, which is no latency). Methods are labelled "JobService/Submit"
// (the ringmaster.v1 package left out), others by their full name.
//
// Thread-safe; the metrics must outlive the server.

#include "coordinator/core/coordinator_metrics.h"
#include "grpcpp/support/server_interceptor.h"

namespace ringmaster::coordinator {

class RpcMetricsInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsInterceptorFactory(CoordinatorMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

 private:
  CoordinatorMetrics* const metrics_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_RPC_METRICS_INTERCEPTOR_H_
