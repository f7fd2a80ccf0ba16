// weft::queue::TaskTexts: members of a task being handed out that a take
// decorator gives as JSON text (as wire::Dump writes it) instead of in the
// task's tree: parts that many tasks share (the job engine's cluster, node,
// config...), made once and written out verbatim, never copied into a tree
// and serialized again per take (server/hosts/dispatcher.hpp).
//
// Later decorators do not see them: the auth decorator opens sealed values in
// the tree only, so a part that holds one goes in the tree. Header-only.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace weft::queue {

struct TaskTexts {
  struct Member {
    std::string name;
    std::shared_ptr<const std::string> text;
  };
  std::vector<Member> members;

  void Add(std::string name, std::shared_ptr<const std::string> text) {
    members.push_back({std::move(name), std::move(text)});
  }
};

}  // namespace weft::queue
