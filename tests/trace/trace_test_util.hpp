#pragma once
// Helpers for the trace suite: a scratch directory and a small writer to fill it.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "astral/trace/writer.hpp"

namespace astral::trace::test {

// A fresh directory under /tmp, removed with everything in it at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/astral-trace-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// Options for a small test file: 4 KiB chunks so wrapping and damage are quick to provoke.
inline WriterOptions small_options(const std::string& dir, uint64_t max_bytes = 1u << 20) {
  WriterOptions o;
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.chunk_bytes = 4096;
  o.metadata_bytes = 16384;
  o.host = "testhost";
  o.boot_id = "00000000-0000-0000-0000-000000000001";
  return o;
}

inline Event transfer_event(EventKind kind, uint64_t seq, uint64_t bytes = 4096, uint64_t conn = 7,
                            uint64_t comm = 0xc0ffee) {
  Event e;
  e.kind = kind;
  e.comm_hash = comm;
  e.payload = Transfer{request_id(MessageKeys{comm, conn, seq}), conn, seq, bytes, 0, 3};
  return e;
}

}  // namespace astral::trace::test
