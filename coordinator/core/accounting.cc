#include "coordinator/core/accounting.h"

#include <utility>

namespace ringmaster::coordinator {

std::string UsageVisibleTo(const Caller& caller) { return caller.admin ? std::string() : caller.user; }

absl::StatusOr<UsageReport> Accounting::Usage(UsageGroup by, absl::Time since, const std::string& user) const {
  UsageReport report;
  report.as_of = clock_->Now();
  if (since > report.as_of) return report;
  UsageQuery query;
  query.by = by;
  query.since = since;
  query.now = report.as_of;
  query.user = user;
  absl::StatusOr<std::vector<UsageTotal>> rows = store_->LoadUsage(query);
  if (!rows.ok()) return rows.status();
  report.rows = *std::move(rows);
  return report;
}

absl::StatusOr<std::vector<UsageTotal>> Accounting::QueueTotals() const {
  absl::StatusOr<UsageReport> report = Usage(UsageGroup::kQueue, absl::InfinitePast(), "");
  if (!report.ok()) return report.status();
  return std::move(report->rows);
}

}  // namespace ringmaster::coordinator
