#pragma once
// The table of bundled input files generated from seer/data at configure time.
namespace astral::seer::detail {

struct BundledFile {
  const char* path;  // relative to seer/data, e.g. "models/gpt3-175b.json"
  const char* text;
};
extern const BundledFile kBundledFiles[];
extern const int kBundledFileCount;

}  // namespace astral::seer::detail
