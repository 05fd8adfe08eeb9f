#pragma once
// Loading Seer's inputs: a JSON file path, or the name of a bundled example (seer/data, compiled
// into the library): models "gpt3-175b", hardware "h100-sxm", configs, networks, validation sets.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "astral/seer/network.hpp"
#include "astral/seer/spec.hpp"

namespace astral::seer {

// Categories are the folders of seer/data: "models", "hardware", "configs", "networks", "validation".
std::vector<std::string> bundled_names(const std::string& category);
// The text of a bundled file, or nullptr.
const char* bundled_text(const std::string& category, const std::string& name);

// Reads `name_or_path` as a file when one exists there, else as a bundled name. Throws SpecError
// naming the input when it is neither or is not valid JSON.
nlohmann::json load_json(const std::string& category, const std::string& name_or_path);

ModelSpec load_model(const std::string& name_or_path);
HardwareSpec load_hardware(const std::string& name_or_path);
TrainConfig load_config(const std::string& name_or_path);
// An entry of a validation set or runs file: a bundled name, a path, or an inline object.
ModelSpec model_from_entry(const nlohmann::json& name_path_or_object);
TrainConfig config_from_entry(const nlohmann::json& name_path_or_object);
// A network from Seer's network JSON, or from a fabric file (format "astral-fabric").
Network load_network(const std::string& name_or_path, const HardwareSpec& hw);

}  // namespace astral::seer
