// Device discovery for the ib transport: every ACTIVE port of every HCA, joined to the host
// view's NIC ports, with its addressing chosen as NCCL chooses it.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <fstream>

#include "core/log.hpp"
#include "core/nic_inventory.hpp"
#include "ib/hca.hpp"
#include "ib/hca_filter.hpp"

namespace astral::plugin::ib {
namespace {

bool gid_is_zero(const ibv_gid& g) {
  for (uint8_t b : g.raw) if (b) return false;
  return true;
}
bool gid_is_v4_mapped(const ibv_gid& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, prefix, sizeof prefix) == 0;
}
bool gid_is_link_local(const ibv_gid& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

// The GID type from rdma-core (1.11) or, like NCCL, from sysfs; -1 when neither says.
int gid_type_of(const Verbs& v, ibv_context* ctx, int port, int index) {
  if (v.query_gid_ex) {
    ibv_gid_entry entry{};
    if (v.query_gid_ex(ctx, uint32_t(port), uint32_t(index), &entry, 0, sizeof entry) == 0) {
      return static_cast<int>(entry.gid_type);
    }
  }
  std::ifstream in(fmt::format("{}/ports/{}/gid_attrs/types/{}", ctx->device->ibdev_path, port, index));
  std::string text;
  if (!std::getline(in, text)) return -1;
  if (text.find("v2") != std::string::npos) return IBV_GID_TYPE_ROCE_V2;
  if (text.find("v1") != std::string::npos) return IBV_GID_TYPE_ROCE_V1;
  return -1;
}

// NCCL's DMA-BUF probe: registering fd -1 fails with EOPNOTSUPP/EPROTONOSUPPORT when the kernel
// or provider cannot, and with another error (EBADF) when it can.
bool dmabuf_supported(const Verbs& v, ibv_pd* pd) {
  if (!v.reg_dmabuf_mr) return false;
  errno = 0;
  ibv_mr* mr = v.reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
  if (mr) {
    v.dereg_mr(mr);
    return true;
  }
  return errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
}

// The host view's port for this verbs port: by device name and port, else by PCI path.
const RdmaPort* join_host_port(const HostView& host, const std::string& name, int port,
                               const std::string& pci_path) {
  for (const RdmaPort& p : host.rdma_ports()) {
    if (p.device == name && p.port == port) return &p;
  }
  for (const RdmaPort& p : host.rdma_ports()) {
    if (!pci_path.empty() && p.pci_path == pci_path && p.port == port) return &p;
  }
  return nullptr;
}

std::vector<GidCandidate> read_gids(const Verbs& v, ibv_context* ctx, int port, int table_len) {
  std::vector<GidCandidate> table;
  for (int i = 0; i < table_len && i < 1024; ++i) {
    GidCandidate c;
    if (v.query_gid(ctx, uint8_t(port), i, &c.gid) != 0) break;
    c.type = gid_is_zero(c.gid) ? -1 : gid_type_of(v, ctx, port, i);
    table.push_back(c);
  }
  return table;
}

// Fills the port's addressing and identity; false when the port cannot carry traffic.
bool describe_port(const Verbs& v, const std::shared_ptr<Hca>& hca, int port,
                   const ibv_port_attr& attr, const IbConfig& config, const HostView& host,
                   IbPort* out) {
  ibv_context* ctx = hca->context();
  out->hca = hca;
  out->port = port;
  out->ethernet = attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  out->lid = attr.lid;
  out->lmc = attr.lmc;
  out->mtu = attr.active_mtu;
  out->rdma_device = hca->name();
  out->name = fmt::format("{}:{}", hca->name(), port);
  out->speed_mbps = port_speed_mbps(attr.active_width, attr.active_speed);
  out->pci_path = nearest_pci_path(fmt::format("{}/device", ctx->device->ibdev_path));
  if (const RdmaPort* p = join_host_port(host, hca->name(), port, out->pci_path)) {
    out->pci_path = p->pci_path;
    out->guid = p->guid;
    out->rail = p->rail;
    out->netdev = p->netdev;
    if (p->speed_mbps > 0 && out->speed_mbps == 0) out->speed_mbps = p->speed_mbps;
  }
  if (out->speed_mbps == 0) out->speed_mbps = 10000;
  if (out->guid == 0) {
    ibv_device_attr dattr{};
    if (v.query_device(ctx, &dattr) == 0) out->guid = dattr.sys_image_guid;
  }
  if (!out->ethernet) {
    out->gid_index = config.gid_index >= 0 ? config.gid_index : 0;
    v.query_gid(ctx, uint8_t(port), out->gid_index, &out->gid);
    return attr.lid != 0;
  }
  auto table = read_gids(v, ctx, port, attr.gid_tbl_len);
  out->gid_index = choose_gid_index(table, config);
  if (out->gid_index >= static_cast<int>(table.size()) || gid_is_zero(table[size_t(out->gid_index)].gid)) {
    ASTRAL_WARN("NET/IB : {}: GID index {} is empty or out of the table ({} entries); port not used",
                out->name, out->gid_index, table.size());
    return false;
  }
  out->gid = table[size_t(out->gid_index)].gid;
  out->gid_type = table[size_t(out->gid_index)].type;
  return true;
}

void add_ports_of(const std::shared_ptr<Hca>& hca, const IbConfig& config, const HostView& host,
                  const HcaFilter& filter, std::vector<IbPort>* ports) {
  const Verbs& v = hca->verbs();
  ibv_device_attr dattr{};
  if (v.query_device(hca->context(), &dattr) != 0) return;
  bool gdr = config.gdr >= 0 ? config.gdr == 1 : peer_memory_loaded();
  bool dmabuf = config.dmabuf && dmabuf_supported(v, hca->pd());
  ASTRAL_INFO("NET/IB : {}: GPU memory: peer memory (CUDA pointers) {}{}, DMA-BUF {}{}", hca->name(),
              gdr ? "yes" : "no", config.gdr >= 0 ? " (ASTRAL_IB_GDR)" : "", dmabuf ? "yes" : "no",
              config.dmabuf ? "" : " (ASTRAL_DMABUF_ENABLE=0)");
  for (int port = 1; port <= dattr.phys_port_cnt; ++port) {
    ibv_port_attr attr{};
    if (v.query_port(hca->context(), uint8_t(port), &attr) != 0) continue;
    if (attr.state != IBV_PORT_ACTIVE || !filter.accepts(hca->name(), port)) continue;
    if (attr.link_layer != IBV_LINK_LAYER_INFINIBAND && attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
      continue;
    }
    IbPort p;
    if (!describe_port(v, hca, port, attr, config, host, &p)) continue;
    filter.place(hca->name(), port, &p.rail, &p.plane);
    p.gdr = gdr;
    p.dmabuf = dmabuf;
    ports->push_back(std::move(p));
  }
}

}  // namespace

bool peer_memory_loaded() {
  for (const char* path : {"/sys/kernel/mm/memory_peers/nv_mem/version",
                           "/sys/kernel/mm/memory_peers/nvidia-peermem/version",
                           "/sys/module/nvidia_peermem/version"}) {
    if (access(path, F_OK) == 0) return true;
  }
  return false;
}

int choose_gid_index(const std::vector<GidCandidate>& table, const IbConfig& config) {
  if (config.gid_index >= 0) return config.gid_index;
  int family = config.addr_family == AF_INET6 ? AF_INET6 : AF_INET;
  int wanted = config.roce_version == 1 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
  int same_version = -1;
  for (size_t i = 0; i < table.size(); ++i) {
    const GidCandidate& c = table[i];
    if (gid_is_zero(c.gid) || (c.type >= 0 && c.type != wanted)) continue;
    bool v4 = gid_is_v4_mapped(c.gid);
    bool family_ok = family == AF_INET ? v4 : (!v4 && !gid_is_link_local(c.gid));
    if (family_ok) return static_cast<int>(i);
    if (same_version < 0) same_version = static_cast<int>(i);
  }
  return same_version >= 0 ? same_version : 0;
}

int port_speed_mbps(uint8_t active_width, uint8_t active_speed) {
  int lanes = active_width == 1 ? 1 : active_width == 2 ? 4 : active_width == 4 ? 8
            : active_width == 8 ? 12 : active_width == 16 ? 2 : 0;
  // Per-lane rates of verbs' speed bits: SDR DDR QDR FDR10 FDR EDR HDR NDR XDR.
  static const int lane_mbps[] = {2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000};
  for (int bit = 0; bit < 9; ++bit) {
    if (active_speed & (1 << bit)) return lanes * lane_mbps[bit];
  }
  return 0;
}

std::vector<IbPort> discover_ports(const IbConfig& config, const HostView& host, std::string* why) {
  std::vector<IbPort> ports;
  auto verbs = load_verbs(config.verbs_lib, why);
  if (!verbs) return ports;
  int count = 0;
  errno = 0;
  ibv_device** list = verbs->get_device_list(&count);
  if (!list) {
    *why = errno == ENOSYS ? "libibverbs reports no RDMA support in this kernel (ENOSYS)"
                           : fmt::format("ibv_get_device_list: {}", std::strerror(errno));
    return ports;
  }
  HcaFilter filter = HcaFilter::parse(config.hca);
  for (int i = 0; i < count; ++i) {
    const char* name = verbs->get_device_name(list[i]);
    ibv_context* ctx = verbs->open_device(list[i]);
    if (!ctx) continue;
    ibv_pd* pd = verbs->alloc_pd(ctx);
    if (!pd) {
      verbs->close_device(ctx);
      continue;
    }
    auto hca = std::make_shared<Hca>(verbs, ctx, pd, name ? name : "?");
    add_ports_of(hca, config, host, filter, &ports);
  }
  verbs->free_device_list(list);
  if (ports.empty()) {
    *why = count == 0 ? "libibverbs lists no RDMA device"
                      : fmt::format("none of the {} RDMA device(s) has an ACTIVE IB or RoCE port{}",
                                    count, config.hca.empty() ? "" : " that ASTRAL_IB_HCA selects");
  }
  return ports;
}

}  // namespace astral::plugin::ib
