// The statuses of clusters, jobs and task attempts, and the operations a job
// runs, as enums with the exact text the wire, the store and the CLI use
// (docs/protocol.md). weftd and the CLI compare these, never the strings;
// the text appears only where a value is read or written.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <utility>

namespace weft {

enum class ClusterStatus { kPending, kActive, kStopped, kIncomplete, kInconsistent, kTerminated };
enum class JobStatus { kRunning, kFailing, kSucceeded, kFailed, kAborted };
enum class AttemptStatus { kRunning, kSucceeded, kFailed, kExpired, kUndelivered, kCancelled };
// A planner operation (cluster create, delete, scale, ...), or what only jobs
// do: "rollback" (to the cluster's previous state) and "undo" (a failed job's).
enum class JobOperation {
  kCreate,
  kDelete,
  kScale,
  kAddServices,
  kRemoveServices,
  kStart,
  kStop,
  kRestart,
  kReconfigure,
  kUpgrade,
  kRollback,
  kUndo
};

namespace lifecycle_detail {

template <typename E, std::size_t N>
constexpr std::string_view Name(const std::array<std::pair<E, std::string_view>, N>& names, E value) {
  for (const auto& [e, n] : names)
    if (e == value) return n;
  return "";
}

template <typename E, std::size_t N>
constexpr std::optional<E> Find(const std::array<std::pair<E, std::string_view>, N>& names, std::string_view text) {
  for (const auto& [e, n] : names)
    if (n == text) return e;
  return std::nullopt;
}

inline constexpr std::array<std::pair<ClusterStatus, std::string_view>, 6> kClusterStatuses{{
    {ClusterStatus::kPending, "pending"},
    {ClusterStatus::kActive, "active"},
    {ClusterStatus::kStopped, "stopped"},
    {ClusterStatus::kIncomplete, "incomplete"},
    {ClusterStatus::kInconsistent, "inconsistent"},
    {ClusterStatus::kTerminated, "terminated"},
}};
inline constexpr std::array<std::pair<JobStatus, std::string_view>, 5> kJobStatuses{{
    {JobStatus::kRunning, "running"},
    {JobStatus::kFailing, "failing"},
    {JobStatus::kSucceeded, "succeeded"},
    {JobStatus::kFailed, "failed"},
    {JobStatus::kAborted, "aborted"},
}};
inline constexpr std::array<std::pair<AttemptStatus, std::string_view>, 6> kAttemptStatuses{{
    {AttemptStatus::kRunning, "running"},
    {AttemptStatus::kSucceeded, "succeeded"},
    {AttemptStatus::kFailed, "failed"},
    {AttemptStatus::kExpired, "expired"},
    {AttemptStatus::kUndelivered, "undelivered"},
    {AttemptStatus::kCancelled, "cancelled"},
}};
inline constexpr std::array<std::pair<JobOperation, std::string_view>, 12> kJobOperations{{
    {JobOperation::kCreate, "create"},
    {JobOperation::kDelete, "delete"},
    {JobOperation::kScale, "scale"},
    {JobOperation::kAddServices, "add-services"},
    {JobOperation::kRemoveServices, "remove-services"},
    {JobOperation::kStart, "start"},
    {JobOperation::kStop, "stop"},
    {JobOperation::kRestart, "restart"},
    {JobOperation::kReconfigure, "reconfigure"},
    {JobOperation::kUpgrade, "upgrade"},
    {JobOperation::kRollback, "rollback"},
    {JobOperation::kUndo, "undo"},
}};

}  // namespace lifecycle_detail

constexpr std::string_view ToString(ClusterStatus s) {
  return lifecycle_detail::Name(lifecycle_detail::kClusterStatuses, s);
}
constexpr std::string_view ToString(JobStatus s) { return lifecycle_detail::Name(lifecycle_detail::kJobStatuses, s); }
constexpr std::string_view ToString(AttemptStatus s) {
  return lifecycle_detail::Name(lifecycle_detail::kAttemptStatuses, s);
}
constexpr std::string_view ToString(JobOperation o) {
  return lifecycle_detail::Name(lifecycle_detail::kJobOperations, o);
}

// nullopt for text that names no such value (an older or newer weftd's, or a typo).
constexpr std::optional<ClusterStatus> ClusterStatusFrom(std::string_view text) {
  return lifecycle_detail::Find(lifecycle_detail::kClusterStatuses, text);
}
constexpr std::optional<JobStatus> JobStatusFrom(std::string_view text) {
  return lifecycle_detail::Find(lifecycle_detail::kJobStatuses, text);
}
constexpr std::optional<AttemptStatus> AttemptStatusFrom(std::string_view text) {
  return lifecycle_detail::Find(lifecycle_detail::kAttemptStatuses, text);
}
constexpr std::optional<JobOperation> JobOperationFrom(std::string_view text) {
  return lifecycle_detail::Find(lifecycle_detail::kJobOperations, text);
}

}  // namespace weft
