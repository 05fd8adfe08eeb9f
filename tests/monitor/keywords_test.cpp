// The trigger-word automaton (monitor/src/keywords.hpp) against a plain search for every word:
// on random text over the words' own letters (so words overlap, repeat and straddle the middle
// of a line, where the scan splits long lines into two walks), every length from empty to long.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "keywords.hpp"

using astral::monitor::Keyword;
using astral::monitor::KeywordScanner;

namespace {

uint32_t naive(const std::vector<Keyword>& words, const std::string& text) {
  uint32_t bits = 0;
  for (const Keyword& w : words)
    if (text.find(w.text) != std::string::npos) bits |= w.bits;
  return bits;
}

}  // namespace

TEST_CASE("keyword scan finds exactly the words a plain search finds, at any line length") {
  const std::vector<Keyword> words = {
      {"NCCL ", 1u << 0}, {"CCL", 1u << 1}, {"abcabcabd", 1u << 2}, {"bca", 1u << 3},
      {"a", 1u << 4},     {"zz z", 1u << 5}, {"watchdog caught", 1u << 6}, {"dog", 1u << 7}};
  const KeywordScanner scanner(words);
  const std::string alphabet = "NCL abcdzwtho gu";
  std::mt19937 rng(7);
  int long_lines = 0;
  for (int round = 0; round < 20000; ++round) {
    const size_t length = rng() % 160;
    std::string text;
    while (text.size() < length) {
      if (rng() % 4 == 0) text += words[rng() % words.size()].text;  // a whole word, often
      else text += alphabet[rng() % alphabet.size()];
    }
    long_lines += text.size() >= 64;
    INFO(text);
    REQUIRE(scanner.scan(text) == naive(words, text));
  }
  CHECK(long_lines > 5000);  // the split walk ran
  // A word placed across the middle of a long line, at every offset around it.
  for (size_t pad = 40; pad < 140; ++pad) {
    std::string text(pad, '-');
    text += "abcabcabd";
    text += std::string(pad, '-');
    for (size_t cut = 0; cut < 12; ++cut) {
      const std::string line = text.substr(cut);
      INFO(line);
      REQUIRE(scanner.scan(line) == naive(words, line));
    }
  }
}

TEST_CASE("keyword scan: the built-in trigger words on log lines of every length") {
  const KeywordScanner& scanner = KeywordScanner::instance();
  const std::string tail = "[rank3]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout";
  const uint32_t want = scanner.scan(tail);
  CHECK((want & astral::monitor::kWatchdogCaught) != 0);
  for (size_t pad = 0; pad < 300; pad += 7) {
    const std::string line = std::string(pad, 'x') + tail;
    CHECK(scanner.scan(line) == want);
  }
}
