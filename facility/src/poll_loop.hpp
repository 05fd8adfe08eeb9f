#pragma once
// Many Redfish crawls on one thread. Each endpoint's crawl is ordinary blocking code (the walker
// asks for a resource and gets it); here it runs on a fiber, and a request hands its libcurl easy
// handle to one shared multi handle and lets the other fibers run until the answer is in. A site's
// 12,500 BMCs then cost one thread and one poll set, not a thread each waiting in poll().
//
// Outside run_on_fibers, perform() and pause_for() simply block, so the same HttpClient and
// HttpFetcher serve the one-endpoint reader and the thread-pool poller unchanged.
#include <curl/curl.h>

#include <chrono>
#include <cstddef>
#include <functional>

namespace astral::facility::detail {

// Runs `fibers` fibers on the calling thread; each calls work() until it returns false (several
// loops on several threads may share one work source). work must not throw (what escapes is
// dropped). Throws std::runtime_error when the fibers' stacks cannot be set up; nothing has run
// then.
void run_on_fibers(std::size_t fibers, const std::function<bool()>& work);

// curl_easy_perform, or on a fiber the same through the loop's multi handle.
CURLcode perform(CURL* curl);

// std::this_thread::sleep_for, or on a fiber a wait that lets the other fibers run.
void pause_for(std::chrono::milliseconds wait);

}  // namespace astral::facility::detail
