// A reader with the rules of NCCL's hand-written XML parser (src/graph/xml.cc): what it rejects we
// reject, with the line, so a topology file is proven loadable before a job depends on it.
#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>

#include "astral/topo/nccl_xml.hpp"

namespace astral::topo {
namespace {

constexpr size_t kMaxStringLength = 255;  // NCCL's MAX_STR_LEN
constexpr size_t kMaxAttributes = 16;     // MAX_ATTR_COUNT
constexpr size_t kMaxChildren = 640;      // MAX_SUBS
constexpr size_t kMaxNodes = 4096;        // bounded node count

// NCCL's kvDictPciGen keys, matched as prefixes; anything else silently becomes Gen3.
constexpr std::array<std::string_view, 11> kNcclSpeeds = {
    "2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s", "32 GT/s", "2.5 GT/s PCIe", "5.0 GT/s PCIe",
    "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe"};

const std::set<std::string, std::less<>> kElements = {"system", "cpu",  "pci", "pcilink", "gpu",
                                                      "nvlink", "c2c",  "nic", "net",     "nvs"};
const std::map<std::string, std::set<std::string>, std::less<>> kParents = {
    {"cpu", {"system"}}, {"pci", {"cpu", "pci"}}, {"pcilink", {"pci"}}, {"gpu", {"pci"}},
    {"nvlink", {"gpu"}}, {"c2c", {"gpu"}},        {"nic", {"pci", "cpu"}}, {"net", {"nic"}},
    {"nvs", {"system"}}};

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  NcclXmlElement parse() {
    skip_space_and_comments();
    if (peek() == '<' && peek(1) == '?')
      fail("XML declaration '<?...?>' is not accepted by NCCL's parser (it reads it as an element)");
    NcclXmlElement root = element();
    skip_space_and_comments();
    if (pos_ < s_.size()) fail("content after the root element");
    if (root.name != "system") fail(fmt::format("root element is <{}>, expected <system>", root.name), root.line);
    if (!root.attribute("version")) fail("<system> has no version attribute", root.line);
    validate(root, "");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what, int line = 0) const {
    throw TopologyError(fmt::format("{}:{}: {}", source_, line ? line : line_, what));
  }
  char peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  char get() {
    if (pos_ >= s_.size()) fail("unexpected end of file");
    char c = s_[pos_++];
    if (c == '\n') ++line_;
    return c;
  }

  void skip_space_and_comments() {
    for (;;) {
      char c = peek();
      if (c == ' ' || c == '\n' || c == '\r') {
        get();
      } else if (c == '\t') {
        fail("tab character: NCCL skips only spaces and newlines between tags");
      } else if (s_.substr(pos_, 4) == "<!--") {
        auto end = s_.find("-->", pos_ + 4);
        if (end == std::string_view::npos) fail("unterminated comment");
        while (pos_ < end + 3) get();
      } else {
        return;
      }
    }
  }

  std::string name_token() {
    std::string name;
    while (pos_ < s_.size()) {
      char c = peek();
      if (c == ' ' || c == '>' || c == '/' || c == '\n' || c == '=' || c == '\r') break;
      if (c == '\t') fail("tab character inside a tag");
      name += get();
    }
    if (name.empty()) fail("empty element or attribute name");
    if (name.size() > kMaxStringLength) fail("name longer than 255 characters");
    return name;
  }

  NcclXmlElement element() {
    if (get() != '<') fail("expected '<'");
    NcclXmlElement e;
    e.line = line_;
    e.name = name_token();
    if (!kElements.count(e.name)) fail(fmt::format("unknown element <{}>", e.name));
    for (;;) {
      while (peek() == ' ') get();
      char c = peek();
      if (c == '\n' || c == '\r') fail(fmt::format("<{}> spans lines: NCCL needs a tag on one line", e.name));
      if (c == '\t') fail("tab character inside a tag");
      if (c == '>') {
        get();
        break;
      }
      if (c == '/') {
        get();
        if (get() != '>') fail("expected '>' after '/'");
        return e;
      }
      std::string key = name_token();
      if (get() != '=') fail(fmt::format("attribute {} has no value", key));
      char quote = get();
      if (quote != '"' && quote != '\'') fail(fmt::format("value of {} is not quoted", key));
      std::string value;
      for (char v; (v = get()) != quote;) {
        if (v == '\n') fail(fmt::format("value of {} spans lines", key));
        value += v;
      }
      if (value.size() > kMaxStringLength) fail(fmt::format("value of {} is longer than 255 characters", key));
      if (value.find('&') != std::string::npos)
        fail(fmt::format("value of {} has '&': NCCL does not decode entities", key));
      if (e.attributes.size() == kMaxAttributes)
        fail(fmt::format("<{}> has more than 16 attributes (NCCL ignores the rest)", e.name));
      e.attributes.emplace_back(std::move(key), std::move(value));
    }
    for (;;) {
      skip_space_and_comments();
      if (peek() == '<' && peek(1) == '/') {
        get(), get();
        std::string closing = name_token();
        if (closing != e.name) fail(fmt::format("</{}> closes <{}> opened on line {}", closing, e.name, e.line));
        while (peek() == ' ') get();
        if (get() != '>') fail("expected '>'");
        return e;
      }
      if (pos_ >= s_.size()) fail(fmt::format("unexpected end of file: <{}> from line {} is not closed", e.name, e.line));
      if (peek() != '<') fail(fmt::format("text inside <{}>: NCCL expects only elements", e.name));
      if (++nodes_ > kMaxNodes) fail("more than 4096 elements");
      e.children.push_back(element());
      if (e.children.size() > kMaxChildren) fail(fmt::format("<{}> has more than 640 children", e.name));
    }
  }

  void validate(const NcclXmlElement& e, const std::string& parent) const {
    if (auto it = kParents.find(e.name); it != kParents.end() && !it->second.count(parent))
      fail(fmt::format("<{}> inside <{}>", e.name, parent.empty() ? "nothing" : parent), e.line);
    if (e.name == "pci") {
      const std::string* busid = e.attribute("busid");
      if (!busid) fail("<pci> without busid", e.line);
      auto addr = PciAddress::parse(*busid);
      bool canonical = addr && addr->to_string() == *busid;
      if (!canonical)
        fail(fmt::format("busid \"{}\" is not lower-case dddd:bb:dd.f (NCCL compares it with sysfs names)", *busid),
             e.line);
      if (const std::string* cls = e.attribute("class"); cls && (cls->rfind("0x", 0) != 0 || cls->size() < 4))
        fail(fmt::format("class \"{}\" is not a 0x-prefixed PCI class", *cls), e.line);
      if (const std::string* speed = e.attribute("link_speed"); speed && !speed->empty()) {
        bool known = std::any_of(kNcclSpeeds.begin(), kNcclSpeeds.end(),
                                 [&](std::string_view k) { return speed->rfind(k, 0) == 0; });
        if (!known) fail(fmt::format("link_speed \"{}\" is unknown to NCCL (it would assume 8 GT/s)", *speed), e.line);
      }
      if (const std::string* width = e.attribute("link_width");
          width && (width->empty() || !std::all_of(width->begin(), width->end(), ::isdigit)))
        fail(fmt::format("link_width \"{}\" is not an integer", *width), e.line);
    }
    for (const auto& c : e.children) validate(c, e.name);
  }

  std::string_view s_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t nodes_ = 1;
};

struct Placement {
  std::vector<const NcclXmlElement*> switches;  // enclosing <pci> elements, outermost first
  int cpu = -1;
};

void index_pci(const NcclXmlElement& e, Placement here, std::map<PciAddress, Placement>& out, int& cpu_counter) {
  for (const auto& c : e.children) {
    Placement p = here;
    if (c.name == "cpu") p.cpu = cpu_counter++;
    if (c.name == "pci") {
      if (auto addr = PciAddress::parse(*c.attribute("busid"))) out[*addr] = p;
      p.switches.push_back(&c);
    }
    index_pci(c, p, out, cpu_counter);
  }
}

std::string_view xml_class(const Placement& a, const Placement& b) {
  if (a.cpu != b.cpu) return "SYS";
  if (!a.switches.empty() && !b.switches.empty() && a.switches.back() == b.switches.back()) return "PIX";
  for (auto* s : a.switches)
    if (std::find(b.switches.begin(), b.switches.end(), s) != b.switches.end()) return "PXB";
  return "PHB/NODE";
}

std::string_view expected_class(PathClass c) {
  switch (c) {
    case PathClass::PIX: return "PIX";
    case PathClass::PXB: return "PXB";
    case PathClass::SYS: return "SYS";
    default: return "PHB/NODE";
  }
}

}  // namespace

const std::string* NcclXmlElement::attribute(std::string_view key) const {
  for (const auto& [k, v] : attributes)
    if (k == key) return &v;
  return nullptr;
}

NcclXmlElement parse_nccl_topology(std::string_view text, const std::string& source) {
  return Parser(text, source).parse();
}

std::vector<std::string> check_nccl_pairing(const Node& node, const NcclXmlElement& system) {
  std::map<PciAddress, Placement> where;
  int cpus = 0;
  index_pci(system, {}, where, cpus);
  std::vector<std::string> problems;
  auto find = [&](const PciFunction& f, const std::string& what) -> const Placement* {
    auto it = where.find(f.address);
    if (it == where.end()) {
      problems.push_back(fmt::format("{} {} is missing from the NCCL topology", what, f.address.to_string()));
      return nullptr;
    }
    return &it->second;
  };
  for (const auto& n : node.nics) find(n.pci, "NIC " + n.name);
  for (const auto& g : node.gpus) {
    const Placement* pg = find(g.pci, fmt::format("GPU {}", g.index));
    if (!pg) continue;
    for (int n : g.nics) {
      const auto& nic = node.nics[size_t(n)];
      auto it = where.find(nic.pci.address);
      if (it == where.end()) continue;
      auto want = expected_class(node.gpu_nic[size_t(g.index)][size_t(n)]);
      auto got = xml_class(*pg, it->second);
      if (want != got)
        problems.push_back(fmt::format("GPU {} ({}) and its rail NIC {} are {} in the node but {} in the NCCL topology",
                                       g.index, g.pci.address.to_string(), nic.name, want, got));
    }
  }
  return problems;
}

}  // namespace astral::topo
