// The plugin's one error convention (core/guard.hpp): the net, tuner and profiler cores' entry
// points are noexcept and return ncclResult_t, and what may throw inside them is mapped by
// guarded(). The static_asserts fail the build if an entry point loses noexcept or its result.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <new>
#include <string_view>
#include <stdexcept>
#include <type_traits>

#include "core/guard.hpp"
#include "core/net.hpp"
#include "profiler/profiler.hpp"
#include "tuner/tuner.hpp"

// Arguments of the right types for the unevaluated calls below (external linkage, so that no
// compiler calls them unneeded internal declarations).
namespace error_convention_args {
inline void* p = nullptr;
inline void** pp = nullptr;
inline int* ip = nullptr;
inline const size_t* csz = nullptr;
inline const int* cip = nullptr;
inline size_t* sz = nullptr;
inline float* fp = nullptr;
inline astral::plugin::net::DeviceProperties* props = nullptr;
}  // namespace error_convention_args

namespace {
using namespace astral::plugin;
using namespace error_convention_args;

#define ASSERT_ENTRY(fn, ...)                                                              \
  static_assert(noexcept(fn(__VA_ARGS__)), #fn " must be noexcept (core/guard.hpp)");      \
  static_assert(std::is_same_v<decltype(fn(__VA_ARGS__)), ncclResult_t>, #fn " must return ncclResult_t")


ASSERT_ENTRY(net::init, pp, 0, -1, nullptr, nullptr);
ASSERT_ENTRY(net::finalize, p);
ASSERT_ENTRY(net::devices, ip);
ASSERT_ENTRY(net::get_properties, 0, props);
ASSERT_ENTRY(net::set_net_attr, p, net::NetAttr{});
ASSERT_ENTRY(net::listen, p, 0, p, pp);
ASSERT_ENTRY(net::connect, p, 0, p, -1, pp);
ASSERT_ENTRY(net::accept, p, pp);
ASSERT_ENTRY(net::reg_mr, p, net::MemoryRegion{}, pp);
ASSERT_ENTRY(net::dereg_mr, p, p);
ASSERT_ENTRY(net::isend, p, p, 0, 0, p, p, pp);
ASSERT_ENTRY(net::irecv, p, 1, pp, csz, cip, pp, pp, pp);
ASSERT_ENTRY(net::iflush, p, 1, pp, cip, pp, pp);
ASSERT_ENTRY(net::test, p, ip, ip);
ASSERT_ENTRY(net::close_send, p);
ASSERT_ENTRY(net::close_recv, p);
ASSERT_ENTRY(net::close_listen, p);
ASSERT_ENTRY(tuner::fill_cost_table, nullptr, 0, 0, 1, fp, 1, 1);
ASSERT_ENTRY(tuner::choose, nullptr, 0, 0, false, 1, ip, ip);
ASSERT_ENTRY(tuner::chunk_size, nullptr, 0, 0, 0, 0, 1, sz);
ASSERT_ENTRY(profiler::init, pp, ip, nullptr);
ASSERT_ENTRY(profiler::stop_event, p);
ASSERT_ENTRY(profiler::finalize, p);

}  // namespace

TEST_CASE("guarded maps what a core call throws to an ncclResult_t", "[plugin][errors]") {
  CHECK(guarded("t", [] { return ncclSuccess; }) == ncclSuccess);
  CHECK(guarded("t", [] { return ncclRemoteError; }) == ncclRemoteError);
  // ncclInProgress belongs to NCCL's public API; a net plugin must never return it.
  CHECK(guarded("t", [] { return ncclInProgress; }) == ncclInternalError);
  CHECK(guarded("t", []() -> ncclResult_t { throw std::bad_alloc(); }) == ncclSystemError);
  CHECK(guarded("t", []() -> ncclResult_t { throw std::runtime_error("boom"); }) == ncclInternalError);
  CHECK(guarded("t", []() -> ncclResult_t { throw 42; }) == ncclInternalError);
}

TEST_CASE("the tuner core reports input it does not model, and a disabled tuner has no opinion",
          "[plugin][errors][tuner]") {
  size_t chunk = 4096;
  CHECK(tuner::chunk_size(nullptr, 0, 0, 0, 0, 1, &chunk) == ncclSuccess);  // disabled context
  CHECK(chunk == 4096);

  tuner::InitArgs args;
  args.n_ranks = 16;
  args.n_nodes = 2;
  tuner::Context* ctx = tuner::init(args, [](const char* name) -> const char* {
    return std::string_view(name) == "ASTRAL_TUNER_HOST" ? "off" : nullptr;
  });
  REQUIRE(ctx);
  CHECK(tuner::chunk_size(ctx, 0, 0, 0, 2, 1, &chunk) == ncclInvalidArgument);  // 0 bytes
  CHECK(tuner::chunk_size(ctx, 0, 1 << 20, 99, 2, 1, &chunk) == ncclInvalidArgument);
  CHECK(chunk == 4096);  // NCCL's value stands
  CHECK(tuner::chunk_size(ctx, 0, 1 << 20, 1, 2, 4, nullptr) == ncclInvalidArgument);
  CHECK(tuner::choose(ctx, 0, 1 << 20, false, 1, nullptr, nullptr) == ncclInvalidArgument);
  CHECK(tuner::fill_cost_table(ctx, -1, 1 << 20, 1, nullptr, 7, 3) == ncclInvalidArgument);
  tuner::finalize(ctx);
}
