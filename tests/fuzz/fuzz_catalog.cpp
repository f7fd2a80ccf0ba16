// Fuzzes the catalog entity parsers through Catalog::PutJson, the path every
// `catalog.put` request and every imported file takes. Built once per kind
// (WEFT_FUZZ_KIND, see CMakeLists.txt); the input is the entity's JSON text, so
// examples/catalog/<kind>s/*.json are seeds as they are.
//
// Beyond "no crash", it checks what entities.hpp promises: a parsed entity has a
// valid name, ToJson gives back the document that was parsed, and that JSON
// parses again to an equal entity.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "weft/catalog/catalog.hpp"

using weft::fuzz::Require;
namespace catalog = weft::catalog;

namespace {

const catalog::Kind kKind = *catalog::KindFromName(WEFT_FUZZ_KIND);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto doc = catalog::ParseJsonText(weft::fuzz::Bytes(data, size), "fuzz input");
  if (!doc.ok()) {
    Require(!doc.status().message().empty(), "malformed JSON says why");
    return 0;
  }

  catalog::Catalog c;
  std::vector<std::string> warnings;
  auto name = c.PutJson(kKind, *doc, &warnings);
  if (!name.ok()) {
    Require(!name.status().message().empty() && c.size() == 0, "a refused entity says why and is not kept");
    return 0;
  }
  Require(catalog::IsValidName(*name), "a stored entity has a valid name", *name);
  Require(c.size() == 1 && c.Names(kKind) == std::vector<std::string>{*name}, "exactly the entity is stored");

  auto out = c.GetJson(kKind, *name);
  Require(out.ok(), "a stored entity can be read back", out.status().ToString());
  Require(*out == *doc, "ToJson gives back the parsed document", weft::wire::Dump(*doc) + "\n" + weft::wire::Dump(*out));

  catalog::Catalog again;
  auto name2 = again.PutJson(kKind, *out, nullptr);
  Require(name2.ok() && *name2 == *name, "ToJson output parses again", name2.status().ToString());
  Require(again == c, "and gives an equal catalog");

  // The whole-catalog reads run over one entity whose references all dangle.
  for (const auto& d : catalog::CheckReferences(c)) Require(!d.message.empty(), "a dangling reference says why");
  (void)catalog::ProviderTypesInUse(c);
  (void)catalog::AutomatorTypesInUse(c);
  Require(c.Erase(kKind, *name) && c.size() == 0, "the entity can be erased");
  return 0;
}
