// Peer checks shared by every listener: loopback addresses, Basic and Bearer credentials.
#include <arpa/inet.h>

#include <algorithm>
#include <string>

#include "astral/facility/http_server.hpp"
#include "text_util.hpp"

namespace astral::facility {

using namespace text;  // trim, lower

bool is_loopback_address(const std::string& listen) {
  std::string host;
  try {
    host = split_listen_address(listen).first;
  } catch (...) {
    return false;
  }
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

namespace {

bool equal_constant_time(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string base64_decode(const std::string& in) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned value = 0;
  int bits = -8;
  for (char ch : in) {
    if (ch == '=') break;
    auto idx = kAlphabet.find(ch);
    if (idx == std::string::npos) return {};
    value = (value << 6) | static_cast<unsigned>(idx);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((value >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

}  // namespace

bool basic_auth_matches(const HttpRequest& request, const Credentials& expected) {
  std::string h = request.header("authorization");
  if (h.size() < 6 || lower(h.substr(0, 6)) != "basic ") return false;
  return equal_constant_time(base64_decode(trim(h.substr(6))), expected.username + ":" + expected.password);
}

bool bearer_token_matches(const HttpRequest& request, const std::string& token) {
  std::string h = request.header("authorization");
  if (token.empty() || h.size() < 7 || lower(h.substr(0, 7)) != "bearer ") return false;
  return equal_constant_time(trim(h.substr(7)), token);
}

}  // namespace astral::facility
