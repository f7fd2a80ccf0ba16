#include "commands/commands.hpp"

namespace weft::cli {

void RegisterResourceCommands(CommandTable& /*table*/) {}

}  // namespace weft::cli
