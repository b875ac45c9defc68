#include "tools/isa.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <iomanip>
#include <map>
#include <memory>
#include <regex>
#include <sstream>

namespace kgate::isa {

namespace {

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

KernelReport* find(std::vector<KernelReport>& ks, const std::string& name) {
  for (auto& k : ks)
    if (k.kernel == name) return &k;
  return nullptr;
}

std::string demangled(const std::string& mangled);

// The report of kernel `name`, added when it is new.
KernelReport* find_or_add(std::vector<KernelReport>& ks, const std::string& name) {
  if (KernelReport* k = find(ks, name)) return k;
  ks.push_back({});
  ks.back().kernel = name;
  ks.back().pretty = demangled(name);
  return &ks.back();
}

std::string demangled(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> p(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && p ? std::string(p.get()) : mangled;
}

}  // namespace

std::string demangle(const std::string& mangled) { return demangled(mangled); }

std::vector<KernelReport> parse_gfx942_remarks(const std::string& remarks) {
  static const std::regex fn(R"(remark: Function Name: (\S+) \[)");
  static const std::regex kv(R"(remark: +([^:\[]+?)(?: \[[^\]]*\])?: (\S+) \[-Rpass)");
  std::vector<KernelReport> ks;
  KernelReport* cur = nullptr;
  for (const auto& l : lines(remarks)) {
    std::smatch m;
    if (std::regex_search(l, m, fn)) {
      cur = find_or_add(ks, m[1]);
    } else if (cur && std::regex_search(l, m, kv)) {
      const std::string key = m[1], v = m[2];
      const auto num = [&] { return std::strtol(v.c_str(), nullptr, 10); };
      if (key == "VGPRs") cur->vgpr = num();
      else if (key == "AGPRs") cur->agpr = num();
      else if (key == "SGPRs") cur->sgpr = num();
      else if (key == "ScratchSize") cur->scratch = num();
      else if (key == "VGPRs Spill") cur->vgpr_spill = num();
      else if (key == "SGPRs Spill") cur->sgpr_spill = num();
      else if (key == "LDS Size") cur->lds = num();
      else if (key == "Occupancy") cur->occupancy = num();
      else if (key == "Dynamic Stack") cur->dynamic_stack = v != "False";
    }
  }
  return ks;
}

bool is_gfx942_float_atomic(const std::string& m) {
  // Global/buffer/flat atomics with a floating-point type (add, min, max,
  // packed add on f16/bf16 pairs) and the LDS forms (ds_add_f32,
  // ds_add_rtn_f64, ds_pk_add_bf16, ds_min_f32, ...).
  static const std::regex re(
      R"(^((global|buffer|flat)_atomic_(pk_)?(add|min|max|fmin|fmax)(_x2)?_(f32|f64|f16|bf16)|ds_(pk_)?(add|min|max|sub)(_rtn)?_(f32|f64|f16|bf16))$)");
  return std::regex_match(m, re);
}

void scan_gfx942_isa(const std::string& isa, std::vector<KernelReport>& ks) {
  static const std::regex label(R"(^([A-Za-z_.$][\w.$]*):)");
  KernelReport* cur = nullptr;
  for (const auto& l : lines(isa)) {
    std::smatch m;
    if (std::regex_search(l, m, label)) {
      const std::string name = m[1];
      if (KernelReport* k = find(ks, name)) cur = k;
      else if (name.rfind(".Lfunc_end", 0) == 0) cur = nullptr;
      continue;
    }
    if (!cur) continue;
    std::istringstream in(l);
    std::string mnemonic;
    in >> mnemonic;
    if (mnemonic.empty() || mnemonic[0] == '.' || mnemonic[0] == ';') continue;
    if (mnemonic.rfind("v_mfma_", 0) == 0 || mnemonic.rfind("v_smfmac_", 0) == 0) cur->matrix_ops.insert(mnemonic);
    if (is_gfx942_float_atomic(mnemonic)) {
      std::string instr = l;
      instr.erase(0, instr.find_first_not_of(" \t"));
      cur->float_atomics.push_back(instr);
    }
  }
}

std::vector<KernelReport> parse_ptxas(const std::string& ptxas) {
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex props(R"(Function properties for (\S+))");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::vector<KernelReport> ks;
  KernelReport* cur = nullptr;
  for (const auto& l : lines(ptxas)) {
    std::smatch m;
    if (std::regex_search(l, m, entry)) {
      cur = find_or_add(ks, m[1]);
      continue;
    }
    if (std::regex_search(l, m, props)) {
      cur = find(ks, m[1]);  // nullptr: properties of a non-entry function
      continue;
    }
    if (!cur) continue;
    if (std::regex_search(l, m, frame)) {
      cur->scratch = std::stol(m[1]);
      cur->vgpr_spill = std::stol(m[2]);
      cur->sgpr_spill = std::stol(m[3]);  // spill loads
    }
    if (std::regex_search(l, m, used)) cur->vgpr = std::stol(m[1]);
    if (std::regex_search(l, m, smem)) cur->lds = std::stol(m[1]);
  }
  return ks;
}

bool is_ptx_float_atomic(const std::string& instr) {
  // atom / red with any qualifiers and a floating-point type:
  // atom.global.add.f32, red.global.add.noftz.bf16x2, atom.shared.add.f64, ...
  static const std::regex re(R"((^|[\s{;])(atom|red)(\.\w+)*\.(f16|f16x2|bf16|bf16x2|f32|f64)\b)");
  return std::regex_search(instr, re);
}

void scan_ptx(const std::string& ptx, std::vector<KernelReport>& ks) {
  static const std::regex entry(R"(\.entry\s+([A-Za-z_$][\w$]*))");
  static const std::regex func(R"(\.func\b)");
  KernelReport* cur = nullptr;
  for (const auto& l : lines(ptx)) {
    std::smatch m;
    if (std::regex_search(l, m, entry)) {
      cur = find_or_add(ks, m[1]);
      continue;
    }
    if (std::regex_search(l, func)) {
      cur = nullptr;
      continue;
    }
    if (!cur) continue;
    std::string instr = l;
    instr.erase(0, instr.find_first_not_of(" \t"));
    if (instr.rfind("mma.", 0) == 0 || instr.rfind("wgmma.", 0) == 0)
      cur->matrix_ops.insert(instr.substr(0, instr.find_first_of(" \t")));
    if (is_ptx_float_atomic(instr)) cur->float_atomics.push_back(instr);
  }
}

bool is_fatal(const Finding& f, const std::string& target) {
  return target != "cuda" || (f.check != "scratch" && f.check != "spills");
}

bool is_production_source(const std::string& path) {
  return path.find("/kernels/runtime/") == std::string::npos && path.find("/kernels/conformance/") == std::string::npos;
}

bool is_reference_source(const std::string& path) { return path.find("/reference/") != std::string::npos; }

std::vector<Finding> check(const std::vector<KernelReport>& ks, bool production, bool reference) {
  std::vector<Finding> f;
  for (const auto& k : ks) {
    if (production)
      for (const auto& a : k.float_atomics)
      f.push_back({k.pretty, "float-atomic", k.pretty + ": floating-point atomic instruction '" + a + "'"});
    if (k.scratch != 0)
      f.push_back({k.pretty, "scratch", k.pretty + ": uses " + std::to_string(k.scratch) + " bytes of scratch per lane"});
    if (k.vgpr_spill != 0 || (k.sgpr_spill != 0 && !reference))
      f.push_back({k.pretty, "spills",
                   k.pretty + ": spills (" + std::to_string(k.vgpr_spill) + " / " + std::to_string(k.sgpr_spill) + ")"});
    if (k.dynamic_stack) f.push_back({k.pretty, "dynamic-stack", k.pretty + ": dynamic stack"});
    if (k.lds > kMaxLds)
      f.push_back({k.pretty, "lds", k.pretty + ": static LDS " + std::to_string(k.lds) + " bytes > " + std::to_string(kMaxLds)});
  }
  return f;
}

std::string table(const std::string& title, const std::vector<KernelReport>& ks) {
  std::ostringstream o;
  o << title << "\n"
    << "  " << std::right << std::setw(5) << "VGPR" << std::setw(6) << "AGPR" << std::setw(6) << "SGPR" << std::setw(9)
    << "scratch" << std::setw(12) << "spills" << std::setw(8) << "LDS[B]" << std::setw(6) << "occ" << std::setw(8)
    << "fatom" << "  matrix ops / kernel\n";
  auto n = [](long v) { return v < 0 ? std::string("-") : std::to_string(v); };
  for (const auto& k : ks) {
    std::string mm;
    for (const auto& m : k.matrix_ops) mm += (mm.empty() ? "" : ",") + m;
    o << "  " << std::setw(5) << n(k.vgpr) << std::setw(6) << n(k.agpr) << std::setw(6) << n(k.sgpr) << std::setw(9)
      << k.scratch << std::setw(12) << (std::to_string(k.vgpr_spill) + "/" + std::to_string(k.sgpr_spill)) << std::setw(8)
      << k.lds << std::setw(6) << n(k.occupancy) << std::setw(8) << k.float_atomics.size() << "  "
      << (mm.empty() ? "" : "[" + mm + "] ") << k.pretty << "\n";
  }
  return o.str();
}

nlohmann::json to_json(const KernelReport& k) {
  return {{"kernel", k.pretty},         {"mangled", k.kernel},          {"vgpr", k.vgpr},
          {"agpr", k.agpr},             {"sgpr", k.sgpr},               {"scratch", k.scratch},
          {"vgpr_spill", k.vgpr_spill}, {"sgpr_spill", k.sgpr_spill},   {"lds", k.lds},
          {"occupancy", k.occupancy},   {"dynamic_stack", k.dynamic_stack},
          {"matrix_ops", k.matrix_ops}, {"float_atomics", k.float_atomics}};
}

}  // namespace kgate::isa
