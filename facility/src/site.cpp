#include "astral/facility/site.hpp"

#include <algorithm>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace astral::facility {

namespace {

using json = nlohmann::json;

const std::set<std::string> kCoolingKinds = {"cooling_loop", "cdu"};
const std::set<std::string> kPowerKinds = {"feed", "switchgear", "pdu", "power_shelf"};

struct SiteParser {
  std::string name;

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw std::runtime_error(fmt::format("{}: {}: {}", name, where, what));
  }
  void only_keys(const json& j, const std::string& where, std::initializer_list<const char*> keys) const {
    std::set<std::string> allowed(keys.begin(), keys.end());
    for (const auto& [k, _] : j.items())
      if (!allowed.count(k) && k.rfind("comment", 0) != 0)
        fail(where, fmt::format("unknown key '{}' (known: {})", k, fmt::join(allowed, ", ")));
  }
  std::string text(const json& j, const char* key, const std::string& where, bool required) const {
    if (!j.contains(key)) {
      if (required) fail(where, fmt::format("\"{}\" is required", key));
      return {};
    }
    if (!j[key].is_string() || (required && j[key].get<std::string>().empty()))
      fail(where + "." + key, "expected a non-empty string");
    return j[key].get<std::string>();
  }
  std::vector<std::string> list(const json& j, const char* key, const std::string& where) const {
    std::vector<std::string> out;
    if (!j.contains(key)) return out;
    if (!j[key].is_array()) fail(where + "." + key, "expected a list of ids");
    for (const auto& v : j[key]) {
      if (!v.is_string() || v.get<std::string>().empty()) fail(where + "." + key, "ids are non-empty strings");
      out.push_back(v.get<std::string>());
    }
    return out;
  }
};

void add_unique(std::vector<std::string>& to, const std::string& id) {
  if (std::find(to.begin(), to.end(), id) == to.end()) to.push_back(id);
}

// Cross-references, families and cycles. `where` names the element for the message.
void validate(SiteLayout& s, const SiteParser& p) {
  std::map<std::string, std::string> seen;  // id -> where it was defined
  std::map<std::string, std::string> host_rack;
  for (std::size_t i = 0; i < s.racks.size(); ++i) {
    std::string where = fmt::format("racks[{}] ({})", i, s.racks[i].id);
    if (!seen.emplace(s.racks[i].id, where).second) p.fail(where, fmt::format("duplicate id '{}'", s.racks[i].id));
    for (const auto& h : s.racks[i].hosts) {
      auto [it, fresh] = host_rack.emplace(h, s.racks[i].id);
      if (!fresh) p.fail(where, fmt::format("host '{}' is already in rack '{}'", h, it->second));
    }
  }
  for (std::size_t i = 0; i < s.components.size(); ++i) {
    const auto& c = s.components[i];
    std::string where = fmt::format("components[{}] ({})", i, c.id);
    if (!seen.emplace(c.id, where).second) p.fail(where, fmt::format("duplicate id '{}'", c.id));
    if (!kCoolingKinds.count(c.kind) && !kPowerKinds.count(c.kind))
      p.fail(where + ".kind", fmt::format("unknown kind '{}' (cooling_loop, cdu, feed, switchgear, pdu, power_shelf)", c.kind));
  }
  for (std::size_t i = 0; i < s.components.size(); ++i) {
    const auto& c = s.components[i];
    std::string where = fmt::format("components[{}] ({})", i, c.id);
    for (const auto& up : c.fed_by) {
      const SiteComponent* u = s.component(up);
      if (!u) p.fail(where + ".fed_by", fmt::format("unknown component '{}'", up));
      if (is_cooling_kind(u->kind) != is_cooling_kind(c.kind))
        p.fail(where + ".fed_by", fmt::format("'{}' is {} equipment, '{}' is {}", up, u->kind, c.id, c.kind));
    }
    for (const auto& r : c.serves)
      if (!s.rack(r)) p.fail(where + ".serves", fmt::format("unknown rack '{}'", r));
  }
  for (const auto& c : s.components)
    for (auto& rack : s.racks)
      if (std::find(c.serves.begin(), c.serves.end(), rack.id) != c.serves.end())
        add_unique(is_cooling_kind(c.kind) ? rack.cooled_by : rack.powered_by, c.id);
  for (std::size_t i = 0; i < s.racks.size(); ++i) {
    std::string where = fmt::format("racks[{}] ({})", i, s.racks[i].id);
    auto check = [&](const std::vector<std::string>& ids, const char* field, bool cooling) {
      for (const auto& id : ids) {
        const SiteComponent* c = s.component(id);
        if (!c) p.fail(fmt::format("{}.{}", where, field), fmt::format("unknown component '{}'", id));
        if (is_cooling_kind(c->kind) != cooling)
          p.fail(fmt::format("{}.{}", where, field), fmt::format("'{}' is {} equipment", id, c->kind));
      }
    };
    check(s.racks[i].cooled_by, "cooled_by", true);
    check(s.racks[i].powered_by, "powered_by", false);
  }
  // Cycles in fed_by: depth-first with the path on a stack, so the message can show the loop.
  std::map<std::string, int> state;  // 1 on the path, 2 done
  std::vector<std::string> path;
  std::function<void(const SiteComponent&)> visit = [&](const SiteComponent& c) {
    state[c.id] = 1;
    path.push_back(c.id);
    for (const auto& up : c.fed_by) {
      if (state[up] == 1) {
        auto from = std::find(path.begin(), path.end(), up);
        std::vector<std::string> loop(from, path.end());
        loop.push_back(up);
        p.fail(fmt::format("components ({})", c.id), fmt::format("fed_by has a cycle: {}", fmt::join(loop, " -> ")));
      }
      if (state[up] == 0) visit(*s.component(up));
    }
    path.pop_back();
    state[c.id] = 2;
  };
  for (const auto& c : s.components)
    if (state[c.id] == 0) visit(c);
}

}  // namespace

bool is_cooling_kind(const std::string& kind) { return kCoolingKinds.count(kind) > 0; }
bool is_power_kind(const std::string& kind) { return kPowerKinds.count(kind) > 0; }

const SiteRack* SiteLayout::rack(const std::string& id) const {
  for (const auto& r : racks)
    if (r.id == id) return &r;
  return nullptr;
}

const SiteComponent* SiteLayout::component(const std::string& id) const {
  for (const auto& c : components)
    if (c.id == id) return &c;
  return nullptr;
}

const SiteRack* SiteLayout::rack_of_host(const std::string& host) const {
  for (const auto& r : racks)
    if (std::find(r.hosts.begin(), r.hosts.end(), host) != r.hosts.end()) return &r;
  return nullptr;
}

const SiteComponent* SiteLayout::component_for(const std::string& source, const std::string& entity) const {
  const SiteComponent* best = nullptr;
  for (const auto& c : components) {
    if (c.source.empty() || c.source != source) continue;
    bool prefix = c.entity.empty() || entity == c.entity ||
                  (entity.size() > c.entity.size() && entity.compare(0, c.entity.size(), c.entity) == 0 &&
                   entity[c.entity.size()] == '/');
    if (prefix && (!best || c.entity.size() > best->entity.size())) best = &c;
  }
  return best;
}

std::vector<std::string> SiteLayout::racks_served_by(const std::string& component_id) const {
  std::vector<std::string> out;
  for (const auto& r : racks) {
    auto up = upstream_of(r.id);
    if (std::find(up.begin(), up.end(), component_id) != up.end()) out.push_back(r.id);
  }
  return out;
}

std::vector<std::string> SiteLayout::upstream_of(const std::string& rack_id) const {
  std::vector<std::string> out;
  const SiteRack* r = rack(rack_id);
  if (!r) return out;
  for (const auto& id : r->cooled_by) add_unique(out, id);
  for (const auto& id : r->powered_by) add_unique(out, id);
  for (std::size_t i = 0; i < out.size(); ++i)  // breadth first; validation ruled out cycles
    if (const SiteComponent* c = component(out[i]))
      for (const auto& up : c->fed_by) add_unique(out, up);
  return out;
}

std::vector<std::string> unknown_hosts(const SiteLayout& layout, const std::vector<std::string>& hosts) {
  std::vector<std::string> out;
  for (const auto& h : hosts)
    if (!layout.rack_of_host(h)) add_unique(out, h);
  return out;
}

SiteLayout parse_site_layout(const std::string& text, const std::string& name) {
  SiteParser p{name};
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw std::runtime_error(fmt::format("{}: not a JSON object", name));
  if (j.contains("site")) j = j["site"];  // a sources.json holding the layout inline
  if (!j.is_object()) p.fail("site", "expected an object with \"racks\" and \"components\"");
  p.only_keys(j, "top level", {"racks", "components"});
  SiteLayout s;
  if (j.contains("racks")) {
    if (!j["racks"].is_array()) p.fail("racks", "expected a list");
    for (std::size_t i = 0; i < j["racks"].size(); ++i) {
      const json& r = j["racks"][i];
      std::string where = fmt::format("racks[{}]", i);
      if (!r.is_object()) p.fail(where, "expected an object with \"id\"");
      p.only_keys(r, where, {"id", "hosts", "cooled_by", "powered_by", "budget_watts", "source", "entity"});
      SiteRack rack;
      rack.id = p.text(r, "id", where, true);
      rack.hosts = p.list(r, "hosts", where);
      rack.cooled_by = p.list(r, "cooled_by", where);
      rack.powered_by = p.list(r, "powered_by", where);
      rack.source = p.text(r, "source", where, false);
      rack.entity = p.text(r, "entity", where, false);
      if (r.contains("budget_watts")) {
        if (!r["budget_watts"].is_number() || r["budget_watts"].get<double>() <= 0)
          p.fail(where + ".budget_watts", "expected a positive number of watts");
        rack.budget_w = r["budget_watts"].get<double>();
      }
      s.racks.push_back(std::move(rack));
    }
  }
  if (j.contains("components")) {
    if (!j["components"].is_array()) p.fail("components", "expected a list");
    for (std::size_t i = 0; i < j["components"].size(); ++i) {
      const json& c = j["components"][i];
      std::string where = fmt::format("components[{}]", i);
      if (!c.is_object()) p.fail(where, "expected an object with \"id\" and \"kind\"");
      p.only_keys(c, where, {"id", "kind", "source", "entity", "fed_by", "serves"});
      SiteComponent comp;
      comp.id = p.text(c, "id", where, true);
      comp.kind = p.text(c, "kind", where, true);
      comp.source = p.text(c, "source", where, false);
      comp.entity = p.text(c, "entity", where, false);
      comp.fed_by = p.list(c, "fed_by", where);
      comp.serves = p.list(c, "serves", where);
      s.components.push_back(std::move(comp));
    }
  }
  validate(s, p);
  return s;
}

SiteLayout load_site_layout(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open the site layout", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_site_layout(ss.str(), path);
}

std::string site_layout_to_json(const SiteLayout& s) {
  json racks = json::array(), comps = json::array();
  for (const auto& r : s.racks) {
    json o = {{"id", r.id}, {"hosts", r.hosts}, {"cooled_by", r.cooled_by}, {"powered_by", r.powered_by}};
    if (r.budget_w) o["budget_watts"] = *r.budget_w;
    if (!r.source.empty()) o["source"] = r.source;
    if (!r.entity.empty()) o["entity"] = r.entity;
    racks.push_back(std::move(o));
  }
  for (const auto& c : s.components) {
    json o = {{"id", c.id}, {"kind", c.kind}};
    if (!c.source.empty()) o["source"] = c.source;
    if (!c.entity.empty()) o["entity"] = c.entity;
    if (!c.fed_by.empty()) o["fed_by"] = c.fed_by;
    comps.push_back(std::move(o));
  }
  return json{{"racks", racks}, {"components", comps}}.dump(2) + "\n";
}

}  // namespace astral::facility
