// collcomm/transport/ibverbs/api.hpp — the InfiniBand verbs calls net<ibverbs> makes, as one table
// of function pointers, and the loader that fills it from libibverbs at run time.
//
// net<ibverbs> never links libibverbs: `load_verbs()` opens "libibverbs.so.1" with dlopen and
// resolves each call with dlvsym at the symbol version rdma-core exports it under. A program built
// with net<ibverbs> therefore starts on a machine without rdma-core and gets a collcomm error when
// it asks for the transport, and a test can hand the backend a table of its own (an in-process
// RC double: tests/verbs/verbs_double.hpp).
//
// Building needs the libibverbs-dev headers (<infiniband/verbs.h>, Debian/Ubuntu: `apt-get install
// libibverbs-dev`, RHEL: `rdma-core-devel`) for the types only; linking needs ${CMAKE_DL_LIBS}.
//
// Three calls are not exported by libibverbs: ibv_post_send, ibv_post_recv and ibv_poll_cq are
// static inline in verbs.h and call the provider through `ctx->ops`. The table holds functions of
// the same signatures; the loader fills them with wrappers of the inline ones. ibv_reg_mr and
// ibv_query_port are macros in rdma-core ≥ 1.8 (44 here): the table holds the exported
// `ibv_reg_mr_iova2` (IBVERBS_1.8) and a wrapper that does what the ibv_query_port macro does.
//
// This folder (transport/ibverbs/): the verbs table and loader (api.hpp) and the RC connection of
// net<ibverbs> (connection.hpp). It includes error.hpp, config.hpp, <infiniband/verbs.h>, <dlfcn.h>
// and, for the types of one CUDA driver call, <cuda.h>; never an executor or kernels/.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <infiniband/verbs.h>

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

COLLCOMM_NAMESPACE_BEGIN
namespace transport {

// Every verbs call of net<ibverbs>. Each member has the signature of the verbs function it names
// (reg_mr_iova2 that of ibv_reg_mr_iova2); all are non-null in a table load_verbs() returns.
struct verbs_api {
  ibv_device** (*get_device_list)(int* num_devices) = nullptr;
  void (*free_device_list)(ibv_device** list) = nullptr;
  const char* (*get_device_name)(ibv_device* device) = nullptr;
  ibv_context* (*open_device)(ibv_device* device) = nullptr;
  int (*close_device)(ibv_context* context) = nullptr;
  int (*query_device)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  int (*query_port)(ibv_context* context, std::uint8_t port_num, ibv_port_attr* attr) = nullptr;
  int (*query_gid)(ibv_context* context, std::uint8_t port_num, int index, ibv_gid* gid) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context* context) = nullptr;
  int (*dealloc_pd)(ibv_pd* pd) = nullptr;
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                       int comp_vector) = nullptr;
  int (*destroy_cq)(ibv_cq* cq) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*destroy_qp)(ibv_qp* qp) = nullptr;
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) = nullptr;
  ibv_mr* (*reg_mr_iova2)(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova,
                          unsigned int access) = nullptr;
  // Absent (null) where the library predates dmabuf (rdma-core < 34): GPU memory then falls back.
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, std::uint64_t offset, std::size_t length, std::uint64_t iova,
                           int fd, int access) = nullptr;
  int (*dereg_mr)(ibv_mr* mr) = nullptr;
  int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) = nullptr;
  int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) = nullptr;
  int (*poll_cq)(ibv_cq* cq, int num_entries, ibv_wc* wc) = nullptr;
  const char* (*wc_status_str)(ibv_wc_status status) = nullptr;

  // Registers host memory the way the ibv_reg_mr macro does for constant access flags.
  ibv_mr* reg_mr(ibv_pd* pd, void* addr, std::size_t length, unsigned int access) const {
    return reg_mr_iova2(pd, addr, length, reinterpret_cast<std::uintptr_t>(addr), access);
  }
};

namespace ibverbs_detail {

// The exported ibv_query_port: it fills the pre-1.8 layout of ibv_port_attr (a prefix of today's).
using compat_query_port_fn = int (*)(ibv_context*, std::uint8_t, _compat_ibv_port_attr*);
inline compat_query_port_fn compat_query_port = nullptr;

inline int real_query_port(ibv_context* context, std::uint8_t port_num, ibv_port_attr* attr) {
  // What verbs.h's ___ibv_query_port does: the provider's extended query where it has one.
  verbs_context* vctx = verbs_get_ctx(context);
  if (vctx != nullptr &&
      vctx->sz >= sizeof(*vctx) - offsetof(verbs_context, query_port) && vctx->query_port != nullptr)
    return vctx->query_port(context, port_num, attr, sizeof(*attr));
  std::memset(attr, 0, sizeof(*attr));
  return compat_query_port(context, port_num, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}
inline int real_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  return qp->context->ops.post_send(qp, wr, bad_wr);
}
inline int real_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return qp->context->ops.post_recv(qp, wr, bad_wr);
}
inline int real_poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  return cq->context->ops.poll_cq(cq, num_entries, wc);
}

template <class Fn>
void resolve(void* lib, Fn& slot, const char* name, const char* version, bool required) {
  void* sym = dlvsym(lib, name, version);
  if (sym == nullptr) sym = dlsym(lib, name);
  if (sym == nullptr && required)
    detail::fail(errc::system, "net<ibverbs>", no_rank,
                 std::string("libibverbs.so.1 has no symbol ") + name + "@" + version +
                     " (an rdma-core older than net<ibverbs> supports?)");
  slot = reinterpret_cast<Fn>(sym);
}

inline verbs_api load_real_verbs() {
  // Kept open for the life of the process: providers and MRs outlive any one connection.
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    detail::fail(errc::system, "net<ibverbs>", no_rank,
                 std::string("libibverbs.so.1 was not found (") + (why != nullptr ? why : "dlopen failed") +
                     "); net<ibverbs> needs rdma-core's libibverbs: install it with "
                     "`apt-get install libibverbs1 ibverbs-providers` (Debian/Ubuntu) or "
                     "`dnf install rdma-core libibverbs` (RHEL), or use net<socket>");
  }
  verbs_api api;
  resolve(lib, api.get_device_list, "ibv_get_device_list", "IBVERBS_1.1", true);
  resolve(lib, api.free_device_list, "ibv_free_device_list", "IBVERBS_1.1", true);
  resolve(lib, api.get_device_name, "ibv_get_device_name", "IBVERBS_1.1", true);
  resolve(lib, api.open_device, "ibv_open_device", "IBVERBS_1.1", true);
  resolve(lib, api.close_device, "ibv_close_device", "IBVERBS_1.1", true);
  resolve(lib, api.query_device, "ibv_query_device", "IBVERBS_1.1", true);
  resolve(lib, compat_query_port, "ibv_query_port", "IBVERBS_1.1", true);
  api.query_port = &real_query_port;
  resolve(lib, api.query_gid, "ibv_query_gid", "IBVERBS_1.1", true);
  resolve(lib, api.alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1", true);
  resolve(lib, api.dealloc_pd, "ibv_dealloc_pd", "IBVERBS_1.1", true);
  resolve(lib, api.create_cq, "ibv_create_cq", "IBVERBS_1.1", true);
  resolve(lib, api.destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1", true);
  resolve(lib, api.create_qp, "ibv_create_qp", "IBVERBS_1.1", true);
  resolve(lib, api.destroy_qp, "ibv_destroy_qp", "IBVERBS_1.1", true);
  resolve(lib, api.modify_qp, "ibv_modify_qp", "IBVERBS_1.1", true);
  resolve(lib, api.reg_mr_iova2, "ibv_reg_mr_iova2", "IBVERBS_1.8", true);
  resolve(lib, api.reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", false);
  resolve(lib, api.dereg_mr, "ibv_dereg_mr", "IBVERBS_1.1", true);
  resolve(lib, api.wc_status_str, "ibv_wc_status_str", "IBVERBS_1.1", true);
  api.post_send = &real_post_send;
  api.post_recv = &real_post_recv;
  api.poll_cq = &real_poll_cq;
  return api;
}

}  // namespace ibverbs_detail

// The verbs table of the real libibverbs, loaded on first use and kept for the process. Throws
// collcomm::error (errc::system) saying how to install rdma-core where libibverbs.so.1 is absent;
// a later call tries again.
inline const verbs_api& load_verbs() {
  static const verbs_api api = ibverbs_detail::load_real_verbs();
  return api;
}

}  // namespace transport
COLLCOMM_NAMESPACE_END
