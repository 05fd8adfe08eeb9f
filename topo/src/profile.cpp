// Node profiles: JSON files saying what a node should have (see topo/profiles/README.md).
#include <cstdio>
#include <fstream>

#include <astral/common/json_number.hpp>
#include <fmt/format.h>

#include "astral/topo/audit.hpp"

namespace astral::topo {
namespace {

using nlohmann::json;

class FieldReader {
 public:
  FieldReader(const json& root, std::string source) : root_(root), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw TopologyError(fmt::format("{}: {} {}", source_, field, what));
  }

  const json* find(const std::string& dotted) const {
    const json* cur = &root_;
    size_t start = 0;
    while (start <= dotted.size()) {
      size_t dot = dotted.find('.', start);
      std::string key = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!cur->is_object() || !cur->contains(key)) return nullptr;
      cur = &(*cur)[key];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return cur;
  }

  std::optional<int> count(const std::string& field) const {
    const json* v = find(field);
    if (!v) return std::nullopt;
    const std::optional<int> n = json_integer<int>(*v);
    if (!n || *n < 0 || *n > 4096) fail(field, "must be a non-negative integer");
    return n;
  }

  std::optional<double> number(const std::string& field) const {
    const json* v = find(field);
    if (!v) return std::nullopt;
    if (!v->is_number() || v->get<double>() <= 0) fail(field, "must be a positive number");
    return v->get<double>();
  }

  std::string text(const std::string& field, const std::string& fallback = "") const {
    const json* v = find(field);
    if (!v) return fallback;
    if (!v->is_string()) fail(field, "must be a string");
    return v->get<std::string>();
  }

  std::vector<std::string> strings(const std::string& field) const {
    const json* v = find(field);
    if (!v) return {};
    if (!v->is_array()) fail(field, "must be a list of strings");
    std::vector<std::string> out;
    for (const auto& e : *v) {
      if (!e.is_string()) fail(field, "must be a list of strings");
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  // "x16 Gen5"
  std::optional<PcieLink> link(const std::string& field) const {
    std::string s = text(field);
    if (s.empty()) return std::nullopt;
    PcieLink l;
    char tail = 0;
    if (std::sscanf(s.c_str(), "x%d Gen%d%c", &l.width, &l.generation, &tail) != 2 || l.width <= 0 ||
        l.width > 32 || l.generation < 1 || l.generation > 6)
      fail(field, fmt::format("\"{}\" is not a link like \"x16 Gen5\"", s));
    return l;
  }

 private:
  const json& root_;
  std::string source_;
};

PathClass parse_path_class(const FieldReader& r, const std::string& field, const std::string& s) {
  for (PathClass c : {PathClass::PIX, PathClass::PXB, PathClass::PHB, PathClass::NODE, PathClass::SYS})
    if (s == to_string(c)) return c;
  r.fail(field, fmt::format("\"{}\" is not one of PIX, PXB, PHB, NODE, SYS", s));
}

}  // namespace

Profile parse_profile(const json& j, const std::string& source) {
  FieldReader r(j, source);
  if (!j.is_object()) r.fail("(top level)", "must be a JSON object");
  Profile p;
  p.name = r.text("name", source);
  p.description = r.text("description");
  p.gpu_count = r.count("gpus.count");
  p.gpu_device_ids = r.strings("gpus.device_ids");
  for (const auto& id : p.gpu_device_ids) {
    unsigned v = 0, d = 0;
    char tail = 0;
    if (std::sscanf(id.c_str(), "%4x:%4x%c", &v, &d, &tail) != 2)
      r.fail("gpus.device_ids", fmt::format("entry \"{}\" is not vendor:device like \"10de:2330\"", id));
  }
  p.gpu_link = r.link("gpus.link");
  p.nvswitch_count = r.count("nvswitches.count");
  p.nvswitch_link = r.link("nvswitches.link");
  p.rdma_nic_count = r.count("rdma_nics.count");
  p.nic_link = r.link("rdma_nics.link");
  p.port_rate_gbps = r.number("rdma_nics.port_rate_gbps");
  p.min_firmware = r.text("rdma_nics.min_firmware");
  if (std::string ratio = r.text("gpu_nic_ratio", "1:1");
      std::sscanf(ratio.c_str(), "%d:%d", &p.gpus_per_rail, &p.nics_per_rail) != 2 || p.gpus_per_rail < 1 ||
      p.nics_per_rail < 1 || (p.gpus_per_rail > 1 && p.nics_per_rail > 1))
    r.fail("gpu_nic_ratio", fmt::format("\"{}\" is not \"1:k\" or \"k:1\"", ratio));
  p.worst_rail_path = parse_path_class(r, "rail_path", r.text("rail_path", "PIX"));
  p.acs = r.text("acs", "off");
  if (p.acs != "off" && p.acs != "on" && p.acs != "any") r.fail("acs", "must be \"off\", \"on\" or \"any\"");
  if (r.find("iommu")) p.iommu_modes = r.strings("iommu");
  for (const auto& m : p.iommu_modes)
    if (m != "off" && m != "passthrough" && m != "translated")
      r.fail("iommu", fmt::format("mode \"{}\" is not off, passthrough or translated", m));
  std::string gdr = r.text("gpudirect", "required");
  if (gdr != "required" && gdr != "optional") r.fail("gpudirect", "must be \"required\" or \"optional\"");
  p.gpudirect_required = gdr == "required";
  return p;
}

Profile load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw TopologyError(path + ": cannot read profile");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) throw TopologyError(path + ": not valid JSON");
  return parse_profile(j, path);
}

const std::vector<std::pair<std::string_view, std::string_view>>& builtin_profile_texts();  // generated

std::vector<std::string> builtin_profile_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : builtin_profile_texts()) names.emplace_back(name);
  return names;
}

Profile load_profile_by_name_or_path(const std::string& name_or_path) {
  for (const auto& [name, text] : builtin_profile_texts())
    if (name == name_or_path) return parse_profile(json::parse(text), "profile " + name_or_path);
  if (!std::ifstream(name_or_path))
    throw TopologyError(fmt::format("{}: neither a bundled profile ({}) nor a readable file", name_or_path,
                                    fmt::join(builtin_profile_names(), ", ")));
  return load_profile(name_or_path);
}

}  // namespace astral::topo
