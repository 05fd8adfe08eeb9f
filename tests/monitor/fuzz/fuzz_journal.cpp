// libFuzzer target: a journal file as the journal source finds it in a systemd-journal-remote
// folder (copied while written, cut short by a full disk, or damaged). sd-journal reads it; a
// truncated file goes through the monitor's own header repair first. The seed is the start of a
// real journal-remote file. Nothing may crash, hang or read outside the file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "astral/monitor/fabric_graph.hpp"
#include "astral/monitor/sources.hpp"

namespace {

// One scratch folder per process (libFuzzer may run several jobs at once), removed at exit.
const std::string& scratch_file() {
  static const std::string path = [] {
    std::string dir = (std::filesystem::temp_directory_path() / "astral-fuzz-journal-XXXXXX").string();
    if (!mkdtemp(dir.data())) std::abort();
    static struct Cleanup {
      std::string dir;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    } cleanup{dir};
    return dir + "/fuzz.journal";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace astral::monitor;
  const std::string& path = scratch_file();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  JournalSourceOptions o;
  o.dir = path;
  o.jobs = 1;
  o.max_entries = 10000;
  const FabricGraph fabric{};
  const SourceContext context{fabric, 0, {}, {}};
  try {
    (void)journal_source(o)(context);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
