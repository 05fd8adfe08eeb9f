#include "core/host_view.hpp"

#include <algorithm>

#include "astral/topo/node.hpp"
#include "astral/topo/sysfs.hpp"

namespace astral::plugin {

bool HostView::rdma_usable() const {
  return std::any_of(rdma_ports_.begin(), rdma_ports_.end(), [](const RdmaPort& p) { return p.active; });
}

std::shared_ptr<const topo::Node> HostView::node(std::string* why) const {
  std::lock_guard lock(node_mutex_);
  if (!node_tried_) {
    node_tried_ = true;
    try {
      node_ = std::make_shared<const topo::Node>(topo::discover_live());
    } catch (const std::exception& e) {
      why_no_node_ = e.what();
    }
  }
  if (!node_ && why) *why = why_no_node_;
  return node_;
}

std::shared_ptr<const HostView> HostView::from(std::vector<RdmaPort> ports,
                                               std::shared_ptr<const topo::Node> node) {
  auto view = std::make_shared<HostView>();
  view->rdma_ports_ = std::move(ports);
  view->node_ = std::move(node);
  view->node_tried_ = true;
  if (!view->node_) view->why_no_node_ = "no node model given";
  return view;
}

std::shared_ptr<const HostView> discover_host_view() {
  auto view = std::make_shared<HostView>();
  topo::sysfs::Root root("/");
  auto devices = topo::sysfs::read_ib_devices(root);
  if (!devices.empty()) {
    // Rails need the node model; without RDMA NICs nothing asks for it until the tuner does.
    std::string why;
    auto node = view->node(&why);
    view->rdma_ports_ = rdma_ports_from(root, devices, node.get());
    if (!node) view->why_no_rails_ = why;
  }
  return view;
}

std::shared_ptr<const HostView> host_view() {
  // Function-local: built on first use, released when the library is unloaded.
  static std::mutex mutex;
  static std::shared_ptr<const HostView> view;
  std::lock_guard lock(mutex);
  if (!view) view = discover_host_view();
  return view;
}

}  // namespace astral::plugin
