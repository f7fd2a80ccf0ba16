#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "weft/server/config/config.hpp"

using weft::server::Config;
using weft::server::ParseConfig;

TEST_CASE("config: an empty file gives every default", "[config]") {
  auto cfg = ParseConfig("", "weftd.toml");
  REQUIRE(cfg.ok());
  CHECK(cfg->server.data_dir == "/var/lib/weft");
  CHECK(cfg->endpoints.api == "tcp://127.0.0.1:7420");
  CHECK(cfg->endpoints.provisioner == "tcp://127.0.0.1:7421");
  CHECK(cfg->endpoints.events == "tcp://127.0.0.1:7422");
  CHECK(cfg->tasks.lease_ms == 30000);
  CHECK(cfg->tasks.max_wait_ms == 30000);
  CHECK(cfg->tasks.default_max_attempts == 3);
  CHECK(cfg->hosts.silent_after_ms == 10000);
  CHECK(cfg->limits.max_frames == 64);
  CHECK(cfg->limits.max_header_bytes == (1u << 20));
  CHECK(cfg->server.idle_spin_us == 200);
}

TEST_CASE("config: values given are used", "[config]") {
  auto cfg = ParseConfig(R"(
[server]
data_dir = "/tmp/w"
log_level = "debug"
idle_spin_us = 0
[endpoints]
api = "tcp://127.0.0.1:*"
[tasks]
lease_ms = 500
[limits]
max_frames = 4
max_header_bytes = 4096
)", "weftd.toml");
  REQUIRE(cfg.ok());
  CHECK(cfg->server.data_dir == "/tmp/w");
  CHECK(cfg->server.log_level == weft::log::Level::kDebug);
  CHECK(cfg->server.idle_spin_us == 0);
  CHECK(cfg->endpoints.api == "tcp://127.0.0.1:*");
  CHECK(cfg->tasks.lease_ms == 500);
  CHECK(cfg->limits.max_frames == 4);
  CHECK(cfg->limits.max_header_bytes == 4096);
}

TEST_CASE("config: an unknown key is named with the known keys of its table", "[config]") {
  auto cfg = ParseConfig("[tasks]\nlease_msec = 10\n", "weftd.toml");
  REQUIRE_FALSE(cfg.ok());
  CHECK(cfg.status().code() == weft::Code::kInvalid);
  CHECK_THAT(cfg.status().message(), Catch::Contains("'lease_msec'") && Catch::Contains("[tasks]") &&
                                         Catch::Contains("lease_ms") && Catch::Contains("max_wait_ms"));
}

TEST_CASE("config: an unknown table is named with the known tables", "[config]") {
  auto cfg = ParseConfig("[taks]\nlease_ms = 10\n", "weftd.toml");
  REQUIRE_FALSE(cfg.ok());
  CHECK_THAT(cfg.status().message(), Catch::Contains("'taks'") && Catch::Contains("tasks"));
}

TEST_CASE("config: a quoted value in the wrong place is shown quoted once", "[config]") {
  auto quoted = ParseConfig("[tasks]\nlease_ms = \"300\"\n", "w.toml");
  REQUIRE_FALSE(quoted.ok());
  INFO(quoted.status().message());
  CHECK_THAT(quoted.status().message(), Catch::Contains("tasks.lease_ms must be an integer from") &&
                                            Catch::Contains(", got \"300\";"));
  CHECK_THAT(quoted.status().message(), !Catch::Contains("'"));
  auto escaped = ParseConfig("[tasks]\nlease_ms = 'a\"b'\n", "w.toml");
  REQUIRE_FALSE(escaped.ok());
  CHECK_THAT(escaped.status().message(), Catch::Contains(R"(, got "a\"b";)"));
}

TEST_CASE("config: a bad value names the key and what is accepted", "[config]") {
  auto negative = ParseConfig("[tasks]\nlease_ms = -5\n", "w.toml");
  REQUIRE_FALSE(negative.ok());
  CHECK_THAT(negative.status().message(), Catch::Contains("tasks.lease_ms") && Catch::Contains("-5") &&
                                              Catch::Contains("integer from"));
  auto text = ParseConfig("[tasks]\nlease_ms = \"soon\"\n", "w.toml");
  REQUIRE_FALSE(text.ok());
  CHECK_THAT(text.status().message(), Catch::Contains("tasks.lease_ms"));
  auto level = ParseConfig("[server]\nlog_level = \"loud\"\n", "w.toml");
  REQUIRE_FALSE(level.ok());
  CHECK_THAT(level.status().message(), Catch::Contains("server.log_level") && Catch::Contains("debug, info"));
  auto endpoint = ParseConfig("[endpoints]\napi = \"localhost:80\"\n", "w.toml");
  REQUIRE_FALSE(endpoint.ok());
  CHECK_THAT(endpoint.status().message(), Catch::Contains("endpoints.api") && Catch::Contains("tcp://"));
  auto spin = ParseConfig("[server]\nidle_spin_us = 20000\n", "w.toml");
  REQUIRE_FALSE(spin.ok());
  CHECK_THAT(spin.status().message(), Catch::Contains("server.idle_spin_us") && Catch::Contains("10000"));
  auto silent = ParseConfig("[hosts]\nheartbeat_ms = 5000\nsilent_after_ms = 1000\n", "w.toml");
  REQUIRE_FALSE(silent.ok());
  CHECK_THAT(silent.status().message(), Catch::Contains("hosts.silent_after_ms"));
}

TEST_CASE("config: invalid TOML says where", "[config]") {
  auto cfg = ParseConfig("[tasks\nlease_ms = 1\n", "w.toml");
  REQUIRE_FALSE(cfg.ok());
  CHECK_THAT(cfg.status().message(), Catch::Contains("w.toml:1:") && Catch::Contains("not valid TOML"));
}

TEST_CASE("config: flags set the config file and the data directory", "[config]") {
  const char* argv[] = {"weftd", "--config", "/etc/w.toml", "--data-dir", "/d"};
  auto flags = weft::server::ParseFlags(5, argv);
  REQUIRE(flags.ok());
  CHECK(flags->config_path == "/etc/w.toml");
  CHECK(flags->data_dir == "/d");
  const char* bad[] = {"weftd", "--data-dir"};
  CHECK_FALSE(weft::server::ParseFlags(2, bad).ok());
  const char* unknown[] = {"weftd", "--port", "1"};
  auto u = weft::server::ParseFlags(3, unknown);
  REQUIRE_FALSE(u.ok());
  CHECK_THAT(u.status().message(), Catch::Contains("--port"));
}

TEST_CASE("config: a missing config file is named", "[config]") {
  auto cfg = weft::server::LoadConfigFile("/nonexistent/weftd.toml");
  REQUIRE_FALSE(cfg.ok());
  CHECK_THAT(cfg.status().message(), Catch::Contains("/nonexistent/weftd.toml"));
}

TEST_CASE("config: [retention] ages default to 30 days (the audit log: for ever), in days or in milliseconds, 0 "
          "for ever, with the round's pace and SQLite's vacuum steps",
          "[config][retention]") {
  constexpr std::int64_t kDay = 24LL * 3600 * 1000;
  using weft::server::RetentionConfig;
  struct Age {
    std::string key;  // <key>_days and <key>_ms
    std::int64_t RetentionConfig::*field;
    std::int64_t default_ms;
  };
  for (const Age& age : {Age{"ended_after", &RetentionConfig::ended_after_ms, 30 * kDay},
                         Age{"tokens_after", &RetentionConfig::tokens_after_ms, 30 * kDay},
                         Age{"audit_after", &RetentionConfig::audit_after_ms, 0}}) {
    INFO(age.key);
    auto parsed = [&](const std::string& toml) {
      auto cfg = ParseConfig("[retention]\n" + toml, "weftd.toml");
      REQUIRE(cfg.ok());
      return cfg->retention.*age.field;
    };
    CHECK(parsed("") == age.default_ms);
    CHECK(parsed(age.key + "_days = 400\n") == 400 * kDay);
    CHECK(parsed(age.key + "_days = 7\n" + age.key + "_ms = 1500\n") == 1500);  // milliseconds win
    CHECK(parsed(age.key + "_days = 0\n") == 0);
  }
  auto defaults = ParseConfig("", "weftd.toml");
  REQUIRE(defaults.ok());
  CHECK(defaults->retention.interval_ms == 300000);
  CHECK(defaults->retention.batch_rows == 500);
  CHECK(defaults->retention.vacuum_pages == 128);
  auto set = ParseConfig("[retention]\ninterval_ms = 60000\nbatch_rows = 100\nvacuum_pages = 0\n", "weftd.toml");
  REQUIRE(set.ok());
  CHECK(set->retention.interval_ms == 60000);
  CHECK(set->retention.batch_rows == 100);
  CHECK(set->retention.vacuum_pages == 0);
  for (const auto& [toml, named] : {std::pair{"batch_rows = 0", "retention.batch_rows"},
                                    {"vacuum_pages = -1", "retention.vacuum_pages"},
                                    {"ended_after = 3", "ended_after_days"}}) {
    auto bad = ParseConfig("[retention]\n" + std::string(toml) + "\n", "weftd.toml");
    REQUIRE_FALSE(bad.ok());
    CHECK_THAT(bad.status().message(), Catch::Contains(named));
  }
  const char* argv[] = {"weftd", "--data-dir", "/tmp/x", "--vacuum"};
  auto flags = weft::server::ParseFlags(4, argv);
  REQUIRE(flags.ok());
  CHECK(flags->vacuum);
}

TEST_CASE("config: resources are kept in the database with postgres, as files with sqlite, unless told", "[config]") {
  auto sqlite = ParseConfig("", "weftd.toml");
  REQUIRE(sqlite.ok());
  CHECK(!sqlite->store.ResourcesInDatabase());
  auto postgres = ParseConfig("[store]\nbackend = \"postgres\"\nconninfo = \"dbname=weft\"\n", "weftd.toml");
  REQUIRE(postgres.ok());
  CHECK(postgres->store.ResourcesInDatabase());
  auto files = ParseConfig("[store]\nbackend = \"postgres\"\nconninfo = \"dbname=weft\"\nresources = \"files\"\n",
                           "weftd.toml");
  REQUIRE(files.ok());
  CHECK(!files->store.ResourcesInDatabase());
  auto database = ParseConfig("[store]\nresources = \"database\"\n", "weftd.toml");
  REQUIRE(database.ok());
  CHECK(database->store.ResourcesInDatabase());
  auto unknown = ParseConfig("[store]\nresources = \"nfs\"\n", "weftd.toml");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == weft::Code::kInvalid);
  CHECK_THAT(unknown.status().message(), Catch::Contains("weftd.toml: store.resources is \"nfs\"") &&
                                             Catch::Contains("\"database\"") && Catch::Contains("\"files\""));
}
