// Exported verbs: devices, contexts, queries, PDs, MRs, CQs, completion channels, async events.
// Names and versions follow rdma-core 44 (libibverbs.map); the version script is softhca.map.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "internal.hpp"

#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace softhca;

extern "C" int softhca_poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
extern "C" int softhca_req_notify_cq(ibv_cq* cq, int solicited_only);
extern "C" int softhca_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
extern "C" int softhca_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);

namespace softhca {
Context* to_ctx(ibv_context* c) {
  return reinterpret_cast<Context*>(reinterpret_cast<uint8_t*>(c) - offsetof(verbs_context, context));
}
}  // namespace softhca

namespace {

Engine& eng() { return Engine::get(); }

const DeviceSpec& spec_of(const Device* d) { return eng().fabric.hosts[d->host].devices[d->index]; }

// A verb on a device after DEVICE_FATAL fails with EIO, as rdma-core's do after disassociation.
bool dead(ibv_context* c) {
  std::lock_guard lock(eng().mu);
  return eng().fatal[to_ctx(c)->dev->index];
}

int fill_port(ibv_context* c, uint8_t port_num, ibv_port_attr* a, size_t len) {
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  const Device* d = to_ctx(c)->dev;
  const DeviceSpec& ds = spec_of(d);
  if (port_num < 1 || port_num > ds.ports.size()) return EINVAL;
  const PortSpec& p = ds.ports[port_num - 1];
  bool up = e.ports[d->index][port_num - 1].active;
  ibv_port_attr out{};
  out.state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  out.max_mtu = IBV_MTU_4096;
  out.active_mtu = p.mtu;
  out.gid_tbl_len = static_cast<int>(p.gids.size());
  out.port_cap_flags = p.ethernet ? 0x04010000 : 0x02510848;  // IP-based GIDs / SM, trap, CM...
  out.max_msg_sz = 0x40000000;
  out.pkey_tbl_len = p.ethernet ? 1 : 128;
  out.lid = p.ethernet ? 0 : p.lid;
  out.sm_lid = p.ethernet ? 0 : p.sm_lid;
  out.lmc = p.ethernet ? 0 : p.lmc;
  out.max_vl_num = 4;
  out.subnet_timeout = 18;
  out.active_width = p.width;
  out.active_speed = p.speed;
  out.phys_state = up ? 5 : 3;  // LinkUp : Disabled
  out.link_layer = p.ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  std::memcpy(a, &out, std::min(len, sizeof out));
  return 0;
}

int query_port_ex(ibv_context* c, uint8_t port, ibv_port_attr* a, size_t len) { return fill_port(c, port, a, len); }

void fill_device(ibv_context* c, ibv_device_attr* a) {
  const DeviceSpec& ds = spec_of(to_ctx(c)->dev);
  *a = ibv_device_attr{};
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "44.0.1");
  a->node_guid = htobe64(ds.guid);
  a->sys_image_guid = htobe64(ds.guid);
  a->max_mr_size = ~0ULL;
  a->page_size_cap = 0xfffff000;
  a->vendor_id = ds.vendor_id;
  a->vendor_part_id = ds.vendor_part_id;
  a->max_qp = 1 << 17;
  a->max_qp_wr = 32768;
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
  a->max_sge = 30;
  a->max_sge_rd = 30;
  a->max_cq = 1 << 16;
  a->max_cqe = 4194303;
  a->max_mr = 1 << 20;
  a->max_pd = 1 << 16;
  a->max_qp_rd_atom = 16;
  a->max_qp_init_rd_atom = 16;
  a->max_res_rd_atom = 1 << 20;
  a->atomic_cap = IBV_ATOMIC_NONE;
  a->max_pkeys = 128;
  a->local_ca_ack_delay = 16;
  a->phys_port_cnt = static_cast<uint8_t>(ds.ports.size());
}

int query_device_ex(ibv_context* c, const ibv_query_device_ex_input*, ibv_device_attr_ex* a, size_t len) {
  ibv_device_attr_ex out{};
  fill_device(c, &out.orig_attr);
  std::memcpy(a, &out, std::min(len, sizeof out));
  return 0;
}

int compat_query_device(ibv_context* c, ibv_device_attr* a) {
  fill_device(c, a);
  return 0;
}

const GidSpec* gid_at(ibv_context* c, uint32_t port, uint32_t index) {
  const DeviceSpec& ds = spec_of(to_ctx(c)->dev);
  if (port < 1 || port > ds.ports.size()) return nullptr;
  const PortSpec& p = ds.ports[port - 1];
  return index < p.gids.size() ? &p.gids[index] : nullptr;
}

}  // namespace

extern "C" {

ibv_device** ibv_get_device_list(int* num) {
  Engine& e = eng();
  if (num) *num = 0;
  if (!e.load()) return nullptr;  // errno: ENOSYS without a fabric, as rdma-core without RDMA
  auto** list = static_cast<ibv_device**>(std::calloc(e.devices.size() + 1, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < e.devices.size(); ++i) list[i] = &e.devices[i]->ibdev;
  if (num) *num = static_cast<int>(e.devices.size());
  return list;
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(ibv_device* d) { return d->name; }

__be64 ibv_get_device_guid(ibv_device* d) {
  auto* dev = reinterpret_cast<Device*>(d);
  return htobe64(spec_of(dev).guid);
}

int ibv_get_device_index(ibv_device* d) { return reinterpret_cast<Device*>(d)->index; }

ibv_context* ibv_open_device(ibv_device* d) {
  auto* c = new Context;
  c->dev = reinterpret_cast<Device*>(d);
  verbs_context& v = c->vctx;
  v.sz = sizeof(verbs_context);
  v.query_port = query_port_ex;
  v.query_device_ex = query_device_ex;
  ibv_context& ctx = v.context;
  ctx.device = d;
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  ctx.ops._compat_query_device = compat_query_device;
  ctx.ops.poll_cq = softhca_poll_cq;
  ctx.ops.req_notify_cq = softhca_req_notify_cq;
  ctx.ops.post_send = softhca_post_send;
  ctx.ops.post_recv = softhca_post_recv;
  ctx.cmd_fd = -1;
  ctx.num_comp_vectors = 1;
  pthread_mutex_init(&ctx.mutex, nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    delete c;
    return nullptr;
  }
  ctx.async_fd = fds[0];
  c->async_wfd = fds[1];
  std::string error;
  if (!eng().open_context(c, error)) {
    std::fprintf(stderr, "softhca: %s\n", error.c_str());
    close(fds[0]);
    close(fds[1]);
    delete c;
    return nullptr;
  }
  return &ctx;
}

int ibv_close_device(ibv_context* ctx) {
  Context* c = to_ctx(ctx);
  eng().close_context(c);
  close(ctx->async_fd);
  close(c->async_wfd);
  pthread_mutex_destroy(&ctx->mutex);
  delete c;
  return 0;
}

int ibv_query_device(ibv_context* c, ibv_device_attr* a) {
  if (dead(c)) return EIO;
  fill_device(c, a);
  return 0;
}

int ibv_query_port(ibv_context* c, uint8_t port, struct _compat_ibv_port_attr* a) {
  return fill_port(c, port, reinterpret_cast<ibv_port_attr*>(a), offsetof(ibv_port_attr, port_cap_flags2));
}

int ibv_query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  const GidSpec* g = index >= 0 ? gid_at(c, port, static_cast<uint32_t>(index)) : nullptr;
  if (!g) {
    errno = EINVAL;
    return -1;
  }
  *gid = g->gid;
  return 0;
}

// enum ibv_gid_type_sysfs of rdma-core's private driver.h: 0 IB/RoCE v1, 1 RoCE v2.
int ibv_query_gid_type(ibv_context* c, uint8_t port, unsigned index, int* type) {
  const GidSpec* g = gid_at(c, port, index);
  if (!g) {
    errno = EINVAL;
    return -1;
  }
  *type = g->type == GidType::roce_v2 ? 1 : 0;
  return 0;
}

int _ibv_query_gid_ex(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags,
                      size_t entry_size) {
  if (flags || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  const GidSpec* g = gid_at(c, port, index);
  if (!g) return ENODATA;
  entry->gid = g->gid;
  entry->gid_index = index;
  entry->port_num = port;
  entry->gid_type = g->type == GidType::ib ? IBV_GID_TYPE_IB
                    : g->type == GidType::roce_v1 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
  entry->ndev_ifindex = 0;
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* c, ibv_gid_entry* entries, size_t max, uint32_t flags, size_t entry_size) {
  if (flags || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  const DeviceSpec& ds = spec_of(to_ctx(c)->dev);
  size_t n = 0;
  for (uint32_t p = 1; p <= ds.ports.size(); ++p)
    for (uint32_t i = 0; i < ds.ports[p - 1].gids.size(); ++i) {
      if (n == max) return -EINVAL;
      _ibv_query_gid_ex(c, p, i, &entries[n++], 0, sizeof(ibv_gid_entry));
    }
  return static_cast<ssize_t>(n);
}

int ibv_query_pkey(ibv_context*, uint8_t, int index, __be16* pkey) {
  if (index != 0) return -1;
  *pkey = htobe16(0xffff);
  return 0;
}

int ibv_get_pkey_index(ibv_context*, uint8_t, __be16 pkey) { return be16toh(pkey) == 0xffff ? 0 : -1; }

// ibv_devinfo reads board_id this way. Real files are read when the fabric points ibdev_path at a
// directory that exists (e.g. a sysfs fixture); otherwise the device's own strings are served.
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  std::string path = std::string(dir) + "/" + file;
  if (int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    ssize_t n = read(fd, buf, size > 0 ? size - 1 : 0);
    close(fd);
    if (n < 0) return -1;
    while (n > 0 && buf[n - 1] == '\n') --n;
    buf[n] = 0;
    return static_cast<int>(n);
  }
  Engine& e = eng();
  for (auto& d : e.devices) {
    if (std::strcmp(d->ibdev.ibdev_path, dir) != 0) continue;
    const DeviceSpec& ds = spec_of(d.get());
    std::string value = std::strcmp(file, "board_id") == 0 ? ds.board_id
                        : std::strcmp(file, "fw_ver") == 0 ? "44.0.1"
                        : std::strcmp(file, "node_desc") == 0 ? e.fabric.hosts[e.host].name + " " + ds.name
                                                                 : "";
    if (value.empty() || size == 0) break;
    std::snprintf(buf, size, "%s", value.c_str());
    return static_cast<int>(std::min(value.size(), size - 1));
  }
  errno = ENOENT;
  return -1;
}

int ibv_get_sysfs_path(char* buf, size_t size) {
  std::snprintf(buf, size, "/sys");
  return 0;
}

int ibv_fork_init(void) { return 0; }
enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

ibv_pd* ibv_alloc_pd(ibv_context* c) {
  if (dead(c)) {
    errno = EIO;
    return nullptr;
  }
  auto* p = new Pd;
  p->pd.context = c;
  p->pd.handle = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p));
  return &p->pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  for (auto& [key, m] : e.mrs)
    if (m->mr.pd == pd) return EBUSY;
  for (auto& [key, q] : e.qps)
    if (q->qp.pd == pd) return EBUSY;
  delete reinterpret_cast<Pd*>(pd);
  return 0;
}

namespace {

// The kernel's rules: known flags only, and remote write or atomic access needs local write.
bool access_invalid(unsigned access) {
  constexpr unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                             IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING;
  return (access & ~known) ||
         ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE));
}

ibv_mr* add_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access, void* mapping,
               size_t mapping_len) {
  Engine& e = eng();
  auto* m = new Mr;
  std::lock_guard lock(e.mu);
  uint32_t key = e.next_key;
  e.next_key += 0x100 + 0x3d;  // never reused within a process, not guessable by adding 1
  m->mr = ibv_mr{pd->context, pd, addr, length, key, key, key};
  m->iova = iova;
  m->access = access;
  m->mapping = mapping;
  m->mapping_len = mapping_len;
  e.mrs[key] = m;
  return &m->mr;
}

}  // namespace

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (access_invalid(access) || (!addr && length)) {
    errno = EINVAL;
    return nullptr;
  }
  if (dead(pd->context)) {
    errno = EIO;
    return nullptr;
  }
  return add_mr(pd, addr, length, iova, access, nullptr, 0);
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr), static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

// DMA-BUF: the provider reaches the exporter's memory through the fd, not through the caller's
// address space. softhca maps the fd itself (any mmap-able fd: a memfd stands in for a GPU's
// buffer), so data lands where the exporter sees it, and the caller may close the fd right after,
// as NCCL does. A device without "dmabuf" fails as a provider without the feature does.
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  if (!spec_of(to_ctx(pd->context)->dev).dmabuf) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (access_invalid(static_cast<unsigned>(access))) {
    errno = EINVAL;
    return nullptr;
  }
  if (fd < 0) {
    errno = EBADF;
    return nullptr;
  }
  if (dead(pd->context)) {
    errno = EIO;
    return nullptr;
  }
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  uint64_t start = offset & ~uint64_t(page - 1);
  size_t mapping_len = std::max<size_t>(length + (offset - start), 1);
  void* mapping = mmap(nullptr, mapping_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(start));
  if (mapping == MAP_FAILED) return nullptr;  // errno from mmap: EBADF, ENODEV, EACCES
  void* addr = static_cast<uint8_t*>(mapping) + (offset - start);
  return add_mr(pd, addr, length, iova, static_cast<unsigned>(access), mapping, mapping_len);
}

int ibv_dereg_mr(ibv_mr* mr) {
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  e.mrs.erase(mr->lkey);
  auto* m = reinterpret_cast<Mr*>(mr);
  if (m->mapping) munmap(m->mapping, m->mapping_len);
  delete m;
  return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* c) {
  auto* ch = new Channel;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    delete ch;
    return nullptr;
  }
  ch->ch.context = c;
  ch->ch.fd = fds[0];
  ch->wfd = fds[1];
  return &ch->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  auto* ch = reinterpret_cast<Channel*>(channel);
  close(ch->ch.fd);
  close(ch->wfd);
  delete ch;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* channel, int) {
  if (cqe < 1 || cqe > 4194303) {
    errno = EINVAL;
    return nullptr;
  }
  if (dead(c)) {
    errno = EIO;
    return nullptr;
  }
  auto* q = new Cq;
  q->cq.context = c;
  q->cq.channel = channel;
  q->cq.cq_context = cq_context;
  q->cq.cqe = cqe;
  q->capacity = static_cast<size_t>(cqe);
  pthread_mutex_init(&q->cq.mutex, nullptr);
  pthread_cond_init(&q->cq.cond, nullptr);
  return &q->cq;
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  auto* q = reinterpret_cast<Cq*>(cq);
  if (cqe < 1 || static_cast<size_t>(cqe) < q->wcs.size()) return EINVAL;
  q->capacity = static_cast<size_t>(cqe);
  cq->cqe = cqe;
  return 0;
}

int ibv_destroy_cq(ibv_cq* cq) {
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  for (auto& [key, q] : e.qps)
    if (q->qp.send_cq == cq || q->qp.recv_cq == cq) return EBUSY;
  pthread_mutex_destroy(&cq->mutex);
  pthread_cond_destroy(&cq->cond);
  delete reinterpret_cast<Cq*>(cq);
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  ibv_cq* got = nullptr;
  if (read(channel->fd, &got, sizeof got) != static_cast<ssize_t>(sizeof got)) return -1;
  *cq = got;
  *cq_context = got->cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_mutex_unlock(&cq->mutex);
}

int ibv_get_async_event(ibv_context* ctx, ibv_async_event* event) {
  char byte;
  if (read(ctx->async_fd, &byte, 1) != 1) return -1;
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  Context* c = to_ctx(ctx);
  if (c->events.empty()) {
    errno = EAGAIN;
    return -1;
  }
  *event = c->events.front();
  c->events.pop_front();
  return 0;
}

void ibv_ack_async_event(ibv_async_event* event) {
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR: ++event->element.cq->async_events_completed; break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: ++event->element.qp->events_completed; break;
    default: break;
  }
  e.acked.notify_all();
}

}  // extern "C"
