// Replay driver for libFuzzer targets when libFuzzer is not linked (g++ builds, CI): feeds every
// file of the corpus (arguments: files or folders), then deterministic mutations of each (bit
// flips, truncations, byte insertions, splices), so a crash or hang in a parser fails CTest.
// Iterations per seed: ASTRAL_FUZZ_ITERATIONS (default 2000). Paths after "--no-mutate" (the
// regression inputs) are replayed once each, without mutations.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
std::vector<uint8_t> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void mutate(std::vector<uint8_t>& buf, const std::vector<uint8_t>& other, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  switch (rng() % 6) {
    case 0:  // flip a few bits
      for (int i = 0; i < 4 && !buf.empty(); ++i) buf[pick(buf.size())] ^= uint8_t(1u << (rng() % 8));
      break;
    case 1:  // truncate
      buf.resize(pick(buf.size() + 1));
      break;
    case 2:  // insert random bytes
      for (int i = 0, n = 1 + int(rng() % 16); i < n; ++i)
        buf.insert(buf.begin() + pick(buf.size() + 1), uint8_t(rng()));
      break;
    case 3:  // overwrite with interesting values
      for (int i = 0; i < 2 && !buf.empty(); ++i) {
        static const uint8_t magic[] = {0x00, 0xff, 0x7f, 0x80, '\n', '"', '{', '<', ':'};
        buf[pick(buf.size())] = magic[rng() % sizeof magic];
      }
      break;
    case 4:  // splice with another seed
      if (!other.empty()) {
        size_t at = pick(buf.size() + 1), from = pick(other.size());
        buf.resize(at);
        buf.insert(buf.end(), other.begin() + from, other.end());
      }
      break;
    default:  // duplicate a chunk
      if (!buf.empty()) {
        size_t a = pick(buf.size()), n = 1 + pick(std::min<size_t>(64, buf.size() - a));
        std::vector<uint8_t> chunk(buf.begin() + a, buf.begin() + a + n);
        buf.insert(buf.begin() + pick(buf.size() + 1), chunk.begin(), chunk.end());
      }
  }
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::vector<uint8_t>> seeds;
  size_t replayed = 0;
  bool mutate_these = true;  // "--no-mutate": the paths after it are replayed once each (regressions)
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--no-mutate") {
      mutate_these = false;
      continue;
    }
    std::vector<std::filesystem::path> files;
    std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (auto& e : std::filesystem::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (std::filesystem::is_regular_file(p)) {
      files.push_back(p);
    }
    for (const auto& f : files) {
      if (mutate_these) {
        seeds.push_back(read_file(f));
      } else {
        std::vector<uint8_t> input = read_file(f);
        LLVMFuzzerTestOneInput(input.data(), input.size());
        ++replayed;
      }
    }
  }
  seeds.push_back({});  // the empty input always
  const char* env = std::getenv("ASTRAL_FUZZ_ITERATIONS");
  const long iterations = env ? std::atol(env) : 2000;
  std::mt19937_64 rng(0xA57A1);
  size_t runs = 0;
  for (size_t s = 0; s < seeds.size(); ++s) {
    LLVMFuzzerTestOneInput(seeds[s].data(), seeds[s].size());
    ++runs;
    std::vector<uint8_t> buf = seeds[s];
    for (long i = 0; i < iterations; ++i) {
      if (i % 32 == 0) buf = seeds[s];  // restart from the seed now and then
      mutate(buf, seeds[rng() % seeds.size()], rng);
      LLVMFuzzerTestOneInput(buf.data(), buf.size());
      ++runs;
    }
  }
  std::printf("fuzz replay: %zu regressions, %zu seeds, %zu runs, no crash\n", replayed, seeds.size(), runs);
  return 0;
}
