// Clusters, nodes and jobs in the store (migration 4). Statements are prepared
// per call: a job's bookkeeping is a few statements per task, far from the
// take/finish hot path that the prepared statements of store.cpp serve.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "insert_id.hpp"
#include "weft/server/store/database.hpp"
#include "weft/server/store/store.hpp"

namespace weft::store {
namespace {

constexpr const char* kClusterColumns =
    "id, tenant, name, owner, status, spec, layout, previous, created_at_ms, updated_at_ms, expire_at_ms, latest_job, "
    "template_name, provider_name, node_count, services";
// The same without the three large texts, unless the row's summary was never
// derived (node_count -1, a row written before the summary columns existed).
constexpr const char* kClusterSummaryColumns =
    "id, tenant, name, owner, status, CASE WHEN node_count < 0 THEN spec ELSE '' END, "
    "CASE WHEN node_count < 0 THEN layout ELSE '' END, '', created_at_ms, updated_at_ms, expire_at_ms, latest_job, "
    "template_name, provider_name, node_count, services";
constexpr const char* kJobColumns =
    "id, tenant, cluster_id, operation, status, requested_by, options, before, target, message, parent_job, "
    "created_at_ms, updated_at_ms, finished_at_ms, history";
// The same without the two cluster states, the large part of a job (megabytes for
// a cluster of thousands of nodes).
constexpr const char* kJobWithoutStatesColumns =
    "id, tenant, cluster_id, operation, status, requested_by, options, '', '', message, parent_job, "
    "created_at_ms, updated_at_ms, finished_at_ms, history";
// What lists of jobs read: not the history either, the last column, which
// SQLite reaches only through the overflow pages of the states before it.
constexpr const char* kJobListColumns =
    "id, tenant, cluster_id, operation, status, requested_by, options, '', '', message, parent_job, "
    "created_at_ms, updated_at_ms, finished_at_ms, '[]'";

using json = nlohmann::json;

// What a cluster's summary needs from its spec or its layout text, read
// without building either as a tree: a spec carries the cluster's copies of
// its template and services (kilobytes a summary never looks at), a layout
// every node. The same as reading the parsed documents: spec.template.name and
// spec.provider.name when they are strings; the number of layout.nodes and the
// string services of each node that is an object; a key given twice counts
// once, with its last value.
class SummaryReader : public nlohmann::json_sax<json> {
 public:
  enum class Doc { kSpec, kLayout };
  explicit SummaryReader(Doc doc) : doc_(doc) {}

  // False when `text` is not one JSON document.
  bool Read(std::string_view text) { return json::sax_parse(text, this); }

  std::string template_name;
  std::string provider_name;
  std::int64_t size = 0;
  std::set<std::string> services;

  bool null() override { return Scalar(nullptr); }
  bool boolean(bool) override { return Scalar(nullptr); }
  bool number_integer(number_integer_t) override { return Scalar(nullptr); }
  bool number_unsigned(number_unsigned_t) override { return Scalar(nullptr); }
  bool number_float(number_float_t, const string_t&) override { return Scalar(nullptr); }
  bool string(string_t& text) override { return Scalar(&text); }
  bool binary(binary_t&) override { return Scalar(nullptr); }
  bool start_object(std::size_t) override { return Open(true); }
  bool start_array(std::size_t) override { return Open(false); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& name) override {
    Key k = Key::kOther;
    if (name == "template") k = Key::kTemplate;
    else if (name == "provider") k = Key::kProvider;
    else if (name == "name") k = Key::kName;
    else if (name == "nodes") k = Key::kNodes;
    else if (name == "services") k = Key::kServices;
    frames_.back().key = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  // What a value is by where it sits.
  enum class Role { kOther, kTop, kNamed, kName, kNodes, kNode, kServices, kService };
  enum class Key { kOther, kTemplate, kProvider, kName, kNodes, kServices };
  struct Frame {
    Role role = Role::kOther;
    bool object = false;
    Key key = Key::kOther;
    std::string* name = nullptr;  // kNamed: template_name or provider_name
  };

  // The role of the value that starts now; resets what it replaces (a later
  // value of the same key wins).
  Role Begin() {
    if (frames_.empty()) return Role::kTop;
    Frame& parent = frames_.back();
    switch (parent.role) {
      case Role::kTop:
        if (doc_ == Doc::kSpec && (parent.key == Key::kTemplate || parent.key == Key::kProvider)) {
          NameOf(parent.key)->clear();
          return Role::kNamed;
        }
        if (doc_ == Doc::kLayout && parent.key == Key::kNodes) {
          size = 0;
          services.clear();
          return Role::kNodes;
        }
        return Role::kOther;
      case Role::kNamed:
        if (parent.key != Key::kName) return Role::kOther;
        parent.name->clear();
        return Role::kName;
      case Role::kNodes: ++size; return Role::kNode;
      case Role::kNode:
        if (parent.key != Key::kServices) return Role::kOther;
        node_services_.clear();
        return Role::kServices;
      case Role::kServices: return Role::kService;
      default: return Role::kOther;
    }
  }

  bool Scalar(const std::string* text) {
    const Role role = Begin();
    if (text && role == Role::kName) *frames_.back().name = *text;
    if (text && role == Role::kService) node_services_.push_back(*text);
    return true;
  }

  bool Open(bool object) {
    const Role role = Begin();
    Frame f;
    f.object = object;
    // Only an object is a spec, a template, a provider, a layout or a node;
    // only an array a list of nodes or of services.
    const bool fits = role == Role::kTop || role == Role::kNamed || role == Role::kNode ? object
                      : role == Role::kNodes || role == Role::kServices          ? !object
                                                                                  : false;
    f.role = fits ? role : Role::kOther;
    if (f.role == Role::kNamed) f.name = NameOf(frames_.back().key);
    if (f.role == Role::kNode) node_services_.clear();
    frames_.push_back(f);
    return true;
  }

  bool Close() {
    if (frames_.back().role == Role::kNode) services.insert(node_services_.begin(), node_services_.end());
    frames_.pop_back();
    return true;
  }

  std::string* NameOf(Key key) { return key == Key::kTemplate ? &template_name : &provider_name; }

  Doc doc_;
  std::vector<Frame> frames_;
  std::vector<std::string> node_services_;  // of the node being read
};

// The summary fields of *out from a spec and a layout text (empty names and no
// nodes where a text does not parse).
void Summarize(std::string_view spec_json, std::string_view layout_json, ClusterRecord* out) {
  SummaryReader spec(SummaryReader::Doc::kSpec);
  SummaryReader layout(SummaryReader::Doc::kLayout);
  const bool spec_ok = spec.Read(spec_json);
  const bool layout_ok = layout.Read(layout_json);
  out->template_name = spec_ok ? std::move(spec.template_name) : std::string();
  out->provider_name = spec_ok ? std::move(spec.provider_name) : std::string();
  out->size = layout_ok ? layout.size : 0;
  out->services.clear();
  if (layout_ok) out->services.assign(layout.services.begin(), layout.services.end());
}

// Summarize's fields from the documents themselves, read as it reads their
// texts (see SummaryReader).
void SummarizeDocs(const json& spec, const json& layout, ClusterRecord* out) {
  const auto name_of = [&](const char* key) {
    auto entity = spec.find(key);  // end() when the spec is no object
    if (entity == spec.end() || !entity->is_object()) return std::string();
    auto name = entity->find("name");
    return name != entity->end() && name->is_string() ? name->get<std::string>() : std::string();
  };
  out->template_name = name_of("template");
  out->provider_name = name_of("provider");
  out->size = 0;
  out->services.clear();
  auto nodes = layout.find("nodes");
  if (nodes == layout.end() || !nodes->is_array()) return;
  out->size = static_cast<std::int64_t>(nodes->size());
  std::set<std::string> services;
  for (const json& node : *nodes) {
    if (!node.is_object()) continue;
    auto list = node.find("services");
    if (list == node.end() || !list->is_array()) continue;
    for (const json& s : *list)
      if (s.is_string()) services.insert(s.get<std::string>());
  }
  out->services.assign(services.begin(), services.end());
}

// The services column, a JSON array of names. A list of clusters reads one per
// cluster: names without escapes (catalog names are letters, digits, . _ -)
// are taken from between their quotes, without a JSON parser.
std::vector<std::string> ServicesFrom(const std::string& text) {
  std::vector<std::string> out;
  if (text.find('\\') == std::string::npos) {
    for (std::size_t open = text.find('"'); open != std::string::npos; open = text.find('"', open)) {
      const std::size_t close = text.find('"', open + 1);
      if (close == std::string::npos) break;
      out.emplace_back(text, open + 1, close - open - 1);
      open = close + 1;
    }
    return out;
  }
  const json list = json::parse(text, nullptr, false);
  if (!list.is_array()) return out;
  for (const json& s : list)
    if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

ClusterRecord ReadCluster(const sql::Statement& s) {
  ClusterRecord c;
  c.id = std::to_string(s.Int(0));
  c.tenant = s.Text(1);
  c.name = s.Text(2);
  c.owner = s.Text(3);
  c.status = s.Text(4);
  c.spec_json = s.Text(5);
  c.layout_json = s.Text(6);
  c.previous_json = s.Text(7);
  c.created_at_ms = s.Int(8);
  c.updated_at_ms = s.Int(9);
  c.expire_at_ms = s.Int(10);
  c.latest_job = s.Text(11);
  c.size = s.Int(14);
  if (c.size < 0) {
    Summarize(c.spec_json, c.layout_json, &c);
  } else {
    c.template_name = s.Text(12);
    c.provider_name = s.Text(13);
    c.services = ServicesFrom(s.Text(15));
  }
  return c;
}

// A row of kClusterSummaryColumns.
ClusterRecord ReadClusterSummary(const sql::Statement& s) {
  ClusterRecord c = ReadCluster(s);
  c.spec_json.clear();
  c.layout_json.clear();
  return c;
}

JobRecord ReadJob(const sql::Statement& s) {
  JobRecord j;
  j.id = std::to_string(s.Int(0));
  j.tenant = s.Text(1);
  j.cluster_id = s.Text(2);
  j.operation = s.Text(3);
  j.status = s.Text(4);
  j.requested_by = s.Text(5);
  j.options_json = s.Text(6);
  j.before_json = s.Text(7);
  j.target_json = s.Text(8);
  j.message = s.Text(9);
  j.parent_job = s.Text(10);
  j.created_at_ms = s.Int(11);
  j.updated_at_ms = s.Int(12);
  j.finished_at_ms = s.Int(13);
  j.history_json = s.Text(14);
  return j;
}

// Ids are integers in the tables and strings everywhere else; a string that is
// not a number names no row.
bool ParseId(std::string_view text, std::int64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  std::int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

template <typename Record, typename Read>
Result<std::vector<Record>> Rows(sql::Statement& st, Read read) {
  std::vector<Record> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& row) { out.push_back(read(row)); }));
  return out;
}

}  // namespace

Status Store::InsertCluster(ClusterRecord* c) {
  Summarize(c->spec_json, c->layout_json, c);
  return InsertSummarizedCluster(c);
}

Status Store::InsertCluster(ClusterRecord* c, const json& spec, const json& layout) {
  SummarizeDocs(spec, layout, c);
  return InsertSummarizedCluster(c);
}

Status Store::InsertSummarizedCluster(ClusterRecord* c) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(sql::InsertGivingId(
          database().dialect(),
          "INSERT INTO clusters (tenant, name, owner, status, spec, layout, previous, created_at_ms, updated_at_ms, "
          "expire_at_ms, latest_job, template_name, provider_name, node_count, services) VALUES (?1, ?2, ?3, ?4, ?5, "
          "?6, ?7, ?8, ?8, ?9, ?10, ?11, ?12, ?13, ?14)")));
  const std::string services = json(c->services).dump();
  st.Bind(1, c->tenant)
      .Bind(2, c->name)
      .Bind(3, c->owner)
      .Bind(4, c->status)
      .Bind(5, c->spec_json)
      .Bind(6, c->layout_json)
      .Bind(7, c->previous_json)
      .Bind(8, c->created_at_ms)
      .Bind(9, c->expire_at_ms)
      .Bind(10, c->latest_job)
      .Bind(11, c->template_name)
      .Bind(12, c->provider_name)
      .Bind(13, c->size)
      .Bind(14, services);
  WEFT_ASSIGN_OR_RETURN(const std::int64_t id, sql::RunInsert(database(), st));
  c->id = std::to_string(id);
  c->updated_at_ms = c->created_at_ms;
  ClusterWritten(id);
  return Status::Ok();
}

Status Store::UpdateCluster(const ClusterRecord& c) {
  std::int64_t id = 0;
  if (!ParseId(c.id, &id)) return Status::NotFound("cluster '" + c.id + "' does not exist");
  ClusterWritten(id);
  // Most updates (a job starting or ending) write the spec and layout the row
  // holds already: its summary stays, and reading it again from the texts (a
  // cluster of 1,000 nodes: megabytes of JSON) is skipped.
  bool unchanged = false;
  {
    WEFT_ASSIGN_OR_RETURN(sql::Statement same,
                          database().Prepare("SELECT CASE WHEN spec = ?2 AND layout = ?3 AND node_count >= 0 THEN 1 "
                                             "ELSE 0 END FROM clusters WHERE id = ?1"));
    same.Bind(1, id).Bind(2, c.spec_json).Bind(3, c.layout_json);
    WEFT_ASSIGN_OR_RETURN(bool found, same.Step());
    if (!found) return Status::NotFound("cluster '" + c.id + "' does not exist");
    unchanged = same.Int(0) == 1;
  }
  if (unchanged) {
    WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                          database().Prepare("UPDATE clusters SET status = ?2, previous = ?3, updated_at_ms = ?4, "
                                             "expire_at_ms = ?5, latest_job = ?6, owner = ?7 WHERE id = ?1"));
    return st.Bind(1, id)
        .Bind(2, c.status)
        .Bind(3, c.previous_json)
        .Bind(4, c.updated_at_ms)
        .Bind(5, c.expire_at_ms)
        .Bind(6, c.latest_job)
        .Bind(7, c.owner)
        .Run();
  }
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("UPDATE clusters SET status = ?2, spec = ?3, layout = ?4, previous = ?5, "
                                           "updated_at_ms = ?6, expire_at_ms = ?7, latest_job = ?8, owner = ?9, "
                                           "template_name = ?10, provider_name = ?11, node_count = ?12, "
                                           "services = ?13 WHERE id = ?1"));
  ClusterRecord summary;
  Summarize(c.spec_json, c.layout_json, &summary);
  WEFT_RETURN_IF_ERROR(st.Bind(1, id)
                           .Bind(2, c.status)
                           .Bind(3, c.spec_json)
                           .Bind(4, c.layout_json)
                           .Bind(5, c.previous_json)
                           .Bind(6, c.updated_at_ms)
                           .Bind(7, c.expire_at_ms)
                           .Bind(8, c.latest_job)
                           .Bind(9, c.owner)
                           .Bind(10, summary.template_name)
                           .Bind(11, summary.provider_name)
                           .Bind(12, summary.size)
                           .Bind(13, json(summary.services).dump())
                           .Run());
  if (database().Changes() != 1) return Status::NotFound("cluster '" + c.id + "' does not exist");
  return Status::Ok();
}

Result<std::optional<ClusterRecord>> Store::GetCluster(std::string_view cluster_id) {
  std::int64_t id = 0;
  if (!ParseId(cluster_id, &id)) return std::optional<ClusterRecord>();
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare(std::string("SELECT ") + kClusterColumns + " FROM clusters WHERE id = ?1"));
  st.Bind(1, id);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<ClusterRecord>();
  return std::optional<ClusterRecord>(ReadCluster(st));
}

Result<std::optional<ClusterRecord>> Store::GetClusterSummary(std::string_view cluster_id) {
  std::int64_t id = 0;
  if (!ParseId(cluster_id, &id)) return std::optional<ClusterRecord>();
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare(std::string("SELECT ") + kClusterSummaryColumns +
                                                              " FROM clusters WHERE id = ?1"));
  st.Bind(1, id);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<ClusterRecord>();
  return std::optional<ClusterRecord>(ReadClusterSummary(st));
}

Result<std::optional<ClusterRecord>> Store::FindCluster(std::string_view tenant, std::string_view id_or_name) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare(std::string("SELECT ") + kClusterColumns +
                                                              " FROM clusters WHERE tenant = ?1 AND name = ?2 AND "
                                                              "status != 'terminated' ORDER BY id DESC LIMIT 1"));
  st.Bind(1, tenant).Bind(2, id_or_name);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (row) return std::optional<ClusterRecord>(ReadCluster(st));
  Result<std::optional<ClusterRecord>> by_id = GetCluster(id_or_name);
  if (!by_id.ok()) return by_id;
  if (by_id->has_value() && (**by_id).tenant == tenant) return by_id;
  WEFT_ASSIGN_OR_RETURN(sql::Statement gone, database().Prepare(std::string("SELECT ") + kClusterColumns +
                                                                " FROM clusters WHERE tenant = ?1 AND name = ?2 "
                                                                "ORDER BY id DESC LIMIT 1"));
  gone.Bind(1, tenant).Bind(2, id_or_name);
  WEFT_ASSIGN_OR_RETURN(bool found, gone.Step());
  if (found) return std::optional<ClusterRecord>(ReadCluster(gone));
  return std::optional<ClusterRecord>();
}

Result<std::vector<ClusterRecord>> Store::ListClusters(std::string_view tenant, bool include_terminated) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(std::string("SELECT ") + kClusterColumns + " FROM clusters WHERE tenant = ?1" +
                         (include_terminated ? "" : " AND status != 'terminated'") + " ORDER BY id"));
  st.Bind(1, tenant);
  return Rows<ClusterRecord>(st, ReadCluster);
}

Result<std::vector<ClusterRecord>> Store::ListClusterSummaries(std::string_view tenant, bool include_terminated) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(std::string("SELECT ") + kClusterSummaryColumns + " FROM clusters WHERE tenant = ?1" +
                         (include_terminated ? "" : " AND status != 'terminated'") + " ORDER BY id"));
  st.Bind(1, tenant);
  return Rows<ClusterRecord>(st, ReadClusterSummary);
}

struct Store::ClusterSummaries {
  std::map<std::int64_t, ClusterRecord> by_id;  // every tenant's clusters
  std::set<std::int64_t> written;               // read again at the next visit
};

void Store::ClusterWritten(std::int64_t id) {
  if (cluster_summaries_) cluster_summaries_->written.insert(id);
  (in_transaction_ ? open_cluster_writes_ : done_cluster_writes_).ids.insert(id);
}

void Store::ForgetClusterSummaries() {
  cluster_summaries_.reset();
  ClusterWrites all;
  all.all = true;
  (in_transaction_ ? open_cluster_writes_ : done_cluster_writes_).Merge(std::move(all));
}

void Store::ClusterWrites::Merge(ClusterWrites&& other) {
  all = all || other.all;
  if (all) {
    ids.clear();
  } else if (ids.empty()) {
    ids = std::move(other.ids);
  } else {
    ids.merge(other.ids);
  }
  other = ClusterWrites();
}

Store::ClusterWrites Store::TakeCommittedClusterWrites() { return std::exchange(done_cluster_writes_, ClusterWrites()); }

void Store::ClustersWrittenElsewhere(const ClusterWrites& writes) {
  if (writes.all) {
    cluster_summaries_.reset();
  } else if (cluster_summaries_) {
    cluster_summaries_->written.insert(writes.ids.begin(), writes.ids.end());
  }
}

Status Store::VisitClusterSummaries(std::string_view tenant, bool include_terminated,
                                    const std::function<void(const ClusterRecord&)>& visit) {
  if (!cluster_summaries_) {
    auto fresh = std::make_shared<ClusterSummaries>();
    WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                          database().Prepare(std::string("SELECT ") + kClusterSummaryColumns + " FROM clusters"));
    WEFT_ASSIGN_OR_RETURN(std::vector<ClusterRecord> all, Rows<ClusterRecord>(st, ReadClusterSummary));
    for (ClusterRecord& c : all) {
      std::int64_t id = 0;
      if (ParseId(c.id, &id)) fresh->by_id[id] = std::move(c);
    }
    cluster_summaries_ = std::move(fresh);
  }
  ClusterSummaries& kept = *cluster_summaries_;
  for (auto it = kept.written.begin(); it != kept.written.end(); it = kept.written.erase(it)) {
    WEFT_ASSIGN_OR_RETURN(std::optional<ClusterRecord> c, GetClusterSummary(std::to_string(*it)));
    if (c) {
      kept.by_id[*it] = std::move(*c);
    } else {
      kept.by_id.erase(*it);
    }
  }
  for (const auto& [id, c] : kept.by_id)
    if (c.tenant == tenant && (include_terminated || c.status != "terminated")) visit(c);
  return Status::Ok();
}

Result<std::vector<ClusterCount>> Store::CountClusters() {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare("SELECT c.tenant, c.status, COUNT(*), "
                         "COALESCE(SUM((SELECT COUNT(*) FROM nodes n WHERE n.cluster_id = CAST(c.id AS TEXT))), 0) "
                         "FROM clusters c GROUP BY c.tenant, c.status ORDER BY c.tenant, c.status"));
  return Rows<ClusterCount>(st, [](const sql::Statement& row) {
    return ClusterCount{row.Text(0), row.Text(1), row.Int(2), row.Int(3)};
  });
}

Result<std::vector<ClusterRecord>> Store::ListExpiredClusters(std::int64_t now_ms) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare(std::string("SELECT ") + kClusterColumns +
                                           " FROM clusters WHERE expire_at_ms > 0 AND expire_at_ms <= ?1 AND "
                                           "status != 'terminated' ORDER BY id"));
  st.Bind(1, now_ms);
  return Rows<ClusterRecord>(st, ReadCluster);
}

Status Store::PutNode(const NodeRecord& n) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("INSERT INTO nodes (cluster_id, id, results) VALUES (?1, ?2, ?3) "
                                           "ON CONFLICT (cluster_id, id) DO UPDATE SET results = ?3"));
  return st.Bind(1, n.cluster_id).Bind(2, n.id).Bind(3, n.results_json).Run();
}

Status Store::DeleteNode(std::string_view cluster_id, std::string_view node_id) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare("DELETE FROM nodes WHERE cluster_id = ?1 AND id = ?2"));
  return st.Bind(1, cluster_id).Bind(2, node_id).Run();
}

Result<std::vector<NodeRecord>> Store::ListNodes(std::string_view cluster_id) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare("SELECT cluster_id, id, results FROM nodes WHERE cluster_id = ?1 ORDER BY id"));
  st.Bind(1, cluster_id);
  return Rows<NodeRecord>(st, [](const sql::Statement& s) { return NodeRecord{s.Text(0), s.Text(1), s.Text(2)}; });
}

Status Store::InsertJob(JobRecord* j) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(sql::InsertGivingId(
          database().dialect(),
          "INSERT INTO jobs (tenant, cluster_id, operation, status, requested_by, options, before, target, message, "
          "parent_job, created_at_ms, updated_at_ms, finished_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
          "?11, ?11, ?12)")));
  st.Bind(1, j->tenant)
      .Bind(2, j->cluster_id)
      .Bind(3, j->operation)
      .Bind(4, j->status)
      .Bind(5, j->requested_by)
      .Bind(6, j->options_json)
      .Bind(7, j->before_json)
      .Bind(8, j->target_json)
      .Bind(9, j->message)
      .Bind(10, j->parent_job)
      .Bind(11, j->created_at_ms)
      .Bind(12, j->finished_at_ms);
  WEFT_ASSIGN_OR_RETURN(const std::int64_t id, sql::RunInsert(database(), st));
  j->id = std::to_string(id);
  j->updated_at_ms = j->created_at_ms;
  return Status::Ok();
}

Status Store::UpdateJob(const JobRecord& j) {
  std::int64_t id = 0;
  if (!ParseId(j.id, &id)) return Status::NotFound("job '" + j.id + "' does not exist");
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare("UPDATE jobs SET status = ?2, message = ?3, updated_at_ms = ?4, finished_at_ms = ?5, "
                         "options = ?6, history = ?7 WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(st.Bind(1, id)
                           .Bind(2, j.status)
                           .Bind(3, j.message)
                           .Bind(4, j.updated_at_ms)
                           .Bind(5, j.finished_at_ms)
                           .Bind(6, j.options_json)
                           .Bind(7, j.history_json)
                           .Run());
  if (database().Changes() != 1) return Status::NotFound("job '" + j.id + "' does not exist");
  return Status::Ok();
}

Result<std::optional<JobRecord>> Store::GetJob(std::string_view job_id, bool with_states) {
  std::int64_t id = 0;
  if (!ParseId(job_id, &id)) return std::optional<JobRecord>();
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare(std::string("SELECT ") +
                                                              (with_states ? kJobColumns : kJobWithoutStatesColumns) +
                                                              " FROM jobs WHERE id = ?1"));
  st.Bind(1, id);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<JobRecord>();
  return std::optional<JobRecord>(ReadJob(st));
}

Result<std::vector<JobRecord>> Store::ListJobs(std::string_view tenant, std::string_view cluster_id,
                                               std::int64_t limit, std::int64_t before_id,
                                               std::optional<std::string_view> owner) {
  // One statement for each set of filters given, so each one can use the index on id as it stands. The owner's
  // filter is a subquery on the tenant's clusters: the page holds `limit` of the owner's jobs however many of
  // other users' lie between.
  std::string where = " WHERE tenant = ?1";
  int next = 3;
  if (!cluster_id.empty()) where += " AND cluster_id = ?" + std::to_string(next++);
  if (before_id > 0) where += " AND id < ?" + std::to_string(next++);
  if (owner.has_value())
    where += " AND cluster_id IN (SELECT CAST(c.id AS TEXT) FROM clusters c WHERE c.tenant = ?1 AND c.owner = ?" +
             std::to_string(next++) + ")";
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare(std::string("SELECT ") + kJobListColumns +
                                                              " FROM jobs" + where + " ORDER BY id DESC LIMIT ?2"));
  st.Bind(1, tenant).Bind(2, limit);
  next = 3;
  if (!cluster_id.empty()) st.Bind(next++, cluster_id);
  if (before_id > 0) st.Bind(next++, before_id);
  if (owner.has_value()) st.Bind(next++, *owner);
  return Rows<JobRecord>(st, ReadJob);
}

Result<std::vector<JobRecord>> Store::ListUnfinishedJobs() {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare(std::string("SELECT ") + kJobColumns +
                                                              " FROM jobs WHERE finished_at_ms = 0 ORDER BY id"));
  return Rows<JobRecord>(st, ReadJob);
}

}  // namespace weft::store
