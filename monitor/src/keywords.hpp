#pragma once
// One pass over a line tells which recognisers can possibly match it (Aho-Corasick automaton
// over the trigger words of every format). Without it each line paid for dozens of substring
// searches; with it an unknown line costs one table walk.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace astral::monitor {

// Bits of KeywordScanner::scan's result.
enum Trigger : uint32_t {
  kNcclMark = 1u << 0,        // " NCCL " / "NCCL "
  kGotCompletion = 1u << 1,   // "Got completion from peer"
  kNetIb = 1u << 2,           // "NET/IB"
  kTorch = 1u << 3,           // glog / ProcessGroupNCCL / WorkNCCL
  kWatchdogCaught = 1u << 4,  // "Watchdog caught"
  kPythonError = 1u << 5,     // CUDA error, DistBackendError, ncclRemoteError, desync report ...
  kKernel = 1u << 6,          // NVRM, SXid, mlx5, AER, segfault, OOM, carrier, boot ...
  kPort = 1u << 7,            // Ethernet, swp, EthA/B, IBA/B, Port, ...GigE
  kBmc = 1u << 8,             // "==>" (ibdev2netdev), "SEL Entry:"
  kTimingOut = 1u << 9,       // "timing out"
  kWith = 1u << 10,           // " with "
  kSairedis = 1u << 11,       // "|port_state_change|"
  kIbDiag = 1u << 12,         // perfquery / ibqueryerrors / ibdiagnet / UFM port counters and events
};

// A word and the bits its presence sets.
struct Keyword {
  std::string_view text;
  uint32_t bits;
};

class KeywordScanner {
 public:
  // The trigger words of every line format (Trigger bits).
  static const KeywordScanner& instance();
  // Any word list (at most a few hundred characters in all): one pass finds all of them.
  explicit KeywordScanner(std::span<const Keyword> words);
  // OR of the bits of every word that occurs in `text`.
  uint32_t scan(std::string_view text) const;

 private:
  void add(std::string_view word, uint32_t bits);
  void build();
  uint32_t walk(const unsigned char* text, size_t size) const;
  int classes_ = 1;
  size_t longest_ = 1;  // the longest word: how far two halves of a line must overlap
  uint8_t class_of_[256] = {};
  std::vector<std::vector<int>> trie_;  // during construction: state -> class -> next (-1)
  std::vector<uint32_t> out_;           // during construction: state -> trigger bits
  std::vector<uint16_t> delta_;         // during construction: state * classes_ + class -> next state
  std::vector<uint16_t> rows_;          // the same, as the next state's row offset (scan)
  std::vector<uint32_t> row_out_;       // row offset -> trigger bits of that state (scan)
};

}  // namespace astral::monitor
