// Input files and bundled examples.
#include "astral/seer/inputs.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "astral/topo/fabric.hpp"
#include "bundled_table.hpp"

namespace astral::seer {
namespace {

std::string strip_json(const std::string& name) {
  constexpr std::string_view ext = ".json";
  if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0)
    return name.substr(0, name.size() - ext.size());
  return name;
}

nlohmann::json parse(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw SpecError(fmt::format("{}: not valid JSON ({})", what, e.what()));
  }
}

}  // namespace

std::vector<std::string> bundled_names(const std::string& category) {
  std::vector<std::string> names;
  const std::string prefix = category + "/";
  for (int i = 0; i < detail::kBundledFileCount; ++i) {
    std::string path = detail::kBundledFiles[i].path;
    if (path.rfind(prefix, 0) == 0) names.push_back(strip_json(path.substr(prefix.size())));
  }
  return names;
}

const char* bundled_text(const std::string& category, const std::string& name) {
  const std::string wanted = category + "/" + strip_json(name) + ".json";
  for (int i = 0; i < detail::kBundledFileCount; ++i)
    if (wanted == detail::kBundledFiles[i].path) return detail::kBundledFiles[i].text;
  return nullptr;
}

nlohmann::json load_json(const std::string& category, const std::string& name_or_path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) {
    std::ifstream in(name_or_path, std::ios::binary);
    if (!in) throw SpecError(fmt::format("{}: cannot be read", name_or_path));
    std::stringstream ss;
    ss << in.rdbuf();
    return parse(ss.str(), name_or_path);
  }
  if (const char* text = bundled_text(category, name_or_path)) return parse(text, category + "/" + name_or_path);
  std::string known;
  for (const auto& n : bundled_names(category)) known += (known.empty() ? "" : ", ") + n;
  throw SpecError(fmt::format("{}: no such file, and not a bundled {} name (bundled: {})", name_or_path, category,
                              known.empty() ? "none" : known));
}

namespace {
template <typename F>
auto with_origin(const std::string& origin, F&& f) {
  try {
    return f();
  } catch (const SpecError& e) {
    throw SpecError(fmt::format("{}: {}", origin, e.what()));
  }
}
}  // namespace

ModelSpec load_model(const std::string& name_or_path) {
  auto j = load_json("models", name_or_path);
  return with_origin(name_or_path, [&] { return model_from_json(j); });
}

HardwareSpec load_hardware(const std::string& name_or_path) {
  auto j = load_json("hardware", name_or_path);
  return with_origin(name_or_path, [&] { return hardware_from_json(j); });
}

TrainConfig load_config(const std::string& name_or_path) {
  auto j = load_json("configs", name_or_path);
  return with_origin(name_or_path, [&] { return config_from_json(j); });
}

ModelSpec model_from_entry(const nlohmann::json& v) {
  return v.is_object() ? model_from_json(v) : load_model(v.is_string() ? v.get<std::string>() : v.dump());
}

TrainConfig config_from_entry(const nlohmann::json& v) {
  return v.is_object() ? config_from_json(v) : load_config(v.is_string() ? v.get<std::string>() : v.dump());
}

Network load_network(const std::string& name_or_path, const HardwareSpec& hw) {
  auto j = load_json("networks", name_or_path);
  return with_origin(name_or_path, [&] {
    if (j.is_object() && j.value("format", "") == topo::kFabricFormat) {
      try {
        return network_from_fabric(topo::fabric_from_json(j), hw);
      } catch (const topo::FabricError& e) {
        throw SpecError(e.what());
      }
    }
    return network_from_json(j, hw);
  });
}

}  // namespace astral::seer
