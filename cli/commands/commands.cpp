#include "weft/cli/commands.hpp"

namespace weft::cli {

void RegisterAllCommands(CommandTable& table) {
  // The order here is the order of `weft help`.
  RegisterStatusCommands(table);
  RegisterHostCommands(table);
  RegisterPluginCommands(table);
  RegisterCatalogCommands(table);
  RegisterClusterCommands(table);
  RegisterJobCommands(table);
  RegisterEventsCommands(table);
  RegisterResourceCommands(table);
  RegisterSecurityCommands(table);
  RegisterLoginCommands(table);
  RegisterAuditCommands(table);
  RegisterCapacityCommands(table);
}

}  // namespace weft::cli
