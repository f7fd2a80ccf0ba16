// The text helpers of weft/common/text.hpp.
#include <catch2/catch.hpp>

#include "weft/common/text.hpp"

namespace weft {
namespace {

TEST_CASE("OneLine joins libpq's lines, hint and continuation lines, into one log line") {
  // Verbatim shapes of libpq 15's messages: a refused connection (its hint on
  // a tab-indented line), a multi-host conninfo (one line per host) and a
  // server error with DETAIL and HINT lines.
  CHECK(OneLine("connection to server at \"127.0.0.1\", port 5433 failed: Connection refused\n"
                "\tIs the server running on that host and accepting TCP/IP connections?\n") ==
        "connection to server at \"127.0.0.1\", port 5433 failed: Connection refused; "
        "Is the server running on that host and accepting TCP/IP connections?");
  CHECK(OneLine("connection to server at \"a\" (10.0.0.1), port 5432 failed: timeout expired\n"
                "connection to server at \"b\" (10.0.0.2), port 5432 failed: server is in hot standby mode\n") ==
        "connection to server at \"a\" (10.0.0.1), port 5432 failed: timeout expired; "
        "connection to server at \"b\" (10.0.0.2), port 5432 failed: server is in hot standby mode");
  CHECK(OneLine("ERROR:  duplicate key value\nDETAIL:  Key (id)=(1) already exists.\nHINT:  retry\n") ==
        "ERROR:  duplicate key value; DETAIL:  Key (id)=(1) already exists.; HINT:  retry");
}

TEST_CASE("OneLine leaves a one-line message as it is and never ends in a separator") {
  CHECK(OneLine("server closed the connection unexpectedly") == "server closed the connection unexpectedly");
  CHECK(OneLine("a\tb") == "a\tb");  // a tab inside a line is the message's own
  CHECK(OneLine("no newline at the end ") == "no newline at the end");
  CHECK(OneLine("blank lines\n\n\nbetween\n\n") == "blank lines; between");
  CHECK(OneLine("\n\tonly a hint\n") == "only a hint");
  CHECK(OneLine("") == "");
  CHECK(OneLine("\n\n").empty());
}

}  // namespace
}  // namespace weft

TEST_CASE("NearestName finds a misspelt or differently written name, and nothing for a stranger") {
  const std::vector<std::string> known = {"dry_run", "tenant", "services", "size"};
  CHECK(weft::NearestName("dryRun", known) == "dry_run");
  CHECK(weft::NearestName("dry-run", known) == "dry_run");
  CHECK(weft::NearestName("tenat", known) == "tenant");
  CHECK(weft::NearestName("servcies", known) == "services");
  CHECK(weft::NearestName("colour", known).empty());
  CHECK(weft::NearestName("sz", known).empty());  // two edits of a two-letter word is not a likeness
}
