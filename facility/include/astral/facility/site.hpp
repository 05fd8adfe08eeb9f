#pragma once
// The site layout: which hosts sit in which rack, which cooling equipment (cooling loop, CDU)
// cools which rack, and which power equipment (feed, switchgear, PDU, power shelf) powers it.
// One JSON file (docs/facility.md "Site layout"), given as `--site FILE` or as "site" in
// sources.json; it can also be derived from Redfish where the service links rack chassis to the
// equipment (Chassis.Links.Contains / CooledBy / PoweredBy / ConnectedCoolingLoops / CoolingUnits /
// PowerDistribution). The facility uses it to label alarms with the site component and the racks
// they affect; the monitor joins facility events to hosts through the same ids.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace astral::facility {

// Equipment kinds; `fed_by` links go upstream (a CDU is fed by a cooling loop, a PDU by a feed).
// cooling: cooling_loop, cdu     power: feed, switchgear, pdu, power_shelf
bool is_cooling_kind(const std::string& kind);
bool is_power_kind(const std::string& kind);

struct SiteComponent {
  std::string id;      // unique across racks and components: "cdu-1", "loop-a", "shelf-41"
  std::string kind;    // one of the kinds above
  std::string source;  // the facility source that reports it (Redfish source name); may be empty
  std::string entity;  // entity prefix below /redfish/v1 within that source ("ThermalEquipment/CDUs/1")
  std::vector<std::string> fed_by;  // upstream component ids
  std::vector<std::string> serves;  // rack ids (merged into the racks' cooled_by / powered_by)
};

struct SiteRack {
  std::string id;
  std::vector<std::string> hosts;       // host names as the logs name them
  std::vector<std::string> cooled_by;   // cooling component ids
  std::vector<std::string> powered_by;  // power component ids
  std::optional<double> budget_w;
  std::string source, entity;           // the rack's own Redfish chassis, when it has one
};

struct SiteLayout {
  std::vector<SiteRack> racks;
  std::vector<SiteComponent> components;

  bool empty() const { return racks.empty() && components.empty(); }
  const SiteRack* rack(const std::string& id) const;
  const SiteComponent* component(const std::string& id) const;
  const SiteRack* rack_of_host(const std::string& host) const;
  // The component (or rack) a reading belongs to: same source and the longest entity prefix;
  // a component with an empty entity matches every entity of its source. nullptr when none.
  const SiteComponent* component_for(const std::string& source, const std::string& entity) const;
  // Racks that depend on a component directly or through fed_by (a loop serves its CDUs' racks).
  std::vector<std::string> racks_served_by(const std::string& component_id) const;
  // Every component a rack depends on, nearest first (its CDU, then the loop feeding it).
  std::vector<std::string> upstream_of(const std::string& rack_id) const;
};

// Parses and validates: unknown keys, duplicate ids, a host in two racks, references to unknown
// racks or components, a cooling link to power equipment (and the reverse), and cycles in fed_by.
// Throws std::runtime_error "<name>: <element>: <what is wrong>".
SiteLayout parse_site_layout(const std::string& json_text, const std::string& name_for_errors);
SiteLayout load_site_layout(const std::string& path);
std::string site_layout_to_json(const SiteLayout& layout);

// Every name in `hosts` that no rack of the layout holds (for checking a job's hosts).
std::vector<std::string> unknown_hosts(const SiteLayout& layout, const std::vector<std::string>& hosts);

// Derives a layout from Redfish resources ("/redfish/v1/..." -> JSON text) of one source: each
// Chassis of ChassisType Rack becomes a rack whose hosts are the contained chassis' (or their
// computer systems') HostName or Id; CoolingUnits / CooledBy / ConnectedCoolingLoops become
// cooling components, PowerDistribution / PoweredBy become power components. Links to other
// services keep their path as the entity. The result is validated like a parsed file.
SiteLayout site_from_redfish(const std::map<std::string, std::string>& resources, const std::string& source);
// The same from a DMTF mockup directory (<dir>/index.json is /redfish/v1).
SiteLayout site_from_redfish_mockup(const std::string& dir, const std::string& source);

}  // namespace astral::facility
