#include "coordinator/core/job_summary.h"

#include <map>
#include <string>

#include "common/spec_limits.h"
#include "common/utf8.h"

namespace ringmaster::coordinator {
namespace {

constexpr absl::string_view kCutMarker = " [... cut]";
// JobSpec.name is at most 63 characters since it was first validated; a
// summary never carries more than this of it.
constexpr size_t kMaxSummaryNameBytes = 256;

using StringMap = google::protobuf::Map<std::string, std::string>;

// The first `max_entries` entries of `from` by key whose key and value are
// within the label limits, into `to`; true when any entry was left out.
bool CopyBounded(const StringMap& from, int max_entries, StringMap* to) {
  const std::map<std::string, std::string> sorted(from.begin(), from.end());
  bool left_out = false;
  for (const auto& [key, value] : sorted) {
    if (static_cast<int>(to->size()) >= max_entries || key.size() > kMaxLabelKeyBytes ||
        value.size() > kMaxLabelValueBytes) {
      left_out = true;
      continue;
    }
    (*to)[key] = value;
  }
  return left_out;
}

// The env cut to its limits (names and values within their bytes, the
// first variables by name); true when any was left out.
bool CutEnv(StringMap* env) {
  if (env->size() <= static_cast<size_t>(kMaxEnvVariables)) {
    bool within = true;
    for (const auto& [name, value] : *env) {
      within &= name.size() <= kMaxEnvNameBytes && value.size() <= kMaxEnvValueBytes;
    }
    if (within) return false;
  }
  const std::map<std::string, std::string> sorted(env->begin(), env->end());
  env->clear();
  for (const auto& [name, value] : sorted) {
    if (static_cast<int>(env->size()) >= kMaxEnvVariables || name.size() > kMaxEnvNameBytes ||
        value.size() > kMaxEnvValueBytes) {
      continue;
    }
    (*env)[name] = value;
  }
  return true;
}

// The spec's summary fields, bounded, onto `to`; true when some were cut.
template <typename SpecLike>
bool SummarizeSpec(const v1::JobSpec& spec, SpecLike* to) {
  to->set_name(CutText(spec.name(), kMaxSummaryNameBytes));
  to->set_priority(spec.priority());
  to->set_queue(spec.queue());
  v1::ResourceSpec* resources = to->mutable_resources();
  *resources = spec.resources();
  resources->clear_node_selector();
  resources->set_cuda_graphs(CutText(spec.resources().cuda_graphs(), 16));
  bool cut = CopyBounded(spec.resources().node_selector(), kMaxNodeSelectorEntries,
                         resources->mutable_node_selector());
  cut |= CopyBounded(spec.labels(), kMaxLabels, to->mutable_labels());
  return cut;
}

}  // namespace

std::string CutText(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  if (max_bytes <= kCutMarker.size()) return std::string(text.substr(0, Utf8SafePrefix(text, max_bytes)));
  std::string out(text.substr(0, Utf8SafePrefix(text, max_bytes - kCutMarker.size())));
  out.append(kCutMarker.data(), kCutMarker.size());
  return out;
}

v1::JobSummary SummarizeJob(const v1::Job& job) {
  v1::JobSummary s;
  s.set_id(job.id());
  s.set_abridged(SummarizeSpec(job.spec(), s.mutable_spec()));
  s.set_state(job.state());
  s.set_generation(job.generation());
  if (job.has_submit_time()) *s.mutable_submit_time() = job.submit_time();
  if (job.has_start_time()) *s.mutable_start_time() = job.start_time();
  if (job.has_end_time()) *s.mutable_end_time() = job.end_time();
  if (job.has_placement()) {
    *s.mutable_placement() = job.placement();
    s.mutable_placement()->clear_ranks();
  }
  s.set_message(CutText(job.message(), kMaxSummaryTextBytes));
  s.set_reason(CutText(job.reason(), 64));
  if (job.has_progress()) *s.mutable_progress() = job.progress();
  s.set_restarts(job.restarts());
  s.set_owner(CutText(job.owner(), 256));
  s.set_unschedulable(CutText(job.unschedulable(), kMaxSummaryTextBytes));
  return s;
}

bool AbridgeJob(v1::Job* job, size_t max_bytes) {
  if (job->ByteSizeLong() <= max_bytes) return false;
  job->set_abridged(true);
  job->clear_submitted();
  if (job->ByteSizeLong() <= max_bytes) return true;
  v1::JobSpec* spec = job->mutable_spec();
  StringMap labels, selector;
  CopyBounded(spec->labels(), kMaxLabels, &labels);
  CopyBounded(spec->resources().node_selector(), kMaxNodeSelectorEntries, &selector);
  spec->mutable_labels()->swap(labels);
  spec->mutable_resources()->mutable_node_selector()->swap(selector);
  CutEnv(spec->mutable_env());
  if (job->ByteSizeLong() <= max_bytes) return true;
  v1::JobSpec summary;
  SummarizeSpec(*spec, &summary);
  *spec = std::move(summary);
  job->set_message(CutText(job->message(), kMaxJobTextBytes));
  job->set_unschedulable(CutText(job->unschedulable(), kMaxJobTextBytes));
  return true;
}

}  // namespace ringmaster::coordinator
