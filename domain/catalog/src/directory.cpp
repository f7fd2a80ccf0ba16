#include "weft/catalog/directory.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

namespace weft::catalog {
namespace fs = std::filesystem;

Result<ImportResult> ImportDirectory(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound("catalog directory '" + dir.string() +
                            "' does not exist or is not a directory; give the folder that holds providers/, "
                            "hardwaretypes/, imagetypes/, services/ and clustertemplates/");
  }
  // The kind folders there are, and the other folders (a misspelled one
  // would otherwise be passed over in silence). Hidden ones (.git) are not named.
  std::set<std::string> kinds;
  for (Kind kind : kAllKinds) kinds.insert(std::string(KindDirectory(kind)));
  std::vector<std::string> found;
  std::vector<std::string> other_folders;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    const std::string name = it->path().filename().string();
    if (kinds.count(name)) found.push_back(name);
    else if (name.empty() || name[0] != '.') other_folders.push_back(name);
  }
  if (ec) return Status::Unavailable("cannot list '" + dir.string() + "': " + ec.message() + "; check its permissions");
  const std::string looked_for = "providers/, hardwaretypes/, imagetypes/, services/ or clustertemplates/";
  if (found.empty()) {
    // One level too high (the folder that holds the catalog folder) is the usual slip.
    std::string hint;
    std::sort(other_folders.begin(), other_folders.end());
    for (const std::string& name : other_folders)
      for (const std::string& k : kinds)
        if (hint.empty() && fs::is_directory(dir / name / k, ec)) hint = "; did you mean '" + (dir / name).string() + "'?";
    return Status::NotFound("'" + dir.string() + "' holds none of the catalog folders " + looked_for +
                            ", so there is nothing to import" +
                            (hint.empty() ? "; give the folder that holds them" : hint));
  }
  ImportResult result;
  std::sort(other_folders.begin(), other_folders.end());
  for (const std::string& name : other_folders)
    result.report.skipped.push_back(
        {name + "/", "not a catalog folder; only " + looked_for + " are read (a misspelled name?)"});
  for (Kind kind : kAllKinds) {
    const std::string sub(KindDirectory(kind));
    fs::path kdir = dir / sub;
    if (!fs::is_directory(kdir, ec)) continue;
    std::vector<fs::path> files;
    for (fs::directory_iterator it(kdir, ec), end; !ec && it != end; it.increment(ec)) files.push_back(it->path());
    if (ec) {
      return Status::Unavailable("cannot list '" + kdir.string() + "': " + ec.message() + "; check its permissions");
    }
    std::sort(files.begin(), files.end());
    std::set<std::string> seen;
    for (const auto& path : files) {
      const std::string rel = sub + "/" + path.filename().string();
      if (!fs::is_regular_file(path, ec) || path.extension() != ".json") {
        result.report.skipped.push_back({rel, "not a .json file; only <name>.json files are read"});
        continue;
      }
      std::ifstream in(path, std::ios::binary);
      std::stringstream buf;
      buf << in.rdbuf();
      if (!in && !in.eof()) {
        result.report.skipped.push_back({rel, "cannot be read; check its permissions"});
        continue;
      }
      auto doc = ParseJsonText(buf.str(), rel);
      if (!doc.ok()) {
        result.report.skipped.push_back({rel, doc.status().message()});
        continue;
      }
      std::vector<std::string> warnings;
      Catalog one;
      auto name = one.PutJson(kind, *doc, &warnings);
      if (!name.ok()) {
        result.report.skipped.push_back({rel, name.status().message()});
        continue;
      }
      if (path.stem().string() != *name) {
        result.report.skipped.push_back(
            {rel, std::string(KindName(kind)) + " '" + *name + "' is in a file named '" + path.filename().string() +
                      "'; rename the file to '" + *name + ".json'"});
        continue;
      }
      if (!seen.insert(*name).second) {
        result.report.skipped.push_back({rel, std::string(KindName(kind)) + " '" + *name + "' appears twice"});
        continue;
      }
      // Parse again into the result (cheap, and keeps Catalog's Put the only way in).
      auto again = result.catalog.PutJson(kind, *doc);
      (void)again;
      result.report.imported.push_back({kind, *name, rel, std::move(warnings)});
    }
  }
  return result;
}

namespace {

template <typename M>
Status WriteAll(const M& map, Kind kind, const fs::path& dir) {
  if (map.empty()) return Status::Ok();
  fs::path kdir = dir / std::string(KindDirectory(kind));
  std::error_code ec;
  fs::create_directories(kdir, ec);
  if (ec) return Status::Unavailable("cannot create '" + kdir.string() + "': " + ec.message());
  for (const auto& [name, entity] : map) {
    if (!IsValidName(name)) {
      return Status::Invalid(std::string(KindName(kind)) + " '" + name +
                             "' has a name that is not safe as a file name; rename it");
    }
    fs::path file = kdir / (name + ".json");
    fs::path tmp = kdir / ("." + name + ".json.tmp");
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << ToJson(entity).dump(2) << "\n";
      out.close();
      if (!out) return Status::Unavailable("cannot write '" + tmp.string() + "'; check space and permissions");
    }
    fs::rename(tmp, file, ec);
    if (ec) return Status::Unavailable("cannot replace '" + file.string() + "': " + ec.message());
  }
  return Status::Ok();
}

}  // namespace

Status ExportDirectory(const Catalog& c, const fs::path& dir) {
  WEFT_RETURN_IF_ERROR(WriteAll(c.providers, Kind::kProvider, dir));
  WEFT_RETURN_IF_ERROR(WriteAll(c.hardwaretypes, Kind::kHardwareType, dir));
  WEFT_RETURN_IF_ERROR(WriteAll(c.imagetypes, Kind::kImageType, dir));
  WEFT_RETURN_IF_ERROR(WriteAll(c.services, Kind::kService, dir));
  WEFT_RETURN_IF_ERROR(WriteAll(c.clustertemplates, Kind::kClusterTemplate, dir));
  return Status::Ok();
}

}  // namespace weft::catalog
