#pragma once
// Verifiable message contents: every 8-byte word is a hash of (seed, word index), so a byte in the
// wrong place, a stale buffer or a message delivered to the wrong slot is caught.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace astral::test {

inline uint64_t pattern_word(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + index + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline void fill_pattern(void* buffer, size_t size, uint64_t seed) {
  auto* bytes = static_cast<uint8_t*>(buffer);
  size_t words = size / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w = pattern_word(seed, i);
    std::memcpy(bytes + i * 8, &w, 8);
  }
  uint64_t tail = pattern_word(seed, words);
  if (size % 8) std::memcpy(bytes + words * 8, &tail, size % 8);
}

// Offset of the first wrong byte, or SIZE_MAX when the buffer matches.
inline size_t check_pattern(const void* buffer, size_t size, uint64_t seed) {
  const auto* bytes = static_cast<const uint8_t*>(buffer);
  size_t words = size / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w = pattern_word(seed, i);
    if (std::memcmp(bytes + i * 8, &w, 8) != 0) return i * 8;
  }
  uint64_t tail = pattern_word(seed, words);
  if (size % 8 && std::memcmp(bytes + words * 8, &tail, size % 8) != 0) return words * 8;
  return SIZE_MAX;
}

}  // namespace astral::test
