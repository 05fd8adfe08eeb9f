#include "astral/topo/sysfs.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace astral::topo::sysfs {
namespace fs = std::filesystem;

namespace {

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

// First line of a small sysfs file, trimmed; nullopt when missing or unreadable.
std::optional<std::string> read_line(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  if (in.bad()) return std::nullopt;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  return line;
}

std::optional<int> read_int(const std::string& path) {
  auto s = read_line(path);
  if (!s || s->empty()) return std::nullopt;
  char* end = nullptr;
  long v = std::strtol(s->c_str(), &end, 10);
  if (end == s->c_str() || *end != '\0') return std::nullopt;
  return int(v);
}

// "4: ACTIVE" -> (4, "ACTIVE")
void parse_coded(const std::string& text, int& code, std::string& name) {
  auto colon = text.find(':');
  if (colon == std::string::npos) {
    name = text;
    return;
  }
  code = std::atoi(text.substr(0, colon).c_str());
  name = text.substr(text.find_first_not_of(' ', colon + 1) == std::string::npos
                         ? text.size()
                         : text.find_first_not_of(' ', colon + 1));
}

std::optional<PciAddress> pci_of_link(const std::string& device_link) {
  std::error_code ec;
  fs::path real = fs::canonical(device_link, ec);
  if (ec) return std::nullopt;
  return PciAddress::parse(real.filename().string());
}

}  // namespace

Root::Root(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) dir_ = "/";
  std::string base = dir_ == "/" ? "" : dir_;
  if (!exists(base + "/sys") && (exists(base + "/bus") || exists(base + "/class"))) {
    sys_ = base;  // a copy of /sys itself
    proc_ = base + "/../proc";
  } else {
    sys_ = base + "/sys";
    proc_ = base + "/proc";
  }
}

bool Root::has_sys() const { return exists(sys("bus")) || exists(sys("class")) || exists(sys("kernel")); }

PciDeviceStatus read_pci_device(const Root& root, const PciAddress& address) {
  PciDeviceStatus st;
  std::string link = root.sys("bus/pci/devices/" + address.to_string());
  std::error_code ec;
  fs::path real = fs::canonical(link, ec);
  if (ec) {
    st.problem = fmt::format("{}: {}", link, ec.message());
    return st;
  }
  st.present = true;
  st.sysfs_path = real.string();
  std::string dir = real.string() + "/";
  st.parent = PciAddress::parse(real.parent_path().filename().string());
  if (auto s = read_line(dir + "current_link_speed")) {
    st.current_speed = *s;
    st.current.generation = pcie_generation_from_speed(*s);
  }
  if (auto s = read_line(dir + "max_link_speed")) {
    st.max_speed = *s;
    st.max.generation = pcie_generation_from_speed(*s);
  }
  if (auto w = read_int(dir + "current_link_width")) st.current.width = *w;
  if (auto w = read_int(dir + "max_link_width")) st.max.width = *w;
  st.numa_node = read_int(dir + "numa_node");
  if (auto c = read_line(dir + "class")) st.class_code = uint32_t(std::strtoul(c->c_str(), nullptr, 16));
  std::vector<std::string> missing;
  if (st.current_speed.empty()) missing.push_back("current_link_speed");
  if (!st.current.width) missing.push_back("current_link_width");
  if (st.max_speed.empty()) missing.push_back("max_link_speed");
  if (!st.max.width) missing.push_back("max_link_width");
  if (!missing.empty())
    st.problem = fmt::format("{}: unreadable or missing {}", real.string(), fmt::join(missing, ", "));
  return st;
}

std::string AcsStatus::flags() const {
  static constexpr std::pair<uint16_t, const char*> kBits[] = {
      {kSourceValidation, "SrcValid"}, {kTranslationBlocking, "TransBlk"},
      {kRequestRedirect, "ReqRedir"},  {kCompletionRedirect, "CmpltRedir"},
      {kUpstreamForwarding, "UpstreamFwd"}, {kEgressControl, "EgressCtrl"},
      {kDirectTranslated, "DirectTrans"}};
  std::string out;
  for (auto [bit, name] : kBits) {
    if (!out.empty()) out += ' ';
    out += name;
    out += (control & bit) ? '+' : '-';
  }
  return out;
}

AcsStatus read_acs(const Root& root, const PciAddress& bridge) {
  AcsStatus st;
  std::string path = root.sys("bus/pci/devices/" + bridge.to_string() + "/config");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    st.problem = fmt::format("{}: cannot open", path);
    return st;
  }
  std::vector<uint8_t> cfg(4096);
  in.read(reinterpret_cast<char*>(cfg.data()), std::streamsize(cfg.size()));
  cfg.resize(size_t(in.gcount()));
  if (cfg.size() <= 256) {
    // Unprivileged reads stop at the standard header; extended space needs CAP_SYS_ADMIN.
    st.state = AcsStatus::State::kNeedsRoot;
    st.problem = fmt::format("{}: only {} bytes readable (extended config space needs root)", path,
                             cfg.size());
    return st;
  }
  auto u32 = [&](size_t off) {
    return uint32_t(cfg[off]) | uint32_t(cfg[off + 1]) << 8 | uint32_t(cfg[off + 2]) << 16 |
           uint32_t(cfg[off + 3]) << 24;
  };
  size_t off = 0x100;
  for (int hops = 0; hops < 96 && off >= 0x100 && off + 8 <= cfg.size(); ++hops) {
    uint32_t header = u32(off);
    if (header == 0 || header == 0xffffffff) break;
    if ((header & 0xffff) == 0x000d) {
      st.state = AcsStatus::State::kRead;
      st.control = uint16_t(cfg[off + 6] | cfg[off + 7] << 8);
      return st;
    }
    size_t next = (header >> 20) & 0xffc;
    if (next <= off) break;  // the list must move forward; anything else is corrupt
    off = next;
  }
  st.state = AcsStatus::State::kNotPresent;
  return st;
}

std::vector<IbDevice> read_ib_devices(const Root& root) {
  std::vector<IbDevice> out;
  std::error_code ec;
  std::string base = root.sys("class/infiniband");
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    IbDevice dev;
    dev.name = entry.path().filename().string();
    std::string dir = entry.path().string() + "/";
    dev.fw_ver = read_line(dir + "fw_ver").value_or("");
    dev.node_guid = read_line(dir + "node_guid").value_or("");
    dev.pci = pci_of_link(dir + "device");
    std::error_code pec;
    for (const auto& p : fs::directory_iterator(dir + "ports", pec)) {
      IbPort port;
      port.number = std::atoi(p.path().filename().c_str());
      std::string pdir = p.path().string() + "/";
      if (auto s = read_line(pdir + "state")) parse_coded(*s, port.state_code, port.state);
      if (auto s = read_line(pdir + "phys_state")) parse_coded(*s, port.phys_state_code, port.phys_state);
      if (auto s = read_line(pdir + "rate")) {
        port.rate = *s;
        port.rate_gbps = std::atof(s->c_str());
      }
      port.link_layer = read_line(pdir + "link_layer").value_or("");
      if (port.state.empty() || port.rate.empty())
        dev.problem = fmt::format("{}: unreadable port state or rate", pdir);
      dev.ports.push_back(port);
    }
    if (pec) dev.problem = fmt::format("{}ports: {}", dir, pec.message());
    std::sort(dev.ports.begin(), dev.ports.end(),
              [](const IbPort& a, const IbPort& b) { return a.number < b.number; });
    out.push_back(std::move(dev));
  }
  std::sort(out.begin(), out.end(), [](const IbDevice& a, const IbDevice& b) { return a.name < b.name; });
  return out;
}

IommuStatus read_iommu(const Root& root) {
  IommuStatus st;
  std::error_code ec;
  std::string base = root.sys("kernel/iommu_groups");
  if (exists(base)) {
    st.readable = true;
    for (const auto& g : fs::directory_iterator(base, ec)) {
      ++st.group_count;
      std::string type = read_line(g.path().string() + "/type").value_or("");
      if (type == "identity") ++st.identity_groups;
      else if (type.rfind("DMA", 0) == 0) ++st.translated_groups;
    }
  }
  if (auto cmdline = read_line(root.proc("cmdline"))) {
    std::istringstream words(*cmdline);
    for (std::string w; words >> w;)
      if (w.find("iommu") != std::string::npos) st.cmdline_flags += (st.cmdline_flags.empty() ? "" : " ") + w;
  }
  if (!st.readable) st.mode = "unknown";
  else if (st.group_count == 0) st.mode = "off";
  else if (st.translated_groups == 0 && st.identity_groups > 0) st.mode = "passthrough";
  else if (st.identity_groups == 0 && st.translated_groups > 0) st.mode = "translated";
  else if (st.identity_groups > 0) st.mode = "mixed";
  else st.mode = st.cmdline_flags.find("iommu=pt") != std::string::npos ? "passthrough" : "unknown";
  return st;
}

GpuDirectStatus read_gpudirect(const Root& root) {
  GpuDirectStatus st;
  st.nvidia_driver = exists(root.sys("module/nvidia"));
  st.nvidia_peermem = exists(root.sys("module/nvidia_peermem")) || exists(root.sys("module/nv_peer_mem"));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root.sys("kernel/mm/memory_peers"), ec))
    if (e.path().filename().string().rfind("nv_mem", 0) == 0 && exists(e.path().string() + "/version"))
      st.memory_peers = true;
  st.gdrdrv = exists(root.sys("module/gdrdrv"));
  // dma-buf GPUDirect needs kernel >= 5.12 and NVIDIA's open kernel module.
  int major = 0, minor = 0;
  if (auto rel = read_line(root.proc("sys/kernel/osrelease"))) std::sscanf(rel->c_str(), "%d.%d", &major, &minor);
  bool kernel_ok = major > 5 || (major == 5 && minor >= 12);
  std::ifstream version(root.proc("driver/nvidia/version"));
  std::string text((std::istreambuf_iterator<char>(version)), std::istreambuf_iterator<char>());
  st.dmabuf = kernel_ok && text.find("Open Kernel Module") != std::string::npos;
  return st;
}

std::vector<NetInterface> read_net_interfaces(const Root& root) {
  std::vector<NetInterface> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root.sys("class/net"), ec)) {
    NetInterface nif;
    nif.name = e.path().filename().string();
    std::string dir = e.path().string() + "/";
    nif.pci = pci_of_link(dir + "device");
    nif.operstate = read_line(dir + "operstate").value_or("unknown");
    nif.speed_mbps = read_int(dir + "speed").value_or(-1);
    nif.loopback = read_int(dir + "type").value_or(0) == 772;  // ARPHRD_LOOPBACK
    out.push_back(std::move(nif));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

}  // namespace astral::topo::sysfs
