// GPU memory over the ib transport, on softhca: the pointer types advertised as NCCL probes them
// (peer memory for CUDA pointers, DMA-BUF where the provider registers it), registrations the
// device did not offer refused with a WARN that says why, DMA-BUF memory receiving data through
// its fd (a memfd stands in for a GPU buffer), and iflush as an RDMA READ on a loopback QP.
// There is no GPU here: what the flush guarantees on PCIe (earlier writes visible to the GPU)
// cannot be observed, only that the READ is posted on the loopback QP and completes.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>

#include "harness.hpp"
#include "ib/hca.hpp"
#include "pattern.hpp"
#include "softhca_env.hpp"
#include "softhca_tools.hpp"

using namespace astral::test;
namespace ib = astral::plugin::ib;

namespace {

// The fabric of these tests: mlx5_0 (IB) and mlx5_1 (RoCE) register DMA-BUF, mlx5_2 does not.
struct GpuEnv : IbEnv {
  ScopedEnv fabric{"SOFTHCA_FABRIC", (std::string(PLUGIN_FABRICS) + "/gpu-host.json").c_str()};
};

int ptr_support(const ncclNet_v11_t& net, int dev) {
  ncclNetProperties_v11_t props{};
  REQUIRE(net.getProperties(dev, &props) == ncclSuccess);
  return props.ptrSupport;
}

// A stand-in for a GPU buffer: a memfd (its DMA-BUF), the exporter's CPU view of it, and an
// address range that is not CPU-accessible (PROT_NONE), as a device pointer is not. Whatever
// reaches `exporter` went through the fd.
struct FakeGpuBuffer {
  size_t size;
  int fd = memfd_create("astral-test-gpu", MFD_CLOEXEC);
  void* device_va = nullptr;
  uint8_t* exporter = nullptr;
  explicit FakeGpuBuffer(size_t bytes) : size(bytes) {
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, off_t(size)) == 0);
    device_va = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    exporter = static_cast<uint8_t*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    REQUIRE((device_va != MAP_FAILED && exporter != MAP_FAILED));
  }
  ~FakeGpuBuffer() {
    munmap(device_va, size);
    munmap(exporter, size);
    if (fd >= 0) close(fd);
  }
  // NCCL's call: the fd comes from cuMemGetHandleForAddressRange and is closed right after.
  void* register_on(const ncclNet_v11_t& net, void* comm) {
    void* mhandle = nullptr;
    REQUIRE(net.regMrDmaBuf(comm, device_va, size, NCCL_PTR_CUDA, 0, fd, &mhandle) == ncclSuccess);
    close(fd);
    fd = -1;
    return mhandle;
  }
};

// iflush of one received buffer; *request is poisoned first, so that "left unset" shows.
ncclResult_t flush_one(const ncclNet_v11_t& net, void* recv_comm, void* data, size_t bytes,
                       void* mhandle, void** request) {
  int size = int(bytes);
  *request = request;
  return net.iflush(recv_comm, 1, &data, &size, &mhandle, request);
}

// The loopback QPs (connected to themselves) softhca brought to RTR since `from`.
size_t loopback_qps_since(std::streamoff from) {
  auto lines = path_log_since(from);
  return size_t(std::count_if(lines.begin(), lines.end(),
                              [](const auto& l) { return l["qpn"] == l["dest_qpn"]; }));
}

}  // namespace

TEST_CASE("softhca: ptrSupport offers CUDA with peer memory and DMA-BUF where the provider has it",
          "[plugin][ib]") {
  GpuEnv env;
  {
    ScopedEnv gdr("ASTRAL_IB_GDR", "0");
    LogCapture::clear();
    PluginContext p;
    CHECK(ptr_support(p.net, 0) == (NCCL_PTR_HOST | NCCL_PTR_DMABUF));
    CHECK(ptr_support(p.net, 2) == NCCL_PTR_HOST);  // ibv_reg_dmabuf_mr(fd -1): EOPNOTSUPP
    CHECK(LogCapture::count(NCCL_LOG_INFO, "mlx5_2: GPU memory: peer memory (CUDA pointers) no "
                                           "(ASTRAL_IB_GDR), DMA-BUF no") == 1);
  }
  {
    ScopedEnv gdr("ASTRAL_IB_GDR", "1");
    ScopedEnv dmabuf("ASTRAL_DMABUF_ENABLE", "0");
    PluginContext p;
    CHECK(ptr_support(p.net, 0) == (NCCL_PTR_HOST | NCCL_PTR_CUDA));
    CHECK(ptr_support(p.net, 2) == (NCCL_PTR_HOST | NCCL_PTR_CUDA));
  }
  {
    // Probed as NCCL probes it: this machine's nvidia_peermem decides.
    PluginContext p;
    int cuda = ib::peer_memory_loaded() ? NCCL_PTR_CUDA : 0;
    CHECK(ptr_support(p.net, 1) == (NCCL_PTR_HOST | NCCL_PTR_DMABUF | cuda));
  }
}

TEST_CASE("softhca: regMr refuses GPU memory its device did not offer, with a WARN saying why",
          "[plugin][ib]") {
  GpuEnv env;
  ScopedEnv gdr("ASTRAL_IB_GDR", "0");
  LogCapture::clear();
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx, 2);  // mlx5_2: no DMA-BUF
  std::vector<uint8_t> buffer(4096);
  void* mh = nullptr;
  CHECK(p.net.regMr(pair.recv, buffer.data(), buffer.size(), NCCL_PTR_CUDA, &mh) == ncclInternalError);
  CHECK(mh == nullptr);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "needs GPUDirect RDMA, and no peer-memory module is loaded") == 1);
  FakeGpuBuffer gpu(4096);
  CHECK(p.net.regMrDmaBuf(pair.recv, gpu.device_va, gpu.size, NCCL_PTR_CUDA, 0, gpu.fd, &mh) ==
        ncclInternalError);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "regMrDmaBuf: GPU memory") == 1);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "does not offer DMA-BUF") == 1);
  exchange_one_message(p.net, pair);  // the comms are unharmed
  close_pair(p.net, pair);
}

TEST_CASE("softhca DMA-BUF: received data reaches the exporter's pages and iflush reads through a "
          "loopback QP", "[plugin][ib]") {
  int dev = GENERATE(0, 1);  // IB (a DLID to itself), RoCE (a GRH to its own GID)
  GpuEnv env;
  ScopedEnv gdr("ASTRAL_IB_GDR", "0");
  auto from = path_log_size();
  LogCapture::clear();
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx, dev);
  INFO("device " << dev << "\n" << LogCapture::dump());
  CHECK(loopback_qps_since(from) == 1);  // the receive end's flush QP
  FakeGpuBuffer gpu(3 << 20);
  void* mh = gpu.register_on(p.net, pair.recv);
  for (size_t bytes : {size_t(1), size_t(4097), size_t(3 << 20)}) {
    receive_into(p.net, pair, gpu.device_va, mh, bytes, bytes + 1);
    CHECK(check_pattern(gpu.exporter, bytes, bytes + 1) == SIZE_MAX);
    void* data[2] = {gpu.device_va, gpu.device_va};
    int sizes[2] = {int(bytes), 0};  // the last non-empty buffer is read
    void* mhandles[2] = {mh, mh};
    void* flush = nullptr;
    REQUIRE(p.net.iflush(pair.recv, 2, data, sizes, mhandles, &flush) == ncclSuccess);
    REQUIRE(flush != nullptr);
    REQUIRE(wait_request(p.net, flush, nullptr, 10) == ncclSuccess);
  }
  // Host memory needs no flush: the request is null, "complete".
  std::vector<uint8_t> host(4096);
  void* host_mh = nullptr;
  REQUIRE(p.net.regMr(pair.recv, host.data(), host.size(), NCCL_PTR_HOST, &host_mh) == ncclSuccess);
  receive_into(p.net, pair, host.data(), host_mh, host.size(), 3);
  void* flush = nullptr;
  REQUIRE(flush_one(p.net, pair.recv, host.data(), host.size(), host_mh, &flush) == ncclSuccess);
  CHECK(flush == nullptr);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "") == 0);
  p.net.deregMr(pair.recv, host_mh);
  p.net.deregMr(pair.recv, mh);
  close_pair(p.net, pair);
}

// With peer memory (nvidia_peermem), NCCL registers CUDA pointers with plain regMr. softhca cannot
// tell a device pointer from host memory, so host memory stands in: what is checked is the path
// (accepted as GPU memory, flushed), not GPU memory itself.
TEST_CASE("softhca: with peer memory, a CUDA-pointer registration takes data and its receives are flushed",
          "[plugin][ib]") {
  GpuEnv env;
  ScopedEnv gdr("ASTRAL_IB_GDR", "1");
  ScopedEnv dmabuf("ASTRAL_DMABUF_ENABLE", "0");
  PluginContext p;
  REQUIRE(ptr_support(p.net, 2) == (NCCL_PTR_HOST | NCCL_PTR_CUDA));
  CommPair pair = connect_pair(p.net, p.ctx, 2);  // mlx5_2: peer memory only
  std::vector<uint8_t> device(256 << 10);
  void* mh = nullptr;
  REQUIRE(p.net.regMr(pair.recv, device.data(), device.size(), NCCL_PTR_CUDA, &mh) == ncclSuccess);
  receive_into(p.net, pair, device.data(), mh, device.size(), 6);
  CHECK(check_pattern(device.data(), device.size(), 6) == SIZE_MAX);
  void* flush = nullptr;
  REQUIRE(flush_one(p.net, pair.recv, device.data(), device.size(), mh, &flush) == ncclSuccess);
  REQUIRE(flush != nullptr);
  REQUIRE(wait_request(p.net, flush, nullptr, 10) == ncclSuccess);
  p.net.deregMr(pair.recv, mh);
  close_pair(p.net, pair);
}

TEST_CASE("softhca: ASTRAL_GDR_FLUSH_DISABLE=1 makes no flush QP and every iflush complete at once",
          "[plugin][ib]") {
  GpuEnv env;
  ScopedEnv disable("ASTRAL_GDR_FLUSH_DISABLE", "1");
  auto from = path_log_size();
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx, 0);
  CHECK(loopback_qps_since(from) == 0);
  FakeGpuBuffer gpu(1 << 20);
  void* mh = gpu.register_on(p.net, pair.recv);
  receive_into(p.net, pair, gpu.device_va, mh, gpu.size, 8);
  CHECK(check_pattern(gpu.exporter, gpu.size, 8) == SIZE_MAX);
  void* flush = nullptr;
  REQUIRE(flush_one(p.net, pair.recv, gpu.device_va, gpu.size, mh, &flush) == ncclSuccess);
  CHECK(flush == nullptr);
  p.net.deregMr(pair.recv, mh);
  close_pair(p.net, pair);
}

TEST_CASE("softhca: a flush QP gone to error fails the flush and its comm within a bound, one WARN",
          "[plugin][ib]") {
  GpuEnv env;
  auto from = path_log_size();
  LogCapture::clear();
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx, 0);
  auto lines = path_log_since(from);
  auto loopback = std::find_if(lines.begin(), lines.end(), [](const auto& l) { return l["qpn"] == l["dest_qpn"]; });
  REQUIRE(loopback != lines.end());
  FakeGpuBuffer gpu(64 << 10);
  void* mh = gpu.register_on(p.net, pair.recv);
  receive_into(p.net, pair, gpu.device_va, mh, gpu.size, 4);
  REQUIRE(softhca_fault(R"({"fault":"qp_error","qpn":)" + std::to_string((*loopback)["qpn"].get<int>()) +
                        "}") == 0);
  void* flush = nullptr;
  ncclResult_t res = flush_one(p.net, pair.recv, gpu.device_va, gpu.size, mh, &flush);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (res == ncclSuccess && flush) {
    REQUIRE(Clock::now() < deadline);
    int done = 0;
    res = p.net.test(flush, &done, nullptr);
    if (done) break;
  }
  INFO(LogCapture::dump());
  CHECK(res != ncclSuccess);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "receive connection") == 1);
  p.net.deregMr(pair.recv, mh);
  close_pair(p.net, pair);
}
