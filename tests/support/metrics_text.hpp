// weftd's /metrics as a test reads it: the text of one scrape, and one sample's value.
#pragma once

#include <sstream>
#include <string>

#include "support/web.hpp"
#include "support/weftd.hpp"

namespace weft::testing {

// weftd's /metrics, as a scrape reads it.
inline std::string ScrapeMetrics(const Weftd& s) {
  const std::string url = s.endpoints().value("metrics", std::string());
  const std::size_t from = url.find("//") + 2;
  return HttpSend("http://" + url.substr(from, url.find('/', from) - from), "GET", "/metrics").body;
}

// One sample's value (`name{labels}` exactly as rendered); -1 when absent.
inline double MetricValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return -1;
}

}  // namespace weft::testing
