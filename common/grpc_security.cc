#include "common/grpc_security.h"

#include <arpa/inet.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "grpcpp/support/client_interceptor.h"

namespace ringmaster {
namespace {

// Adds fixed headers, and those of a HeaderSource, to every call of a channel.
class HeaderInterceptor final : public grpc::experimental::Interceptor {
 public:
  HeaderInterceptor(const Headers* headers, const HeaderSource* source) : headers_(headers), source_(source) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      std::multimap<std::string, std::string>* metadata = methods->GetSendInitialMetadata();
      for (const auto& [key, value] : *headers_) metadata->emplace(key, value);
      if (*source_) {
        for (auto& [key, value] : (*source_)()) metadata->emplace(std::move(key), std::move(value));
      }
    }
    methods->Proceed();
  }

 private:
  const Headers* const headers_;
  const HeaderSource* const source_;
};

class HeaderInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  HeaderInterceptorFactory(Headers headers, HeaderSource source)
      : headers_(std::move(headers)), source_(std::move(source)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new HeaderInterceptor(&headers_, &source_);
  }

 private:
  const Headers headers_;  // both live as long as the channel
  const HeaderSource source_;
};

}  // namespace

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const TlsMaterial* tls, const std::string& listen) {
  if (tls == nullptr) {
    return grpc::experimental::LocalServerCredentials(absl::StartsWith(listen, "unix:") ? UDS : LOCAL_TCP);
  }
  grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_BUT_DONT_VERIFY);
  options.pem_root_certs = tls->ca_pem;
  options.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const TlsMaterial* tls) {
  if (tls == nullptr) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls->ca_pem;
  options.pem_private_key = tls->key_pem;
  options.pem_cert_chain = tls->cert_pem;
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                           grpc::ChannelArguments args, Headers headers) {
  return MakeChannel(target, credentials, std::move(args), std::move(headers), nullptr);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                           grpc::ChannelArguments args, Headers headers, HeaderSource source) {
  args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  args.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!headers.empty() || source) {
    interceptors.push_back(std::make_unique<HeaderInterceptorFactory>(std::move(headers), std::move(source)));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args, std::move(interceptors));
}

bool IsTlsHandshakeFailure(const std::string& grpc_message) {
  const std::string m = absl::AsciiStrToLower(grpc_message);
  return absl::StrContains(m, "handshake") || absl::StrContains(m, "ssl_error") ||
         absl::StrContains(m, "certificate verify failed") || absl::StrContains(m, "wrong version number");
}

bool IsLoopbackHost(const std::string& host) {
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

bool IsLocalListenAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) return true;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return IsLoopbackHost(host);
}

}  // namespace ringmaster
