// Every command of `weft`, one file per noun. A later noun (catalog, cluster,
// job, resource, tenant...) adds <noun>_commands.cpp with its Register function,
// declares it here, calls it from RegisterAllCommands, and lists the file in
// cli/CMakeLists.txt.
#pragma once

#include "command.hpp"

namespace weft::cli {

void RegisterAllCommands(CommandTable& table);

void RegisterStatusCommands(CommandTable& table);  // status
void RegisterHostCommands(CommandTable& table);    // host list
void RegisterPluginCommands(CommandTable& table);  // plugin list
void RegisterCatalogCommands(CommandTable& table);  // catalog import|export|check, <kind> list|get|put|delete
void RegisterClusterCommands(CommandTable& table);  // cluster plan|create|delete|scale|...
void RegisterJobCommands(CommandTable& table);      // job list|show|watch|abort|retry
void RegisterResourceCommands(CommandTable& table);  // resource upload|list|stage|recall|sync|delete

}  // namespace weft::cli
