// Push subscriptions for every Redfish source of `astral facility serve`: created at start,
// received on our listener, deleted at exit.
#include <cctype>

#include <fmt/format.h>

#include "astral/facility/eventservice.hpp"

namespace astral::facility {

namespace {

// A path segment from a source name: letters, digits, '.', '-' and '_' only.
std::string path_safe(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  return out.empty() ? "source" : out;
}

}  // namespace

PushSubscriptions::PushSubscriptions(std::vector<RedfishEndpoint> endpoints, AlarmSink sink, EventStreamOptions options)
    : options_(options) {
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    Entry e;
    e.endpoint = std::move(endpoints[i]);
    e.secret = new_subscription_secret();
    e.context = "astral-" + e.endpoint.name;
    std::string path = fmt::format("/redfish-events/{}-{}", i, path_safe(e.endpoint.name));
    e.receiver = std::make_unique<PushReceiver>(path, e.secret, e.context, e.endpoint.name, sink, &dedupe_);
    entries_.push_back(std::move(e));
  }
}

PushSubscriptions::~PushSubscriptions() { close(); }

std::vector<std::string> PushSubscriptions::subscribe(const std::string& listener_url) {
  std::vector<std::string> errors;
  for (auto& e : entries_) {
    try {
      PushSubscription sub = subscribe_push(e.endpoint, listener_url + e.receiver->path(), e.secret, e.context, options_);
      if (sub.uri.empty()) {
        errors.push_back(fmt::format("{}: the service accepted the event subscription but did not say where it is "
                                     "(no Location); it will not be removed at exit", e.endpoint.name));
      }
      std::lock_guard<std::mutex> lock(mu_);
      e.subscription = sub;
    } catch (const std::exception& ex) {
      errors.push_back(ex.what());
    }
  }
  return errors;
}

void PushSubscriptions::close() {
  for (auto& e : entries_) {
    PushSubscription sub;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::swap(sub, e.subscription);
    }
    if (sub.uri.empty()) continue;
    try {
      unsubscribe_push(e.endpoint, sub, options_);
    } catch (const std::exception&) {
      // The service is gone; its subscription goes with it (or expires there).
    }
  }
}

HttpResponse PushSubscriptions::handle(const HttpRequest& request) {
  for (auto& e : entries_)
    if (request.path == e.receiver->path()) return e.receiver->handle(request);
  return HttpResponse{404, "text/plain", {}, "not found\n"};
}

std::size_t PushSubscriptions::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t n = 0;
  for (const auto& e : entries_) n += !e.subscription.uri.empty();
  return n;
}

}  // namespace astral::facility
