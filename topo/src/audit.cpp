// The node-audit checks (topology-formats.md §5.3). Each check states what it expected and where
// the expectation came from (the profile, or the node's own majority when there is no profile).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>

#include "astral/topo/audit.hpp"
#include "astral/topo/nccl_xml.hpp"

namespace astral::topo {
namespace {

// Collects findings; the status is the worst finding, or pass.
class Check {
 public:
  Check(std::string id, std::string name) { r_.id = std::move(id), r_.name = std::move(name); }
  void fail(std::string f) { r_.findings.push_back(std::move(f)), failed_ = true; }
  void warn(std::string f) { r_.findings.push_back(std::move(f)), warned_ = true; }
  CheckResult skip(std::string why) {
    r_.status = CheckStatus::kSkipped;
    r_.detail = std::move(why);
    return std::move(r_);
  }
  CheckResult done(std::string detail) {
    r_.status = failed_ ? CheckStatus::kFail : warned_ ? CheckStatus::kWarn : CheckStatus::kPass;
    r_.detail = std::move(detail);
    return std::move(r_);
  }
  bool failed() const { return failed_; }

 private:
  CheckResult r_;
  bool failed_ = false, warned_ = false;
};

std::string gpu_label(const Gpu& g) { return fmt::format("GPU{} ({})", g.index, g.pci.address.to_string()); }

template <class T>
T majority(const std::vector<T>& values) {
  std::map<T, int> counts;
  for (const auto& v : values) ++counts[v];
  return std::max_element(counts.begin(), counts.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
}

// "28.39.1002" < "28.40.0"; non-numeric parts compare as text.
int compare_versions(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    size_t ie = a.find('.', i), je = b.find('.', j);
    std::string pa = a.substr(i, ie - i), pb = b.substr(j, je - j);
    long na = std::atol(pa.c_str()), nb = std::atol(pb.c_str());
    if (na != nb) return na < nb ? -1 : 1;
    if (pa != pb) return pa < pb ? -1 : 1;
    i = ie == std::string::npos ? a.size() : ie + 1;
    j = je == std::string::npos ? b.size() : je + 1;
  }
  return 0;
}

class Auditor {
 public:
  Auditor(const Node& node, const AuditOptions& opt) : node_(node) {
    if (opt.profile) profile_ = &*opt.profile;
    if (opt.sysfs) sysfs_ = &*opt.sysfs;
  }

  std::vector<CheckResult> run(std::string& nccl_xml) {
    return {gpu_inventory(), nvswitch_inventory(), nic_inventory(), rail_alignment(), numa_locality(),
            link_training(), acs(),                iommu(),         gpudirect(),      ib_ports(),
            firmware(),      nccl_topology(nccl_xml)};
  }

 private:
  static constexpr const char* kNoSysfs = "needs a sysfs root (a live audit, or --sysfs-root with an XML)";

  CheckResult gpu_inventory() {
    Check c("T1", "GPU inventory");
    const auto& gpus = node_.gpus;
    if (profile_ && profile_->gpu_count && int(gpus.size()) != *profile_->gpu_count)
      c.fail(fmt::format("found {} GPUs, profile {} expects {}", gpus.size(), profile_->name, *profile_->gpu_count));
    if (gpus.empty()) {
      if (!c.failed()) c.warn("no GPUs found on this node");
      return c.done("no GPUs");
    }
    std::map<std::string, int> ids;
    for (const auto& g : gpus) ++ids[g.pci.id_string()];
    if (ids.size() > 1) {
      std::vector<std::string> parts;
      for (auto& [id, n] : ids) parts.push_back(fmt::format("{} x {}", n, id));
      c.fail(fmt::format("mixed GPU models in one node: {}", fmt::join(parts, ", ")));
    }
    if (profile_ && !profile_->gpu_device_ids.empty())
      for (const auto& g : gpus)
        if (std::find(profile_->gpu_device_ids.begin(), profile_->gpu_device_ids.end(), g.pci.id_string()) ==
            profile_->gpu_device_ids.end())
          c.fail(fmt::format("{} is {} ({}), not a model profile {} lists", gpu_label(g), g.pci.id_string(),
                             g.model, profile_->name));
    return c.done(fmt::format("{} x {} ({})", gpus.size(), gpus.front().model, gpus.front().pci.id_string()));
  }

  CheckResult nvswitch_inventory() {
    Check c("T2", "NVSwitch inventory");
    int responding = 0;
    for (const auto& s : node_.nvswitches) {
      if (s.responding) ++responding;
      else
        c.fail(fmt::format("NVSwitch {} reads back vendor {:04x} class {:04x}: not responding",
                           s.pci.address.to_string(), s.pci.vendor_id, s.pci.class_id));
    }
    if (profile_ && profile_->nvswitch_count) {
      if (responding != *profile_->nvswitch_count)
        c.fail(fmt::format("{} NVSwitches respond, profile {} expects {}", responding, profile_->name,
                           *profile_->nvswitch_count));
    } else if (node_.nvswitches.empty()) {
      return c.skip("no NVSwitch found and no profile expects any");
    }
    return c.done(fmt::format("{} of {} NVSwitches respond", responding, node_.nvswitches.size()));
  }

  CheckResult nic_inventory() {
    Check c("T3", "RDMA NIC inventory");
    const auto& nics = node_.nics;
    if (profile_ && profile_->rdma_nic_count && int(nics.size()) != *profile_->rdma_nic_count)
      c.fail(fmt::format("found {} RDMA NICs, profile {} expects {}", nics.size(), profile_->name,
                         *profile_->rdma_nic_count));
    if (nics.empty()) {
      if (node_.gpus.empty() && !c.failed()) return c.skip("no GPUs and no RDMA NICs on this node");
      if (!c.failed()) c.warn("no RDMA NIC: inter-node traffic would fall back to TCP sockets");
      return c.done("no RDMA NICs");
    }
    for (const auto& n : nics)
      if (n.netdev.empty() && n.transport != NicTransport::Efa)
        c.fail(fmt::format("{} ({}) has no network interface", n.name, n.pci.address.to_string()));
    // mlx5_N numbering that disagrees with bus order breaks configs that list NICs by name.
    int last = -1;
    for (const auto& n : nics) {
      int num = -1;
      if (std::sscanf(n.name.c_str(), "mlx5_%d", &num) != 1) continue;
      if (num < last)
        c.warn(fmt::format("{} ({}) is numbered out of PCI bus order: NCCL_IB_HCA lists by name, rails follow the bus",
                           n.name, n.pci.address.to_string()));
      last = std::max(last, num);
    }
    std::set<std::string_view> transports;
    for (const auto& n : nics) transports.insert(to_string(n.transport));
    return c.done(fmt::format("{} x {} ({}), {}..{}", nics.size(), nics.front().pci.id_string(),
                              fmt::join(transports, "/"), nics.front().name, nics.back().name));
  }

  CheckResult rail_alignment() {
    Check c("T4", "Rail alignment");
    if (node_.gpus.empty()) return c.skip("no GPUs");
    if (node_.nics.empty()) return c.skip("no RDMA NICs: no rails to align");
    std::vector<PathClass> paths;
    for (const auto& g : node_.gpus)
      if (g.rail >= 0) paths.push_back(g.nic_path);
    PathClass worst_ok = profile_ ? profile_->worst_rail_path : paths.empty() ? PathClass::PIX : majority(paths);
    std::string source = profile_ ? "profile " + profile_->name : "the majority of this node";
    for (const auto& g : node_.gpus) {
      size_t nearest = 0;
      for (size_t n = 0; n < node_.nics.size(); ++n)
        if (node_.gpu_nic[size_t(g.index)][n] < node_.gpu_nic[size_t(g.index)][nearest]) nearest = n;
      if (g.rail < 0)
        c.fail(fmt::format("{} has no NIC of its own: nearest is {} at {}", gpu_label(g), node_.nics[nearest].name,
                           to_string(node_.gpu_nic[size_t(g.index)][nearest])));
      else if (g.nic_path > worst_ok)
        c.fail(fmt::format("{} reaches its rail NIC {} at {}; {} expects {}", gpu_label(g),
                           node_.nics[size_t(g.nics.front())].name, to_string(g.nic_path), source,
                           to_string(worst_ok)));
    }
    std::vector<std::pair<size_t, size_t>> ratios;
    for (const auto& r : node_.rails) ratios.emplace_back(r.gpus.size(), r.nics.size());
    if (!ratios.empty()) {
      auto expected = profile_ ? std::pair<size_t, size_t>(size_t(profile_->gpus_per_rail), size_t(profile_->nics_per_rail))
                               : majority(ratios);
      for (const auto& r : node_.rails)
        if (std::pair(r.gpus.size(), r.nics.size()) != expected) {
          std::vector<std::string> nics;
          for (int n : r.nics) nics.push_back(node_.nics[size_t(n)].name);
          c.fail(fmt::format("rail {} has {} GPU(s) : {} NIC(s) ({}); {} expects {}:{}", r.index, r.gpus.size(),
                             r.nics.size(), fmt::join(nics, ","), source, expected.first, expected.second));
        }
    }
    std::vector<std::string> outside;
    for (const auto& n : node_.nics)
      if (n.rail < 0) outside.push_back(n.name);
    std::string extra = outside.empty() ? "" : fmt::format("; not on a rail: {}", fmt::join(outside, ", "));
    return c.done(fmt::format("{} rails for {} GPUs, GPU-NIC paths no worse than {}{}", node_.rails.size(),
                              node_.gpus.size(), to_string(worst_ok), extra));
  }

  CheckResult numa_locality() {
    Check c("T5", "NUMA locality");
    if (node_.gpus.empty()) return c.skip("no GPUs");
    for (const auto& g : node_.gpus)
      for (int n : g.nics) {
        const auto& nic = node_.nics[size_t(n)];
        if (g.pci.numa_node >= 0 && nic.pci.numa_node >= 0 && g.pci.numa_node != nic.pci.numa_node)
          c.fail(fmt::format("{} is on NUMA node {} but its rail NIC {} is on {}", gpu_label(g), g.pci.numa_node,
                             nic.name, nic.pci.numa_node));
      }
    std::string how = "hwloc locality";
    if (sysfs_) {
      how += " and sysfs numa_node";
      auto compare = [&](const PciFunction& f, const std::string& label) {
        auto st = sysfs::read_pci_device(*sysfs_, f.address);
        if (!st.present || !st.numa_node) return;
        if (*st.numa_node < 0)
          c.fail(fmt::format("{}: sysfs numa_node is -1 (firmware gives no locality; NCCL cannot place it)", label));
        else if (f.numa_node >= 0 && *st.numa_node != f.numa_node)
          c.fail(fmt::format("{}: sysfs numa_node {} disagrees with hwloc's {}", label, *st.numa_node, f.numa_node));
      };
      for (const auto& g : node_.gpus) compare(g.pci, gpu_label(g));
      for (const auto& n : node_.nics) compare(n.pci, n.name);
    }
    bool any_known = std::any_of(node_.gpus.begin(), node_.gpus.end(), [](const Gpu& g) { return g.pci.numa_node >= 0; });
    if (!any_known && !sysfs_) return c.skip("no NUMA locality in the topology (a VM?)");
    bool any_rail = std::any_of(node_.gpus.begin(), node_.gpus.end(), [](const Gpu& g) { return g.rail >= 0; });
    return c.done((any_rail ? "GPUs share a NUMA node with their rail NICs (" : "device locality consistent (") +
                  how + ")");
  }

  struct LinkSubject {
    std::string label;
    const PciFunction* pci;
    std::optional<PcieLink> expected;
    std::string kind;
  };

  std::vector<LinkSubject> link_subjects() const {
    std::vector<LinkSubject> out;
    for (const auto& g : node_.gpus)
      out.push_back({gpu_label(g), &g.pci, profile_ ? profile_->gpu_link : std::nullopt, "GPU"});
    for (const auto& n : node_.nics)
      out.push_back({n.name, &n.pci, profile_ ? profile_->nic_link : std::nullopt, "NIC"});
    for (const auto& s : node_.nvswitches)
      if (s.responding)
        out.push_back({"NVSwitch " + s.pci.address.to_string(), &s.pci,
                       profile_ ? profile_->nvswitch_link : std::nullopt, "NVSwitch"});
    return out;
  }

  CheckResult link_training() {
    Check c("T6", "PCIe link width/speed");
    auto subjects = link_subjects();
    if (subjects.empty()) return c.skip("no GPUs, NICs or NVSwitches");
    return sysfs_ ? link_training_sysfs(c, subjects) : link_training_hwloc(c, subjects);
  }

  CheckResult link_training_sysfs(Check& c, const std::vector<LinkSubject>& subjects) {
    int checked = 0;
    std::set<PciAddress> seen_bridges;
    auto inspect = [&](const sysfs::PciDeviceStatus& st, const std::string& label) {
      if (st.current.width && st.max.width && st.current.width < st.max.width)
        c.fail(fmt::format("{} runs x{} of x{} lanes (down-trained: reseat or check the riser)", label,
                           st.current.width, st.max.width));
      if (st.current.generation && st.max.generation && st.current.generation < st.max.generation)
        c.warn(fmt::format("{} runs Gen{} of Gen{} (idle power saving lowers speed; re-check under load)", label,
                           st.current.generation, st.max.generation));
    };
    for (const auto& s : subjects) {
      auto st = sysfs::read_pci_device(*sysfs_, s.pci->address);
      if (!st.present) {
        c.warn(fmt::format("{} is not in the sysfs tree at {}", s.label, sysfs_->dir()));
        continue;
      }
      if (!st.problem.empty()) c.warn(st.problem);
      ++checked;
      inspect(st, s.label);
      PcieLink capable = st.max;
      if (st.parent) {
        auto up = sysfs::read_pci_device(*sysfs_, *st.parent);
        if (up.present && up.max.known() && capable.known())
          capable = {std::min(capable.generation, up.max.generation), std::min(capable.width, up.max.width)};
      }
      if (s.expected && capable.known() &&
          (capable.width < s.expected->width || capable.generation < s.expected->generation))
        c.fail(fmt::format("{} is capable of only {} where the profile expects {}", s.label, capable.to_string(),
                           s.expected->to_string()));
      for (const auto& br : s.pci->upstream)
        if (seen_bridges.insert(br.address).second) {
          auto bst = sysfs::read_pci_device(*sysfs_, br.address);
          if (bst.present) inspect(bst, fmt::format("bridge {} above {}", br.address.to_string(), s.label));
        }
    }
    if (!checked) return c.skip("none of the devices is in the sysfs tree at " + sysfs_->dir());
    return c.done(fmt::format("{} devices and {} bridges: current vs max link (sysfs){}", checked,
                              seen_bridges.size(), profile_ ? ", capability vs profile" : ""));
  }

  // From an XML alone: hwloc keeps only width x rate (GB/s) of the current link.
  CheckResult link_training_hwloc(Check& c, const std::vector<LinkSubject>& subjects) {
    std::map<std::string, std::vector<double>> by_kind;
    for (const auto& s : subjects)
      if (s.pci->hwloc_link_gbytes_per_s > 0) by_kind[s.kind].push_back(s.pci->hwloc_link_gbytes_per_s);
    if (by_kind.empty()) return c.skip("no link data: the XML has no link speeds and there is no sysfs root");
    for (const auto& s : subjects) {
      double have = s.pci->hwloc_link_gbytes_per_s;
      if (have <= 0 || !by_kind.count(s.kind)) continue;
      double want = s.expected ? s.expected->gbytes_per_s() : majority(by_kind[s.kind]);
      if (have < want * 0.99)
        c.fail(fmt::format("{} link carries {:.1f} GB/s ({}), {} {:.1f} GB/s", s.label, have,
                           pcie_link_from_gbytes_per_s(have).to_string(),
                           s.expected ? "profile expects" : "its peers have", want));
    }
    return c.done(fmt::format("hwloc link figures of {} devices vs {} (no sysfs: width and speed not separable)",
                              subjects.size(), profile_ ? "the profile" : "their peers"));
  }

  CheckResult acs() {
    Check c("T7", "ACS on P2P paths");
    if (!sysfs_) return c.skip(kNoSysfs);
    if (node_.gpus.empty()) return c.skip("no GPUs");
    std::set<PciAddress> bridges;
    for (const auto& g : node_.gpus) {
      for (int n : g.nics)
        for (auto b : bridges_between(g.pci, node_.nics[size_t(n)].pci)) bridges.insert(b);
      for (const auto& h : node_.gpus)
        if (h.index > g.index)
          for (auto b : bridges_between(g.pci, h.pci)) bridges.insert(b);
    }
    if (bridges.empty()) return c.skip("no PCIe bridges on GPU paths (devices hang off host bridges)");
    std::string want = profile_ ? profile_->acs : "off";
    int read = 0;
    for (const auto& b : bridges) {
      auto st = sysfs::read_acs(*sysfs_, b);
      using S = sysfs::AcsStatus::State;
      if (st.state == S::kNeedsRoot) return c.skip("PCI extended config space needs root: run the audit as root");
      if (st.state == S::kUnreadable) {
        c.warn(st.problem);
        continue;
      }
      ++read;
      if (want == "off" && st.redirects_p2p())
        c.fail(fmt::format("bridge {} redirects P2P to the root complex: ACSCtl {} (clear with setpci ECAP_ACS+0x6.w=0000)",
                           b.to_string(), st.flags()));
      if (want == "on" && !st.redirects_p2p())
        c.fail(fmt::format("bridge {} has no ACS redirect but profile {} expects it (VM/ATS setup)", b.to_string(),
                           profile_->name));
    }
    return c.done(fmt::format("{} bridges on GPU-NIC and GPU-GPU paths, ACS redirect expected {}", read, want));
  }

  CheckResult iommu() {
    Check c("T9", "IOMMU mode");
    if (!sysfs_) return c.skip(kNoSysfs);
    auto st = sysfs::read_iommu(*sysfs_);
    if (st.mode == "unknown") return c.skip("sys/kernel/iommu_groups not readable");
    std::vector<std::string> allowed = profile_ ? profile_->iommu_modes : std::vector<std::string>{"off", "passthrough"};
    bool ok = std::find(allowed.begin(), allowed.end(), st.mode) != allowed.end();
    if (!ok && st.mode == "translated")
      c.fail(fmt::format("IOMMU translates DMA in {} groups: GPUDirect and P2P traffic pay for it (2-10x all-reduce "
                         "bandwidth reported); boot with iommu=pt",
                         st.translated_groups));
    else if (!ok)
      c.warn(fmt::format("IOMMU mode {} ({} identity, {} translated groups) is not one of {}", st.mode,
                         st.identity_groups, st.translated_groups, fmt::join(allowed, ", ")));
    return c.done(fmt::format("{}{}", st.mode, st.cmdline_flags.empty() ? "" : " (" + st.cmdline_flags + ")"));
  }

  CheckResult gpudirect() {
    Check c("T10", "GPUDirect RDMA");
    if (!sysfs_) return c.skip(kNoSysfs);
    if (node_.gpus.empty()) return c.skip("no GPUs");
    if (node_.nics.empty()) return c.skip("no RDMA NICs");
    auto st = sysfs::read_gpudirect(*sysfs_);
    if (!st.nvidia_driver) {
      c.fail("NVIDIA kernel driver not loaded (sys/module/nvidia absent)");
      return c.done("no driver");
    }
    std::string how = st.nvidia_peermem ? "nvidia_peermem" : st.memory_peers ? "MLNX_OFED peer memory"
                      : st.dmabuf        ? "dma-buf (open kernel module, kernel >= 5.12)"
                                         : "none";
    if (!st.rdma_capable()) {
      std::string msg = "neither nvidia_peermem nor dma-buf: NCCL stages every transfer through host memory";
      if (!profile_ || profile_->gpudirect_required) c.fail(msg);
      else c.warn(msg);
    }
    return c.done(fmt::format("GPUDirect RDMA via {}; GDRCopy (gdrdrv) {}", how, st.gdrdrv ? "loaded" : "absent"));
  }

  CheckResult ib_ports() {
    Check c("T11", "IB port state/rate");
    if (node_.nics.empty()) return c.skip("no RDMA NICs");
    if (!sysfs_) {  // hwloc keeps Port<N>State only
      int known = 0;
      for (const auto& n : node_.nics)
        for (const auto& p : n.ports) {
          ++known;
          if (p.hwloc_state != 4) c.fail(fmt::format("{} port {} state {} (4 = ACTIVE, from hwloc)", n.name, p.number, p.hwloc_state));
        }
      if (!known) return c.skip("no port state in the XML and no sysfs root");
      return c.done(fmt::format("{} ports, state from hwloc; rate not checked (needs sysfs)", known));
    }
    auto devices = sysfs::read_ib_devices(*sysfs_);
    std::vector<double> rates;
    std::vector<std::pair<std::string, sysfs::IbPort>> ports;
    for (const auto& n : node_.nics) {
      auto it = std::find_if(devices.begin(), devices.end(), [&](const sysfs::IbDevice& d) {
        return (d.pci && *d.pci == n.pci.address) || d.name == n.name;
      });
      if (it == devices.end()) {
        c.fail(fmt::format("{} ({}) is missing from sys/class/infiniband (driver not bound?)", n.name,
                           n.pci.address.to_string()));
        continue;
      }
      if (!it->problem.empty()) c.warn(it->problem);
      for (const auto& p : it->ports) {
        ports.emplace_back(n.name, p);
        if (p.rate_gbps > 0) rates.push_back(p.rate_gbps);
      }
    }
    if (ports.empty() && !c.failed()) return c.skip("no ports under sys/class/infiniband");
    double want = profile_ && profile_->port_rate_gbps ? *profile_->port_rate_gbps : rates.empty() ? 0 : majority(rates);
    for (const auto& [name, p] : ports) {
      if (p.state_code != 4 || p.phys_state_code != 5)
        c.fail(fmt::format("{} port {} is {} / {} (expected ACTIVE / LinkUp)", name, p.number, p.state, p.phys_state));
      else if (want > 0 && p.rate_gbps != want)
        c.fail(fmt::format("{} port {} runs at {} where {} expects {:g} Gb/sec", name, p.number, p.rate,
                           profile_ && profile_->port_rate_gbps ? "the profile" : "its peers", want));
    }
    return c.done(fmt::format("{} ports checked: ACTIVE, LinkUp, {:g} Gb/sec", ports.size(), want));
  }

  CheckResult firmware() {
    Check c("T12", "NIC firmware");
    if (node_.nics.empty()) return c.skip("no RDMA NICs");
    if (!sysfs_) return c.skip(kNoSysfs);
    auto devices = sysfs::read_ib_devices(*sysfs_);
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> by_model;  // id -> (nic, fw)
    for (const auto& n : node_.nics)
      for (const auto& d : devices)
        if ((d.pci && *d.pci == n.pci.address) || d.name == n.name) {
          if (d.fw_ver.empty()) c.warn(n.name + ": fw_ver unreadable");
          else by_model[n.pci.id_string()].emplace_back(n.name, d.fw_ver);
        }
    if (by_model.empty()) return c.skip("no fw_ver under sys/class/infiniband");
    std::vector<std::string> summary;
    for (const auto& [model, list] : by_model) {
      std::vector<std::string> versions;
      for (const auto& [nic, fw] : list) versions.push_back(fw);
      std::string common = majority(versions);
      for (const auto& [nic, fw] : list)
        if (fw != common)
          c.fail(fmt::format("{} runs firmware {} while {} other {} NICs run {}", nic, fw,
                             std::count(versions.begin(), versions.end(), common), model, common));
      if (profile_ && !profile_->min_firmware.empty())
        for (const auto& [nic, fw] : list)
          if (compare_versions(fw, profile_->min_firmware) < 0)
            c.fail(fmt::format("{} firmware {} is older than the profile's minimum {}", nic, fw, profile_->min_firmware));
      summary.push_back(fmt::format("{} x {} at {}", list.size(), model, common));
    }
    return c.done(fmt::format("{}", fmt::join(summary, "; ")));
  }

  CheckResult nccl_topology(std::string& xml) {
    Check c("T23", "NCCL topology XML");
    if (node_.gpus.empty()) return c.skip("no GPUs: NCCL needs no topology file");
    xml = write_nccl_topology(node_, sysfs_);
    try {
      auto system = parse_nccl_topology(xml, "generated NCCL topology");
      for (auto& problem : check_nccl_pairing(node_, system)) c.fail(problem);
      return c.done(fmt::format("{} CPUs, {} GPUs, {} NICs; loads under NCCL's parser rules; pairing kept",
                                system.children.size(), node_.gpus.size(), node_.nics.size()));
    } catch (const TopologyError& e) {
      c.fail(e.what());
      return c.done("the generated file would not load in NCCL");
    }
  }

  const Node& node_;
  const Profile* profile_ = nullptr;
  const sysfs::Root* sysfs_ = nullptr;
};

}  // namespace

std::string_view to_string(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass: return "pass";
    case CheckStatus::kWarn: return "warn";
    case CheckStatus::kFail: return "fail";
    case CheckStatus::kSkipped: return "skipped";
  }
  return "skipped";
}

bool AuditReport::failed() const {
  return std::any_of(checks.begin(), checks.end(), [](const CheckResult& c) { return c.status == CheckStatus::kFail; });
}

AuditReport run_audit(Node node, const AuditOptions& options) {
  AuditReport report;
  report.node = std::move(node);
  report.checks = Auditor(report.node, options).run(report.nccl_topology);
  const sysfs::Root* root = options.sysfs ? &*options.sysfs : nullptr;
  if (root) report.ib_devices = sysfs::read_ib_devices(*root);
  for (const auto& g : report.node.gpus) {
    PcieLink link = pcie_link_from_gbytes_per_s(g.pci.hwloc_link_gbytes_per_s);
    if (root) {
      auto st = sysfs::read_pci_device(*root, g.pci.address);
      if (st.present && st.current.known()) link = st.current;
    }
    report.gpu_links.push_back(link);
  }
  return report;
}

}  // namespace astral::topo
