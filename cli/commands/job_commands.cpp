#include "commands/commands.hpp"

namespace weft::cli {

void RegisterJobCommands(CommandTable& /*table*/) {}

}  // namespace weft::cli
