// inflate_sites: prints the inflatable fields of a request type, one
// "<target> <path>" a line, in the order an Inflation's target picks them
// (fuzz/inflate.h). fuzz/make_corpus.py runs it to find a seed's target:
//
//   bazel build //fuzz:inflate_sites
//   bazel-bin/fuzz/inflate_sites ringmaster.v1.SubmitJobRequest

#include <cstdio>
#include <string>
#include <vector>

#include "fuzz/inflate.h"
#include "google/protobuf/descriptor.h"
#include "proto/agent_service.pb.h"
#include "proto/checkpoint_service.pb.h"
#include "proto/job_service.pb.h"
#include "proto/node_service.pb.h"
#include "proto/rendezvous_service.pb.h"

int main(int argc, char** argv) {
  // Linked in, so that the generated pool holds them.
  (void)ringmaster::v1::SubmitJobRequest::descriptor();
  (void)ringmaster::v1::RegisterNodeRequest::descriptor();
  (void)ringmaster::v1::KvSetRequest::descriptor();
  (void)ringmaster::v1::CommitCheckpointRequest::descriptor();
  (void)ringmaster::v1::ReportMetricsRequest::descriptor();
  for (int i = 1; i < argc; ++i) {
    const google::protobuf::Descriptor* type =
        google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(argv[i]);
    if (type == nullptr) {
      std::fprintf(stderr, "inflate_sites: no message type %s\n", argv[i]);
      return 2;
    }
    const std::vector<std::string> paths = ringmaster::fuzz::InflatablePaths(type);
    for (size_t target = 0; target < paths.size(); ++target) {
      std::printf("%s %zu %s\n", argv[i], target, paths[target].c_str());
    }
  }
  return 0;
}
