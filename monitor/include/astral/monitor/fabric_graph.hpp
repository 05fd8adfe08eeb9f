#pragma once
// The monitor's view of the fabric: which switch port each host NIC port is cabled to, which
// switch ports join switches, and what is known about each NIC (address, rail). Diagnosis walks
// this graph (rank -> GPU -> NIC -> leaf port -> link). It is filled from the fabric model's
// JSON (topo), from `ibnetdiscover` output or from a cabling CSV, so that the monitor works with
// what operators actually have.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace astral::monitor {

struct NicEnd {
  std::string host;
  std::string nic;   // mlx5_2, or whatever the source calls it (HCA-1)
  std::string port;  // NIC port number ("1"), may be empty
  std::string ip;    // when known (RoCE address, IPoIB)
  int rail = -1;     // rail / plane index when the source says
};

struct SwitchEnd {
  std::string switch_name;
  std::string port;
};

// A host NIC port cabled to a switch port.
struct Cable {
  NicEnd nic;
  SwitchEnd sw;
};

// A switch-to-switch link.
struct Trunk {
  SwitchEnd a, b;
};

class HashRouting;  // monitor/src/hash_routing.hpp

class FabricGraph {
 public:
  void add_cable(Cable c);
  void add_trunk(Trunk t);
  void add_switch(std::string name, std::string role = {});

  const std::vector<Cable>& cables() const { return cables_; }
  const std::vector<Trunk>& trunks() const { return trunks_; }
  const std::vector<std::string>& switches() const { return switches_; }
  bool empty() const { return cables_.empty() && trunks_.empty(); }
  std::string_view role(std::string_view switch_name) const;  // leaf/spine/... when known

  // Lookups (host and switch names compared in canonical form; ports with names::same_port).
  std::vector<const Cable*> cables_of_host(std::string_view host) const;
  const Cable* cable_of_nic(std::string_view host, std::string_view nic) const;
  const Cable* cable_at(std::string_view switch_name, std::string_view port) const;
  std::vector<const Cable*> cables_on_switch(std::string_view switch_name) const;
  std::vector<const Trunk*> trunks_of(std::string_view switch_name) const;
  bool has_switch(std::string_view name) const;
  bool has_host(std::string_view name) const;
  std::string host_of_ip(std::string_view ip) const;
  // Switches by GUID (ibnetdiscover's "S-<guid>" and switchguid lines), for fabric reports that
  // name a switch only by GUID (ibdiagnet's S<system>/N<node>/P<port>, ibdiagnet2.db_csv, the
  // GUID of ibqueryerrors when the description is the factory default).
  void add_switch_guid(std::string_view guid, std::string switch_name);
  std::string_view switch_of_guid(std::string_view guid) const;  // empty when unknown
  const std::unordered_map<std::string, std::string>& switch_guids() const { return by_guid_; }

  // The switches' ECMP hash (the fabric JSON's "hash_model"), when the fabric file has one.
  const std::shared_ptr<const HashRouting>& hash_routing() const { return hash_routing_; }
  void set_hash_routing(std::shared_ptr<const HashRouting> routing) { hash_routing_ = std::move(routing); }

  std::string to_cabling_csv() const;

 private:
  void index(size_t cable);
  std::vector<Cable> cables_;
  std::vector<Trunk> trunks_;
  std::vector<std::string> switches_;
  std::unordered_map<std::string, std::string> roles_;
  std::unordered_map<std::string, std::vector<size_t>> by_host_, by_switch_;
  std::unordered_map<std::string, size_t> by_ip_;
  std::unordered_map<std::string, std::string> by_guid_;  // canonical_guid -> switch
  std::shared_ptr<const HashRouting> hash_routing_;
};

// A GUID in one spelling: lower-case hex without "0x" or leading zeros (ibqueryerrors prints
// %PRIx64, ibnetdiscover and ibdiagnet pad to 16 digits). Empty when `guid` is not hex.
std::string canonical_guid(std::string_view guid);

// Loaders; each throws std::runtime_error naming the input and what is wrong.
FabricGraph parse_cabling_csv(std::string_view text, std::string_view source_name);
FabricGraph parse_ibnetdiscover(std::string_view text, std::string_view source_name);
FabricGraph parse_fabric_json(std::string_view text, std::string_view source_name);
// Detects the format from the content.
FabricGraph load_fabric(const std::string& path);
// Adds every cable/trunk of `other` not already present.
void merge_fabric(FabricGraph& into, const FabricGraph& other);

}  // namespace astral::monitor
