// The shape of include/collcomm, checked (label symbolic): no two headers include each other,
// directly or through others; each folder includes only the layers below it (DESIGN.md, "Layout"):
//   transport/  tags, device handles, host-side connection setup: no executor (gpu/, host/, kernels/)
//   kernels/    the GPU's device side: never gpu/ or host/
//   gpu/ host/  the executors: never each other
//   detail/     shared by both executors: never an executor, kernels or transports
// and every folder's main header says what the folder is.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

using graph = std::map<std::string, std::vector<std::string>>;  // header -> collcomm headers it includes

graph read_includes() {
  graph g;
  const fs::path root = COLLCOMM_INCLUDE_DIR;
  const std::regex inc(R"(#include <(collcomm/[^>]+)>)");
  for (const auto& e : fs::recursive_directory_iterator(root / "collcomm")) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path());
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    auto& out = g[fs::relative(e.path(), root).generic_string()];
    for (std::sregex_iterator it(text.begin(), text.end(), inc), end; it != end; ++it) out.push_back((*it)[1]);
  }
  return g;
}

// A cycle through `u`, if any, as "a -> b -> a".
bool find_cycle(const graph& g, const std::string& u, std::map<std::string, int>& state, std::vector<std::string>& path,
                std::string& cycle) {
  state[u] = 1;
  path.push_back(u);
  if (auto it = g.find(u); it != g.end())
    for (const std::string& v : it->second) {
      if (state[v] == 1) {
        for (auto p = std::find(path.begin(), path.end(), v); p != path.end(); ++p) cycle += *p + " -> ";
        cycle += v;
        return true;
      }
      if (state[v] == 0 && find_cycle(g, v, state, path, cycle)) return true;
    }
  path.pop_back();
  state[u] = 2;
  return false;
}

bool starts(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

TEST_CASE("layout: every included collcomm header exists, and no include circle") {
  const graph g = read_includes();
  REQUIRE(g.size() > 40);
  for (const auto& [h, incs] : g)
    for (const std::string& i : incs) {
      INFO(h << " includes " << i);
      CHECK(g.count(i) == 1);
    }
  std::map<std::string, int> state;
  for (const auto& [h, incs] : g) {
    std::vector<std::string> path;
    std::string cycle;
    if (state[h] == 0 && find_cycle(g, h, state, path, cycle)) FAIL("include circle: " << cycle);
  }
}

TEST_CASE("layout: each folder includes only the layers it may") {
  const graph g = read_includes();
  const std::map<std::string, std::vector<const char*>> forbidden = {
      {"collcomm/transport/",
       {"collcomm/gpu/", "collcomm/host/", "collcomm/kernels/", "collcomm/gpu.hpp", "collcomm/host.hpp"}},
      {"collcomm/kernels/", {"collcomm/gpu/", "collcomm/host/", "collcomm/gpu.hpp", "collcomm/host.hpp"}},
      {"collcomm/gpu/", {"collcomm/host/", "collcomm/host.hpp"}},
      {"collcomm/host/", {"collcomm/gpu/", "collcomm/kernels/", "collcomm/gpu.hpp"}},
      {"collcomm/detail/", {"collcomm/gpu/", "collcomm/host/", "collcomm/kernels/", "collcomm/transport/"}},
      {"collcomm/algo/", {"collcomm/gpu/", "collcomm/host/", "collcomm/kernels/", "collcomm/transport/"}},
  };
  int checked = 0;
  for (const auto& [h, incs] : g)
    for (const auto& [folder, bad] : forbidden) {
      if (!starts(h, folder.c_str())) continue;
      ++checked;
      for (const std::string& i : incs)
        for (const char* b : bad) {
          INFO(h << " includes " << i);
          CHECK_FALSE(starts(i, b));
        }
    }
  CHECK(checked > 30);
}
