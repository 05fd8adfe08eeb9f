// `nvidia-smi -q` dumps: per GPU, the clock-event (throttle) reasons that are active and the
// temperatures beside them. Only a GPU held down for a reason that costs a job time becomes an
// event (kind gpu_clock_event): HW slowdown, HW thermal slowdown, HW power brake, SW thermal
// slowdown, SW power cap. Idle, application clocks, sync boost and display clock are routine.
//
// Layout (driver 535+ says "Clocks Event Reasons", older ones "Clocks Throttle Reasons"):
//   Timestamp                                 : Sun Dec  6 12:51:41 2026
//   GPU 00000000:18:00.0
//       Clocks Event Reasons
//           HW Slowdown                       : Active
//               HW Thermal Slowdown           : Active
//               HW Power Brake Slowdown       : Not Active
//       Temperature
//           GPU Current Temp                  : 91 C
#include <string>
#include <vector>

#include "names.hpp"
#include "structured.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

namespace {

struct SmiReason {
  sv label;  // as nvidia-smi prints it
  sv name;   // attribute spelling
  sv cause;  // thermal, power or hardware (unknown which)
  Severity severity;
};
constexpr SmiReason kSmiReasons[] = {
    {"HW Thermal Slowdown", "hw_thermal_slowdown", "thermal", Severity::error},
    {"HW Power Brake Slowdown", "hw_power_brake", "power", Severity::error},
    {"HW Slowdown", "hw_slowdown", "hardware", Severity::error},
    {"SW Thermal Slowdown", "sw_thermal_slowdown", "thermal", Severity::warning},
    {"SW Power Cap", "sw_power_cap", "power", Severity::warning},
};

struct SmiGpu {
  std::string pci;
  uint32_t line = 0;
  std::vector<const SmiReason*> active;
  std::string temperature_c, slowdown_c;
};

// "Sun Dec  6 12:51:41 2026" (ctime form, local time) -> epoch us as if UTC.
std::optional<int64_t> smi_timestamp(sv v) {
  std::vector<sv> parts;
  while (!(v = ltrim(v)).empty()) parts.push_back(take_until(v, " \t"));
  if (parts.size() != 5) return std::nullopt;
  int month = month_from_name(parts[1]);
  auto day = take_int(parts[2]);
  auto year = take_int(parts[4]);
  sv clock = parts[3];
  auto tod = take_clock(clock);
  if (!month || !day || !year || !tod || *day < 1 || *day > 31 || *year < 1970 || *year > 9999) return std::nullopt;
  return to_epoch_us(*year, unsigned(month), unsigned(*day), 0, 0, 0, 0) + *tod;
}

void emit_smi_gpu(const SmiGpu& g, int64_t time_us, bool local, const ParseOptions& options, ParseResult& out) {
  if (g.active.empty() || g.pci.empty()) return;
  const SmiReason* lead = g.active.front();
  std::string names;
  bool thermal = false, power = false;
  for (const SmiReason* r : g.active) {
    names += (names.empty() ? "" : ",") + std::string(r->name);
    thermal = thermal || r->cause == "thermal";
    power = power || r->cause == "power";
    if (r->severity > lead->severity) lead = r;
  }
  // HW Slowdown alone says only "hardware"; with a thermal or brake bit, that bit is the cause.
  const std::string causes = thermal && power ? "thermal,power" : thermal ? "thermal" : power ? "power" : "hardware";
  Event e;
  e.time_us = time_us;
  e.time_confidence_s = time_us == kUnknownTime ? 0 : 1;
  e.host = options.default_host;
  e.layer = Layer::kernel;
  e.component = {ComponentKind::gpu, options.default_host, g.pci, "", "", -1};
  e.severity = lead->severity;
  e.kind = "gpu_clock_event";
  e.message = "nvidia-smi: GPU " + g.pci + " clocks held down: " + names +
              (g.temperature_c.empty() ? "" : " at " + g.temperature_c + " C");
  e.set_attr("reasons", names);
  e.set_attr("cause", causes);
  if (!g.temperature_c.empty()) e.set_attr("temperature_c", g.temperature_c);
  if (!g.slowdown_c.empty()) e.set_attr("slowdown_c", g.slowdown_c);
  e.set_attr("source", "nvidia-smi");
  e.file = options.file_index;
  e.line = g.line;
  if (local && time_us != kUnknownTime) out.local_events.push_back(uint32_t(out.events.size()));
  out.events.push_back(std::move(e));
}

}  // namespace

void parse_nvidia_smi(sv content, const ParseOptions& options, ParseResult& out) {
  int64_t time_us = kUnknownTime;
  const bool deferred = options.defer_zone && !options.time.tz_known;
  SmiGpu gpu;
  bool in_reasons = false;
  uint32_t line_no = 0;
  for (size_t pos = 0; pos < content.size();) {
    size_t nl = content.find('\n', pos);
    sv line = content.substr(pos, nl == sv::npos ? sv::npos : nl - pos);
    pos = nl == sv::npos ? content.size() : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t indent = line.find_first_not_of(' ');
    if (indent == sv::npos) continue;
    sv body = trim(line);
    const size_t colon = body.find(':');
    sv key = trim(body.substr(0, colon == sv::npos ? body.size() : colon));
    sv value = colon == sv::npos ? sv() : trim(body.substr(colon + 1));
    if (indent == 0 && starts_with(body, "GPU ")) {
      emit_smi_gpu(gpu, time_us, deferred, options, out);
      sv bdf = trim(body.substr(4));
      if (bdf.find(':') == 8) bdf.remove_prefix(4);  // nvidia-smi's 8-digit domain (00000000:18:00.0)
      gpu = SmiGpu{names::canonical_pci(bdf), line_no, {}, {}, {}};
      in_reasons = false;
    } else if (indent == 0 && key == "Timestamp") {
      if (auto t = smi_timestamp(value))
        time_us = *t - (options.time.tz_known && !deferred ? options.time.tz_offset_s * 1000000 : 0);
    } else if (indent == 4) {
      in_reasons = key == "Clocks Event Reasons" || key == "Clocks Throttle Reasons";
    } else if (in_reasons && value == "Active") {
      for (const SmiReason& r : kSmiReasons)
        if (key == r.label) gpu.active.push_back(&r);
    } else if (key == "GPU Current Temp") {
      gpu.temperature_c = std::string(take_until(value, " "));
    } else if (key == "GPU Slowdown Temp") {
      gpu.slowdown_c = std::string(take_until(value, " "));
    }
  }
  emit_smi_gpu(gpu, time_us, deferred, options, out);
}

}  // namespace astral::monitor
