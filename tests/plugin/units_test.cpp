// Unit tests of the pieces with rules of their own: configuration parsing, interface selection
// (NCCL_SOCKET_IFNAME syntax, defaults, RDMA netdevs first in rail order), sysfs discovery, the
// wire format's checks and the striping layout.
#include <netinet/in.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/config.hpp"
#include "tcp/devices.hpp"
#include "tcp/ifname_filter.hpp"
#include "astral/topo/node.hpp"
#include "astral/topo/sysfs.hpp"
#include "core/nic_inventory.hpp"
#include "tcp/wire.hpp"

using namespace astral::plugin;

namespace {
Config parse(std::map<std::string, std::string> env, std::vector<std::string>* warnings) {
  return parse_config(
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      warnings);
}

NetInterface iface(const std::string& name, bool loopback = false, std::string pci = "") {
  NetInterface i;
  i.name = name;
  i.loopback = loopback;
  i.pci_path = std::move(pci);
  auto& in = reinterpret_cast<sockaddr_in&>(i.address);
  in.sin_family = AF_INET;
  i.address_len = sizeof(sockaddr_in);
  return i;
}

std::vector<std::string> names(const std::vector<TcpDevice>& devices) {
  std::vector<std::string> out;
  for (const auto& d : devices) out.push_back(d.name);
  return out;
}
}  // namespace

TEST_CASE("configuration: defaults, valid values and one warning per bad value",
          "[plugin][unit]") {
  std::vector<std::string> warnings;
  Config defaults = parse({}, &warnings);
  CHECK(warnings.empty());
  CHECK(defaults.streams == 0);
  CHECK(defaults.timeout_ms == 30000);
  CHECK(defaults.max_recvs == 8);
  CHECK(defaults.transport == "auto");

  Config set = parse({{"ASTRAL_TCP_STREAMS", "4"},
                      {"ASTRAL_TCP_STRIPE_MIN", "256K"},
                      {"ASTRAL_TCP_TIMEOUT_MS", "5000"},
                      {"ASTRAL_NET_MAX_RECVS", "1"},
                      {"ASTRAL_SOCKET_FAMILY", "AF_INET6"},
                      {"ASTRAL_SOCKET_IFNAME", "^docker,lo"}},
                     &warnings);
  CHECK(warnings.empty());
  CHECK(set.streams == 4);
  CHECK(set.stripe_min == 256 * 1024);
  CHECK(set.timeout_ms == 5000);
  CHECK(set.max_recvs == 1);
  CHECK(set.address_family == AF_INET6);
  CHECK(set.socket_ifname == "^docker,lo");

  Config bad = parse({{"ASTRAL_TCP_STREAMS", "99"},
                      {"ASTRAL_TCP_TIMEOUT_MS", "soon"},
                      {"ASTRAL_SOCKET_FAMILY", "ipx"},
                      {"ASTRAL_TRANSPORT", "carrier-pigeon"}},
                     &warnings);
  REQUIRE(warnings.size() == 4);
  std::string all;
  for (const auto& w : warnings) all += w + "\n";
  CHECK(all.find("ASTRAL_TCP_STREAMS='99' is not an integer in [0, 16]; using 0") !=
        std::string::npos);
  CHECK(all.find("ASTRAL_TCP_TIMEOUT_MS='soon'") != std::string::npos);
  CHECK(all.find("ASTRAL_SOCKET_FAMILY='ipx'") != std::string::npos);
  CHECK(all.find("ASTRAL_TRANSPORT='carrier-pigeon'") != std::string::npos);
  CHECK(bad.streams == 0);
  CHECK(bad.timeout_ms == 30000);
  CHECK(bad.transport == "auto");
}

TEST_CASE("configuration: GPU memory settings of the ib transport", "[plugin][unit]") {
  std::vector<std::string> warnings;
  Config defaults = parse({}, &warnings);
  CHECK(defaults.ib.gdr == -1);  // probe
  CHECK(defaults.ib.dmabuf);
  CHECK_FALSE(defaults.ib.flush_disable);
  Config set = parse({{"ASTRAL_IB_GDR", "1"}, {"ASTRAL_DMABUF_ENABLE", "0"},
                      {"ASTRAL_GDR_FLUSH_DISABLE", "1"}}, &warnings);
  CHECK(warnings.empty());
  CHECK(set.ib.gdr == 1);
  CHECK_FALSE(set.ib.dmabuf);
  CHECK(set.ib.flush_disable);
  Config bad = parse({{"ASTRAL_IB_GDR", "yes"}, {"ASTRAL_GDR_FLUSH_DISABLE", "2"}}, &warnings);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == "ASTRAL_IB_GDR='yes' is not an integer in [-1, 1]; using -1");
  CHECK(warnings[1] == "ASTRAL_GDR_FLUSH_DISABLE='2' is not an integer in [0, 1]; using 0");
  CHECK(bad.ib.gdr == -1);
  CHECK_FALSE(bad.ib.flush_disable);
}

TEST_CASE("interface filter follows NCCL_SOCKET_IFNAME", "[plugin][unit]") {
  auto prefix = IfnameFilter::parse("eth,ib");
  CHECK(prefix.accepts("eth0"));
  CHECK(prefix.accepts("eth10"));
  CHECK(prefix.accepts("ib0"));
  CHECK_FALSE(prefix.accepts("enp1s0"));
  auto exact = IfnameFilter::parse("=eth1");
  CHECK(exact.accepts("eth1"));
  CHECK_FALSE(exact.accepts("eth10"));
  auto exclude = IfnameFilter::parse("^docker,veth");
  CHECK(exclude.excludes());
  CHECK(exclude.accepts("eth0"));
  CHECK_FALSE(exclude.accepts("docker0"));
  auto exclude_exact = IfnameFilter::parse("^=eth0");
  CHECK_FALSE(exclude_exact.accepts("eth0"));
  CHECK(exclude_exact.accepts("eth01"));
  CHECK(IfnameFilter::parse("").empty());
  CHECK(IfnameFilter::parse("mlx5_0:1").accepts("mlx5_0"));  // ports are ignored
}

TEST_CASE("device selection: defaults, loopback only when named, RDMA netdevs in rail order",
          "[plugin][unit]") {
  std::vector<NetInterface> ifs = {iface("lo", true), iface("eth0", false, "/sys/devices/pci0000:00/0000:00:03.0"),
                                   iface("docker0"), iface("ens2", false, "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.1"),
                                   iface("ens1", false, "/sys/devices/pci0000:00/0000:17:00.0")};
  std::string why;
  CHECK(names(select_devices(ifs, {}, IfnameFilter::parse(""), &why)) ==
        std::vector<std::string>{"ens1", "ens2", "eth0"});
  CHECK(names(select_devices(ifs, {}, IfnameFilter::parse("lo"), &why)) ==
        std::vector<std::string>{"lo"});
  CHECK(names(select_devices(ifs, {}, IfnameFilter::parse("^eth"), &why)) ==
        std::vector<std::string>{"docker0", "ens1", "ens2"});  // loopback never by exclusion

  std::vector<RdmaPort> rdma(2);
  rdma[0] = {"mlx5_1", 1, "ens2", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", 0xabcd, 200000, true, 1};
  rdma[1] = {"mlx5_0", 1, "ens1", "/sys/devices/pci0000:00/0000:17:00.0", 0x1234, 200000, true, 0};
  auto devices = select_devices(ifs, rdma, IfnameFilter::parse(""), &why);
  REQUIRE(names(devices) == std::vector<std::string>{"ens1", "ens2"});  // RDMA netdevs only
  CHECK(devices[0].rail == 0);
  CHECK(devices[0].rdma_device == "mlx5_0");
  CHECK(devices[0].guid == 0x1234);
  CHECK(devices[1].pci_path == rdma[0].pci_path);  // the NIC's path, so NCCL pairs it right
  CHECK(devices[1].speed_mbps == 200000);

  auto with_filter = select_devices(ifs, rdma, IfnameFilter::parse("eth,ens2"), &why);
  CHECK(names(with_filter) == std::vector<std::string>{"ens2", "eth0"});

  // Ports of one PCI device share a GUID and differ in port number.
  auto plain = select_devices({iface("p0", false, "/sys/devices/pci0000:00/0000:3b:00.0"),
                               iface("p1", false, "/sys/devices/pci0000:00/0000:3b:00.1")},
                              {}, IfnameFilter::parse(""), &why);
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].guid == plain[1].guid);
  CHECK(plain[0].port != plain[1].port);

  CHECK(select_devices({iface("lo", true)}, {}, IfnameFilter::parse(""), &why).empty());
  CHECK(why.find("ASTRAL_SOCKET_IFNAME") != std::string::npos);
}

TEST_CASE("RDMA ports from topo's sysfs readers and node model", "[plugin][unit]") {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("astral-sysfs-" + std::to_string(getpid()));
  fs::remove_all(root);
  auto write = [&](const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  };
  // Two single-port NICs, the second without a netdev, laid out as the kernel does.
  for (auto [dev, bus, guid, netdev] :
       {std::tuple{"mlx5_1", "0000:b1:00.0", "0c42:a103:0012:3457", ""},
        std::tuple{"mlx5_0", "0000:17:00.0", "0c42:a103:0012:3456", "ens_mlx5_0"}}) {
    fs::path pci = root / "sys/devices/pci0000:00" / bus;
    fs::path ib = pci / "infiniband" / dev;
    write(ib / "sys_image_guid", guid);
    write(ib / "node_guid", guid);
    write(ib / "ports/1/rate", "400 Gb/sec (4X NDR)");
    write(ib / "ports/1/state", "4: ACTIVE");
    fs::create_directory_symlink("../..", ib / "device");
    if (*netdev) write(pci / "net" / netdev / "dev_port", "0");
    fs::create_directories(root / "sys/class/infiniband");
    fs::create_directory_symlink(ib, root / "sys/class/infiniband" / dev);
    fs::create_directories(root / "sys/bus/pci/devices");
    fs::create_directory_symlink(pci, root / "sys/bus/pci/devices" / bus);
  }
  astral::topo::sysfs::Root sysroot(root.string());
  auto devices = astral::topo::sysfs::read_ib_devices(sysroot);
  REQUIRE(devices.size() == 2);
  astral::topo::Node node;
  node.nics.resize(2);
  node.nics[0].name = "mlx5_0";
  node.nics[0].rail = 0;
  node.nics[1].name = "mlx5_1";
  node.nics[1].rail = 1;
  auto ports = rdma_ports_from(sysroot, devices, &node);
  auto without_model = rdma_ports_from(sysroot, devices, nullptr);
  fs::remove_all(root);
  REQUIRE(ports.size() == 2);
  CHECK(ports[0].device == "mlx5_0");  // PCI order
  CHECK(ports[0].rail == 0);
  CHECK(ports[0].netdev == "ens_mlx5_0");
  CHECK(ports[0].guid == 0x0c42a10300123456ULL);
  CHECK(ports[0].speed_mbps == 400000);
  CHECK(ports[0].active);
  CHECK(fs::path(ports[0].pci_path).filename() == "0000:17:00.0");
  CHECK(ports[1].device == "mlx5_1");
  CHECK(ports[1].rail == 1);
  CHECK(ports[1].netdev.empty());
  REQUIRE(without_model.size() == 2);
  CHECK(without_model[0].rail == -1);  // no node model: no rails invented

  CHECK(nearest_pci_path("/sys/devices/pci0000:00/0000:00:03.0/virtio2") ==
        "/sys/devices/pci0000:00/0000:00:03.0");
  CHECK(nearest_pci_path("/sys/devices/virtual/net/lo").empty());
}

TEST_CASE("wire checks and striping layout", "[plugin][unit]") {
  namespace tcp = astral::plugin::tcp;
  tcp::Secret secret{};
  secret[3] = 9;
  tcp::Hello hello{tcp::kHelloMagic, tcp::kProtocolVersion, 1, secret, 5, 2, -1, 0, 0};
  std::string why;
  CHECK(tcp::check_hello(hello, secret, &why));
  hello.version = 2;
  CHECK_FALSE(tcp::check_hello(hello, secret, &why));
  CHECK(why.find("protocol version 2") != std::string::npos);
  hello.version = tcp::kProtocolVersion;
  hello.stream_index = 2;
  CHECK_FALSE(tcp::check_hello(hello, secret, &why));
  hello.stream_index = 0;
  hello.stream_count = 17;
  CHECK_FALSE(tcp::check_hello(hello, secret, &why));

  for (uint64_t size : {0ULL, 1ULL, 4095ULL, 1ULL << 20, (1ULL << 20) + 1, 999999999ULL}) {
    for (int streams : {1, 2, 3, 4, 16}) {
      auto layout = tcp::stripe_layout(size, streams, 4096);
      uint64_t next = 0;
      for (int k = 0; k < layout.parts; ++k) {
        CHECK(layout.begin(k) == next);
        next += layout.length(k);
        if (k + 1 < layout.parts) CHECK(layout.length(k) % 4096 == 0);
      }
      CHECK(next == size);
      CHECK(layout.parts <= streams);
    }
  }
  CHECK(tcp::stripe_layout(100000, 4, 1 << 20).parts == 1);  // below the threshold
  CHECK(tcp::stripe_layout(~0ULL, 16, 4096).length(15) > 0);  // no overflow at the extreme
}
