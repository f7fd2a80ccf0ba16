#include <sstream>

#include <catch2/catch.hpp>

#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"

namespace weft::cli {

TEST_CASE("cli table: columns align on the widest cell, numbers right, no trailing spaces", "[cli]") {
  Table t({"ID", "CAPACITY", "PLUGINS"});
  t.AlignRight(1);
  t.AddRow({"h1", "4", "fake"});
  t.AddRow({"host-long", "128", ""});
  std::ostringstream out;
  t.Print(out);
  CHECK(out.str() ==
        "ID         CAPACITY  PLUGINS\n"
        "h1                4  fake\n"
        "host-long       128\n");
}

TEST_CASE("cli table: UTF-8 counts one column per code point, control characters are neutralised", "[cli]") {
  Table t({"A", "B"});
  t.AddRow({"\xC3\xA9t\xC3\xA9", "x"});  // "été": 5 bytes, 3 columns
  t.AddRow({"ab\x1b[2J", "y"});
  std::ostringstream out;
  t.Print(out);
  CHECK(out.str() ==
        "A       B\n"
        "\xC3\xA9t\xC3\xA9     x\n"
        "ab?[2J  y\n");
}

TEST_CASE("cli table: key/value blocks align the values", "[cli]") {
  KeyValues kv;
  kv.Add("server", "weftd");
  kv.Add("provisioner", "tcp://127.0.0.1:7421");
  std::ostringstream out;
  kv.Print(out, "  ");
  CHECK(out.str() ==
        "  server       weftd\n"
        "  provisioner  tcp://127.0.0.1:7421\n");
}

TEST_CASE("cli format: missing fields show as '-', durations read like a person would say them", "[cli]") {
  json obj = {{"s", "x"}, {"n", 3}, {"b", true}, {"a", {"p", "q"}}, {"z", nullptr}};
  CHECK(Text(obj, "s") == "x");
  CHECK(Text(obj, "n") == "3");
  CHECK(Text(obj, "z") == "-");
  CHECK(Text(obj, "absent") == "-");
  CHECK(Text(json::array(), "s") == "-");
  CHECK(YesNo(obj, "b") == "yes");
  CHECK(YesNo(obj, "s") == "-");
  CHECK(Join(obj, "a") == "p, q");
  CHECK(Join(obj, "absent") == "-");
  CHECK(Int(obj, "s", 7) == 7);
  CHECK(Duration(0) == "0ms");
  CHECK(Duration(22) == "22ms");
  CHECK(Duration(900) == "900ms");
  CHECK(Duration(999) == "999ms");
  CHECK(Duration(1000) == "1s");
  CHECK(Duration(5230) == "5.2s");
  CHECK(Duration(9960) == "10s");
  CHECK(Duration(4999) == "5s");
  CHECK(Duration(5000) == "5s");
  CHECK(Duration(22'400) == "22s");
  CHECK(Duration(59'700) == "1m");
  CHECK(Duration(300'000) == "5m");
  CHECK(Duration(312000) == "5m 12s");
  CHECK(Duration(50'340'000) == "13h 59m");
  CHECK(Duration(7'200'000) == "2h");
  CHECK(Duration(90'000'000) == "1d 1h");
  // A day's minutes are kept: 23h 57m left plus 1h is not "1d 0h".
  CHECK(Duration(89'820'000) == "1d 0h 57m");
  CHECK(Duration(604'799'000) == "6d 23h 59m");
  CHECK(Duration(7 * 86'400'000LL) == "7d");
  CHECK(Duration(30 * 86'400'000LL + 14 * 3'600'000LL) == "30d 14h");
  CHECK(Ago(10'000, 9'500) == "just now");
  CHECK(Ago(10'000, 0) == "-");
  CHECK(Ago(70'000, 10'000) == "1m ago");
  CHECK(Ago(85'000, 10'000) == "1m 15s ago");
}

}  // namespace weft::cli
