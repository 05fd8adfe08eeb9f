#pragma once
// libibverbs, loaded at run time: the plugin has no link dependency on rdma-core, so it loads on
// hosts without it and a test can point it at a software HCA (ASTRAL_IBVERBS_LIB). Symbols are
// resolved by version with dlvsym, as NCCL does: the IBVERBS_1.1 set is required, later ones are
// optional (null when absent). Posting and polling are inline in <infiniband/verbs.h> (they jump
// through context->ops) and need no symbol; the inline wrappers that fall back to exported
// functions (ibv_query_port, ibv_reg_mr with variable flags, ibv_query_gid_ex) are never used
// here: query_port goes through the verbs_context itself (query_port below).
#include <infiniband/verbs.h>

#include <memory>
#include <string>

namespace astral::plugin::ib {

struct Verbs {
  // IBVERBS_1.1: required.
  ibv_device** (*get_device_list)(int*) = nullptr;
  void (*free_device_list)(ibv_device**) = nullptr;
  const char* (*get_device_name)(ibv_device*) = nullptr;
  ibv_context* (*open_device)(ibv_device*) = nullptr;
  int (*close_device)(ibv_context*) = nullptr;
  int (*query_device)(ibv_context*, ibv_device_attr*) = nullptr;
  int (*query_port_compat)(ibv_context*, uint8_t, ibv_port_attr*) = nullptr;
  int (*query_gid)(ibv_context*, uint8_t, int, ibv_gid*) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context*) = nullptr;
  int (*dealloc_pd)(ibv_pd*) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int) = nullptr;
  int (*dereg_mr)(ibv_mr*) = nullptr;
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroy_cq)(ibv_cq*) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  int (*query_qp)(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*) = nullptr;
  int (*destroy_qp)(ibv_qp*) = nullptr;
  int (*get_async_event)(ibv_context*, ibv_async_event*) = nullptr;
  void (*ack_async_event)(ibv_async_event*) = nullptr;
  const char* (*event_type_str)(ibv_event_type) = nullptr;
  const char* (*wc_status_str)(ibv_wc_status) = nullptr;
  int (*fork_init)() = nullptr;
  // Optional.
  ibv_mr* (*reg_mr_iova2)(ibv_pd*, void*, size_t, uint64_t, unsigned) = nullptr;      // 1.8
  int (*query_gid_ex)(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*, uint32_t, size_t) =
      nullptr;                                                                           // 1.11
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int) = nullptr;  // 1.12

  // The port's attributes through the provider's extended entry (what the inline
  // ibv_query_port does), else the 1.1 export; 0 or an errno.
  int query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) const;
  const char* status_name(ibv_wc_status status) const;
  const char* event_name(ibv_event_type type) const;

  std::string library;  // what was loaded
  void* handle = nullptr;  // never dlclosed (verbs.cpp)
  ~Verbs();
};

// Loads `path` (ASTRAL_IBVERBS_LIB) or libibverbs.so.1. Null with `why` when the library or one
// of the required symbols is missing.
std::shared_ptr<const Verbs> load_verbs(const std::string& path, std::string* why);

}  // namespace astral::plugin::ib
