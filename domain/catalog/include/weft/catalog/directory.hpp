// The Coopr directory layout of a catalog: providers/ hardwaretypes/ imagetypes/
// services/ clustertemplates/, one JSON file per entity named <name>.json.
// Pure functions over the file system; no state. Safe to call from any thread as
// long as no two calls write the same directory.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "weft/catalog/catalog.hpp"

namespace weft::catalog {

struct ImportedEntity {
  Kind kind;
  std::string name;
  std::string file;  // relative to the imported directory, e.g. "services/nginx.json"
  std::vector<std::string> warnings;
};

struct SkippedFile {
  std::string file;    // relative to the imported directory
  std::string reason;  // a sentence: what is wrong and what to do
};

struct ImportReport {
  std::vector<ImportedEntity> imported;  // in kind order, then file name
  std::vector<SkippedFile> skipped;
};

struct ImportResult {
  Catalog catalog;
  ImportReport report;
};

// Reads every <kind dir>/*.json. A file that does not parse or validate, whose entity
// name differs from its file name, or that repeats a name, is skipped with its reason;
// other files in the kind folders are skipped too, and so are folders that are not
// kind folders. Missing kind folders are fine, but not all of them: fails when
// `dir` is not a readable directory or holds no kind folder at all.
Result<ImportResult> ImportDirectory(const std::filesystem::path& dir);

// Writes every entity as <dir>/<kind dir>/<name>.json (2-space indented, sorted keys,
// trailing newline), creating folders as needed and replacing files of the same name.
// Files of entities not in `catalog` are left alone.
Status ExportDirectory(const Catalog& catalog, const std::filesystem::path& dir);

}  // namespace weft::catalog
