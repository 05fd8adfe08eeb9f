// NetPath -> JSON (the shape docs/trace-format.md documents for a connection's path).
#include "astral/trace/path.hpp"

#include "json_text.hpp"

namespace astral::trace {

std::string path_to_json(const NetPath& p) {
  std::string qps = "[";
  for (const NetPathQp& q : p.qps) {
    if (qps.size() > 1) qps += ',';
    json::Object o;
    o.unum("qp", q.qp).unum("flow_label", q.flow_label).unum("udp_sport", q.udp_sport);
    o.unum("dlid", q.dlid).unum("path_index", q.path_index);
    if (q.uplink_link >= 0) o.str("uplink", q.uplink).num("uplink_link", q.uplink_link);
    if (!q.device.empty()) o.str("device", q.device);
    qps += o.str();
  }
  qps += ']';
  json::Object o;
  o.str("transport", p.transport).str("link_layer", p.link_layer).str("policy", p.policy);
  o.str("source", p.source).num("port", p.port).num("plane", p.plane).num("rail", p.rail);
  o.num("sl", p.sl).num("tc", p.tc).num("gid_index", p.gid_index).raw("qps", qps);
  if (!p.note.empty()) o.str("note", p.note);
  if (p.qps_dropped) o.unum("qps_dropped", p.qps_dropped);
  return o.str();
}

}  // namespace astral::trace
