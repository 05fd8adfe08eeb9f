#pragma once
// netbench's out-of-band channel (the role NCCL's bootstrap plays): ranks register with a
// coordinator over plain TCP, proving a shared token, and exchange small blobs (listen handles,
// addresses, results) with allgather rounds. Blocking, with deadlines; errors throw.
#include <cstdint>
#include <string>
#include <vector>

namespace astral::netbench {

class Coordinator {
 public:
  // Listens on host:port (port 0 = any free port).
  Coordinator(const std::string& host, int port, int ranks, std::string token);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  int port() const { return port_; }
  // Registers every rank, then serves allgather rounds until all ranks hang up.
  void serve(double timeout_s);
  // The blobs of the last round (netbench's final round carries each rank's results).
  const std::vector<std::string>& last_round() const { return last_round_; }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  int ranks_;
  std::string token_;
  std::vector<int> clients_;
  std::vector<std::string> last_round_;
};

class BootstrapClient {
 public:
  BootstrapClient(const std::string& host, int port, int rank, int ranks,
                  const std::string& token, double timeout_s);
  ~BootstrapClient();
  BootstrapClient(const BootstrapClient&) = delete;
  BootstrapClient& operator=(const BootstrapClient&) = delete;

  // Everyone's blob, indexed by rank.
  std::vector<std::string> allgather(const std::string& mine);
  void barrier() { allgather(std::string()); }

 private:
  int fd_ = -1;
  int ranks_;
  double timeout_s_;
};

// "host:port" -> parts; false when malformed.
bool split_host_port(const std::string& text, std::string* host, int* port);

// A random token (hex) for local runs.
std::string random_token();

}  // namespace astral::netbench
