// Every command of `weft`, one file per noun. A later noun (catalog, cluster,
// job, resource, tenant...) adds <noun>_commands.cpp with its Register function,
// declares it here, calls it from RegisterAllCommands, and lists the file in
// cli/CMakeLists.txt.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/cli/command.hpp"

namespace weft::cli {

void RegisterAllCommands(CommandTable& table);

class Context;
// Follows a job with a progress bar until it ends (job_commands.cpp); a failed job
// (or one undone after failing) is an error whose failed tasks were printed.
// `resumed`: the job ran before (job retry), so its duration is what we watch.
Status WaitForJob(Context& ctx, const std::string& job_id, bool resumed = false);
// One line of the progress bar for a job.get reply's job, `elapsed_ms` watched so far.
std::string ProgressLine(const nlohmann::json& job, std::int64_t elapsed_ms);
// One failed task (a job.get task): its message, each of its lines on a line of
// its own, then the tails of its output.
void PrintFailedTask(std::ostream& out, const nlohmann::json& task, const std::string& indent);
// "waiting for a host that runs plugin 'x': ..." for a job's `waiting_for_plugins`; "" when empty.
std::string WaitingForHosts(const nlohmann::json& plugins);
// The plugin files hosts refused (plugin.list's or host.list's `refused`), one
// "  REFUSED file (tenant t, type x) [on host h]: reason" line each (plugin_commands.cpp).
void PrintRefusedPlugins(std::ostream& out, const nlohmann::json& refused, bool with_host);

void RegisterStatusCommands(CommandTable& table);  // status
void RegisterHostCommands(CommandTable& table);    // host list|show
void RegisterPluginCommands(CommandTable& table);  // plugin list
void RegisterCatalogCommands(CommandTable& table);  // catalog import|export|check, <kind> list|get|put|delete
void RegisterClusterCommands(CommandTable& table);  // cluster plan|create|delete|scale|...
void RegisterJobCommands(CommandTable& table);      // job list|show|watch|abort|retry
void RegisterResourceCommands(CommandTable& table);  // resource upload|list|stage|recall|sync|delete
void RegisterSecurityCommands(CommandTable& table);  // host token create|accept|revoke|requests, tenant, user, credentials
void RegisterLoginCommands(CommandTable& table);     // user passwd, token, gateway credentials
void RegisterAuditCommands(CommandTable& table);     // audit
void RegisterCapacityCommands(CommandTable& table);  // capacity
void RegisterEventsCommands(CommandTable& table);    // events

}  // namespace weft::cli
