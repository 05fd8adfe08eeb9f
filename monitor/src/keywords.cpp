#include "keywords.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>

namespace astral::monitor {

namespace {

// Every word that can start a recogniser's work. A line with none of them is unknown at once.
constexpr Keyword kWords[] = {
    {" NCCL ", kNcclMark},
    {"NCCL ", kNcclMark},
    {"Got completion from peer", kGotCompletion | kNetIb},
    {"Got completion with ", kNetIb},
    {" WARN ", kNcclMark},  // NCCL 2.1's header had no NCCL tag
    {"NET/IB", kNetIb},
    {"ProcessGroupNCCL", kTorch},
    {"WorkNCCL(", kTorch},
    {".cpp:", kTorch},
    {".hpp:", kTorch},
    {"Watchdog caught", kWatchdogCaught | kTorch},
    {"CUDA error", kPythonError},
    {"DistBackendError", kPythonError},
    {"NCCL error", kPythonError},
    {"ncclRemoteError", kPythonError},
    {"ncclSystemError", kPythonError},
    {"ncclInternalError", kPythonError},
    {"ncclUnhandledCudaError", kPythonError},
    {"terminate called", kPythonError},
    {"Traceback", kPythonError},
    {"what():", kPythonError},
    {"Exception raised", kPythonError},
    {"joined but didn't finish", kPythonError},
    {"lagging ranks", kPythonError},
    {"time/iter=", kPythonError},
    {"time per iteration (ms)", kPythonError},
    {"Last error:", kPythonError},
    {"ChildFailedError", kPythonError},
    {"Root Cause", kPythonError},
    {"exitcode", kPythonError},
    {"local_rank:", kPythonError},
    {"srun: error:", kPythonError},
    {"thread terminated with exception", kPythonError},
    {"NVRM:", kKernel},
    {"SXid", kKernel},
    {"mlx5", kKernel},
    {"AER", kKernel},
    {"PCIe Bus Error", kKernel},
    {"pcieport", kKernel},
    {"segfault at", kKernel},
    {"Out of memory", kKernel},
    {"oom-kill", kKernel},
    {"Linux version", kKernel},
    {"reboot:", kKernel},
    {"Machine check", kKernel},
    {"temperature above threshold", kKernel},
    {"critical temperature reached", kKernel},
    {"EDAC ", kKernel},
    {"blocked for more than", kKernel},
    {"soft lockup", kKernel},
    {"hard LOCKUP", kKernel},
    {"Hardware Error", kKernel},
    {"arrier", kKernel},  // Lost Carrier / carrier lost / carrier on
    {"ARRIER", kKernel},
    {"Link is", kKernel},
    {"link is", kKernel},
    {"becomes ready", kKernel},
    {"Ethernet", kPort},
    {"ethernet ", kPort},
    {"Eth", kPort},
    {"swp", kPort},
    {"IB", kPort},
    {"Port ", kPort},
    {"GigE", kPort},
    {"==>", kBmc},
    {"SEL Entry:", kBmc},
    {"timing out", kTimingOut},
    {" with ", kWith},
    {"|port_state_change|", kSairedis},
    {"# Port ", kIbDiag},
    {"Counter:", kIbDiag},
    {"Errors:", kIbDiag},
    {"Discards:", kIbDiag},
    {"Wait:", kIbDiag},
    {"Errors for ", kIbDiag},
    {"GUID 0x", kIbDiag},
    {"-E- ", kIbDiag},
    {"_counter", kIbDiag},
    {"Switch: ", kIbDiag},
    {"_errors", kIbDiag},
    {"_discard", kIbDiag},
    {"START_", kIbDiag},
    {"Link info:", kIbDiag},
    {"Data Counters for ", kIbDiag},
};
}  // namespace

const KeywordScanner& KeywordScanner::instance() {
  static const KeywordScanner scanner(kWords);
  return scanner;
}

KeywordScanner::KeywordScanner(std::span<const Keyword> words) {
  // Byte classes: each byte that occurs in a word gets its own class; all others share class 0.
  for (const Keyword& w : words)
    for (unsigned char c : w.text)
      if (!class_of_[c]) class_of_[c] = uint8_t(classes_++);
  trie_.push_back(std::vector<int>(size_t(classes_), -1));
  out_.push_back(0);
  for (const Keyword& w : words) add(w.text, w.bits), longest_ = std::max(longest_, w.text.size());
  build();
}

void KeywordScanner::add(std::string_view word, uint32_t bits) {
  int s = 0;
  for (unsigned char c : word) {
    int cls = class_of_[c];
    if (trie_[size_t(s)][size_t(cls)] < 0) {
      trie_[size_t(s)][size_t(cls)] = int(trie_.size());
      trie_.push_back(std::vector<int>(size_t(classes_), -1));
      out_.push_back(0);
    }
    s = trie_[size_t(s)][size_t(cls)];
  }
  out_[size_t(s)] |= bits;
}

void KeywordScanner::build() {
  const size_t n = trie_.size();
  std::vector<int> fail(n, 0);
  delta_.assign(n * size_t(classes_), 0);
  std::deque<int> queue;
  for (int c = 0; c < classes_; ++c) {
    int next = trie_[0][size_t(c)];
    if (next > 0) {
      fail[size_t(next)] = 0;
      queue.push_back(next);
      delta_[size_t(c)] = uint16_t(next);
    }
  }
  while (!queue.empty()) {
    int s = queue.front();
    queue.pop_front();
    out_[size_t(s)] |= out_[size_t(fail[size_t(s)])];
    for (int c = 0; c < classes_; ++c) {
      int next = trie_[size_t(s)][size_t(c)];
      if (next > 0) {
        fail[size_t(next)] = delta_[size_t(fail[size_t(s)]) * size_t(classes_) + size_t(c)];
        queue.push_back(next);
        delta_[size_t(s) * size_t(classes_) + size_t(c)] = uint16_t(next);
      } else {
        delta_[size_t(s) * size_t(classes_) + size_t(c)] = delta_[size_t(fail[size_t(s)]) * size_t(classes_) + size_t(c)];
      }
    }
  }
  trie_.clear();
  // Row offsets instead of state numbers (see scan); the table stays small enough for uint16.
  const size_t k = size_t(classes_);
  if (n * k > 65535) throw std::logic_error("keyword automaton too large");
  rows_.resize(n * k);
  row_out_.assign(n * k, 0);
  for (size_t i = 0; i < n * k; ++i) rows_[i] = uint16_t(delta_[i] * k);
  for (size_t state = 0; state < n; ++state) row_out_[state * k] = out_[state];
  delta_.clear();
  out_.clear();
}

uint32_t KeywordScanner::walk(const unsigned char* text, size_t size) const {
  // One dependent load per byte; rows_ holds each next state as its row offset, so no multiply
  // sits on that chain.
  uint32_t bits = 0;
  uint32_t row = 0;
  const uint16_t* rows = rows_.data();
  const uint32_t* row_out = row_out_.data();
  for (size_t i = 0; i < size; ++i) {
    row = rows[row + class_of_[text[i]]];
    bits |= row_out[row];
  }
  return bits;
}

uint32_t KeywordScanner::scan(std::string_view line) const {
  const auto* text = reinterpret_cast<const unsigned char*>(line.data());
  const size_t n = line.size();
  // The walk is bound by the latency of its chain of loads, not by throughput: two walks over
  // the two halves of a line, interleaved in one loop, take little longer than one. A word that
  // starts in the first half ends at most longest_ - 1 bytes into the second, so the first walk
  // runs that far past the middle; the second starts at the middle, from the root. Short lines
  // are walked once: the overlap would cost more than the second chain saves.
  if (n < 4 * longest_) return walk(text, n);
  const size_t mid = n / 2;
  const size_t first = mid + longest_ - 1, second = n - mid;
  const size_t both = std::min(first, second);
  uint32_t bits = 0;
  uint32_t a = 0, b = 0;
  const uint16_t* rows = rows_.data();
  const uint32_t* row_out = row_out_.data();
  for (size_t i = 0; i < both; ++i) {
    a = rows[a + class_of_[text[i]]];
    b = rows[b + class_of_[text[mid + i]]];
    bits |= row_out[a] | row_out[b];
  }
  for (size_t i = both; i < first; ++i) bits |= row_out[a = rows[a + class_of_[text[i]]]];
  for (size_t i = both; i < second; ++i) bits |= row_out[b = rows[b + class_of_[text[mid + i]]]];
  return bits;
}

}  // namespace astral::monitor
