#include "ib/verbs.hpp"

#include <dlfcn.h>

#include <cstring>
#include <fmt/format.h>

namespace astral::plugin::ib {
namespace {

// dlvsym into a typed member; required symbols missing make the load fail, naming the first.
template <typename F>
bool bind_symbol(void* handle, F* slot, const char* name, const char* version, bool required,
          std::string* missing) {
  *slot = reinterpret_cast<F>(dlvsym(handle, name, version));
  if (!*slot && required && missing->empty()) *missing = fmt::format("{}@{}", name, version);
  return *slot != nullptr;
}

}  // namespace

// libibverbs stays loaded, as NCCL leaves it: providers start threads of their own (rdma-core's
// and softhca's) that a dlclose would unmap under them. A later load finds the same instance.
Verbs::~Verbs() = default;

int Verbs::query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) const {
  std::memset(attr, 0, sizeof *attr);
  verbs_context* vctx = verbs_get_ctx(context);
  if (vctx && vctx->query_port) return vctx->query_port(context, port, attr, sizeof *attr);
  return query_port_compat(context, port, attr);
}

const char* Verbs::status_name(ibv_wc_status status) const {
  const char* s = wc_status_str ? wc_status_str(status) : nullptr;
  return s ? s : "unknown status";
}

const char* Verbs::event_name(ibv_event_type type) const {
  const char* s = event_type_str ? event_type_str(type) : nullptr;
  return s ? s : "unknown event";
}

std::shared_ptr<const Verbs> load_verbs(const std::string& path, std::string* why) {
  auto v = std::make_shared<Verbs>();
  v->library = path.empty() ? "libibverbs.so.1" : path;
  v->handle = dlopen(v->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!v->handle) {
    const char* err = dlerror();
    *why = fmt::format("cannot load {}: {}", v->library, err ? err : "?");
    return nullptr;
  }
  std::string missing;
  const char* v11 = "IBVERBS_1.1";
  bind_symbol(v->handle, &v->get_device_list, "ibv_get_device_list", v11, true, &missing);
  bind_symbol(v->handle, &v->free_device_list, "ibv_free_device_list", v11, true, &missing);
  bind_symbol(v->handle, &v->get_device_name, "ibv_get_device_name", v11, true, &missing);
  bind_symbol(v->handle, &v->open_device, "ibv_open_device", v11, true, &missing);
  bind_symbol(v->handle, &v->close_device, "ibv_close_device", v11, true, &missing);
  bind_symbol(v->handle, &v->query_device, "ibv_query_device", v11, true, &missing);
  bind_symbol(v->handle, &v->query_port_compat, "ibv_query_port", v11, true, &missing);
  bind_symbol(v->handle, &v->query_gid, "ibv_query_gid", v11, true, &missing);
  bind_symbol(v->handle, &v->alloc_pd, "ibv_alloc_pd", v11, true, &missing);
  bind_symbol(v->handle, &v->dealloc_pd, "ibv_dealloc_pd", v11, true, &missing);
  bind_symbol(v->handle, &v->reg_mr, "ibv_reg_mr", v11, true, &missing);
  bind_symbol(v->handle, &v->dereg_mr, "ibv_dereg_mr", v11, true, &missing);
  bind_symbol(v->handle, &v->create_cq, "ibv_create_cq", v11, true, &missing);
  bind_symbol(v->handle, &v->destroy_cq, "ibv_destroy_cq", v11, true, &missing);
  bind_symbol(v->handle, &v->create_qp, "ibv_create_qp", v11, true, &missing);
  bind_symbol(v->handle, &v->modify_qp, "ibv_modify_qp", v11, true, &missing);
  bind_symbol(v->handle, &v->query_qp, "ibv_query_qp", v11, true, &missing);
  bind_symbol(v->handle, &v->destroy_qp, "ibv_destroy_qp", v11, true, &missing);
  bind_symbol(v->handle, &v->get_async_event, "ibv_get_async_event", v11, true, &missing);
  bind_symbol(v->handle, &v->ack_async_event, "ibv_ack_async_event", v11, true, &missing);
  bind_symbol(v->handle, &v->event_type_str, "ibv_event_type_str", v11, true, &missing);
  bind_symbol(v->handle, &v->fork_init, "ibv_fork_init", v11, true, &missing);
  bind_symbol(v->handle, &v->wc_status_str, "ibv_wc_status_str", v11, false, &missing);
  bind_symbol(v->handle, &v->reg_mr_iova2, "ibv_reg_mr_iova2", "IBVERBS_1.8", false, &missing);
  bind_symbol(v->handle, &v->query_gid_ex, "_ibv_query_gid_ex", "IBVERBS_1.11", false, &missing);
  bind_symbol(v->handle, &v->reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", false, &missing);
  if (!missing.empty()) {
    *why = fmt::format("{} lacks {}", v->library, missing);
    return nullptr;
  }
  return v;
}

}  // namespace astral::plugin::ib
