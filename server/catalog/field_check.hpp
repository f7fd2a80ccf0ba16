// catalog.check's look at plugin fields: every provider's `provisioner` fields
// and every service action's `fields` against the field schema its plugin's
// hosts registered (host.register, as plugin.list shows it), and the fields
// that name a resource against the tenant's resource store. What would fail
// only when a cluster is created is found here instead.
//
// Free function on values; the resource store is only read.
#pragma once

#include <map>
#include <string>

#include "weft/catalog/catalog.hpp"
#include "weft/common/status.hpp"
#include "weft/server/resources/resource_store.hpp"

namespace weft::catalog {

struct FieldFindings {
  json problems = json::array();  // the reply's "fields": each fails a task when it runs
  json warnings = json::array();  // what could not be checked, or may fail with some plugins
};

// `descriptors`: plugin type -> the descriptor a host registered for it
// ({"type", "fields":[{"name","label","type","required","default"?}], "resource_types"}).
// `resources` may be null: then no field is checked against the resource store.
Result<FieldFindings> CheckPluginFields(const Catalog& cat, const std::map<std::string, json>& descriptors,
                                        resources::ResourceStore* resources, const std::string& tenant);

}  // namespace weft::catalog
