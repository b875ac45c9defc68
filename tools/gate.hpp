// The gate's unit of work: one problem, one fill. Generates the inputs,
// runs the production kernel (when there is one) and the fp64 reference,
// and lets the oracle judge every output; then reruns the kernel and
// compares digests (determinism). Data flows one way: problem -> inputs ->
// (kernel, reference) -> oracle -> result.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/api.hpp"
#include "oracles/models.hpp"
#include "oracles/oracle.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/fill.hpp"
#include "reference/groupnorm/ref_groupnorm.hpp"
#include "reference/problem.hpp"

namespace kgate::gate {

using oracle::State;
bool is_failure(State s);

// The verdict one comparison (one output under one fill) contributes: the
// report's state, except that "untrusted" only because the comparison proves
// nothing (TrustResult::proves_nothing: the reference is zero or within its
// bound of zero nearly everywhere, e.g. dgamma of constant groups) does not
// fail that fill: every tier and the NaN/Inf check still had to pass. Such an
// output is not verified by that fill; evaluate() requires every output to be
// proven by at least one fill, else the problem is untrusted (a failure).
State verdict(const oracle::Report& r);
// Whether the comparison verified the output: passed and not proves_nothing.
bool proves(const oracle::Report& r);
// Why `output` of p is zero for every input ("" when it is not): then no
// fill can prove it (each comparison is against zeros) and none needs to;
// the tiers still require the candidate to be zero. GroupNorm groups of one
// element: backward dx and dgamma, and forward y without affine.
std::string identically_zero(const Problem& p, Role output);

struct RoleResult {
  std::string role;
  oracle::Report report;
};

struct FillResult {
  Fill fill;
  State state = State::passed;
  std::string detail;             // kernel error, determinism mismatch, ...
  std::vector<RoleResult> roles;  // one per output role
  std::string digest;             // of the kernel's first output
  double worst_margin = 0;        // largest tier-2 margin over the roles
  // Wall seconds of each phase of this fill that ran ("inputs",
  // "reference", "kernel", "rerun", "oracle"): where a run's time goes.
  std::map<std::string, double> phase_seconds;
};

struct Result {
  std::string descriptor, op, dtype;
  State state = State::passed;
  std::string reason;             // unsupported / unimplemented / invalid reason
  std::string plan;               // printed launch plan
  std::vector<FillResult> fills;
  double worst_margin = 0;
  double seconds = 0;
  std::string repro_line;         // when set, what repro() returns (e.g. a `kgate judge` line)
  std::string repro_flags;        // appended to the check line (the runner that ran it)
  std::string reference;          // where the references ran (describe(RefSite))
  // The emulated target the kernel ran on when the run chose it per problem
  // (the host backend's sm90 stage of `kgate verify`: "sm90"); empty when it
  // is the process's (KGATE_HOST_TARGET, default gfx942). The repro line
  // sets KGATE_HOST_TARGET to it.
  std::string target;
  std::string repro() const;      // the exact command reproducing the worst fill
  nlohmann::json to_json() const;
};

// The fills the gate runs by default for a problem: the exact fill (lattice
// for conv, gn_exact for GroupNorm), a signed random fill, then the pinning
// fills (gate_problems.hpp); with kgate's plan of a convolution whose
// reductions are split along a published slice map, the combine probe last
// (combine_probe).
std::vector<Fill> default_fills(const Problem& p, std::uint64_t seed, const kernels::Plan* plan = nullptr);
// The combine probe of p's plan (reference/conv3d/combine.hpp): the fill
// `combine` with the plan's runs, where a reduction of p's plan is split
// and publishes its slice map; none otherwise.
std::optional<Fill> combine_probe(const Problem& p, const kernels::Plan& plan, std::uint64_t seed);

// An error of the run, not a verdict on the kernel (an allocation failed):
// evaluate() throws it, naming the problem; the command line exits 2.
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The RunError for a machine that cannot run this binary's kernels (no
// driver, no device): one line naming the backend and the cause, and saying
// it is the environment's error, not the kernel's.
RunError environment_error(const std::string& cause);

// Told the phase evaluate() enters, e.g. "kernel (fill signed seed 1)";
// phases: inputs, kernel, rerun, reference, oracle.
using PhaseFn = std::function<void(const std::string&)>;

// Where the fp64 references run: on the host's CPUs (the fast references,
// reference/conv3d/ref.hpp), or on this binary's backend (the device
// reference, reference/device/devref.hpp: the emulator on the host build, the
// GPU on kgate_cuda). `--reference auto` is device for `verify --full` on a
// GPU backend and host everywhere else (resolve_reference).
enum class RefSite : std::uint8_t { host, device };
// "host fast" or "device <backend>": what a report records.
std::string describe(RefSite where);
// "host", "device", "auto" (auto: full && the backend is not the host emulator).
std::optional<RefSite> resolve_reference(const std::string& flag, bool full);

// The fp64 references of every output of p on inputs `in` and what the
// oracle's bounds need beside them (the absolute companion for conv, the
// statistics for GroupNorm), computed at `where`.
struct References {
  ref::Outputs want;
  ref::Outputs abs;                     // conv only
  ref::GroupNormCompanion companion;    // GroupNorm only
};
References references(const Problem& p, const std::map<Role, Tensor>& in, RefSite where = RefSite::host);

// Inputs under which a correct kernel cannot be held to the fp64 reference
// (oracle::range_problem: an input that overflowed its dtype, sums beyond
// the accumulator's range): an InputError naming the fill, thrown before any
// kernel runs. `plan` is p's plan (its reductions give the accumulators).
void check_range(const Problem& p, const kernels::Plan& plan, const Fill& fill, const std::map<Role, Tensor>& in,
                 const References& refs);

// The oracle's verdict on every output of p: `got` (in the outputs' dtypes)
// against the fp64 references, bounds from plan.reduction.
std::vector<RoleResult> judge(const Problem& p, const kernels::Plan& plan, const Fill& fill,
                              const std::map<Role, Tensor>& in, const References& refs,
                              const std::map<Role, Tensor>& got);
// The combine probe's verdict on every output (fill.kind == combine): each
// against the replay of its published reduction (oracle::compare_replay).
// InputError when a split reduction publishes no slice map.
std::vector<RoleResult> judge_combine(const Problem& p, const kernels::Plan& plan, const Fill& fill,
                                      const std::map<Role, Tensor>& in, const std::map<Role, Tensor>& got);
// The same, computing the references first.
std::vector<RoleResult> judge(const Problem& p, const kernels::Plan& plan, const Fill& fill,
                              const std::map<Role, Tensor>& in, const std::map<Role, Tensor>& got,
                              const std::function<void(const char*)>& phase = [](const char*) {});

// What evaluate() runs a problem's kernel through: kgate's own kernels
// (nullptr), or an external implementation (tools/external.hpp: a Python
// driver). is_supported's refusal is "skipped"; plan() gives the reductions
// the oracle bounds with (an external kernel's: its accumulation model);
// run() returns every output of p in its dtype, or throws: RunError for an
// error of the run (a driver that broke the protocol), any other exception
// for the kernel's own failure. `rerun` numbers the determinism reruns (0:
// the first run).
class Runner {
 public:
  virtual ~Runner() = default;
  virtual kernels::Support is_supported(const Problem& p) = 0;
  virtual kernels::Plan plan(const Problem& p) = 0;
  virtual std::map<Role, Tensor> run(const Problem& p, const kernels::Plan& plan, const std::map<Role, Tensor>& in,
                                     int rerun) = 0;
  // The `kgate check` flags that select this runner again (evaluate puts
  // them in Result::repro_flags), e.g. " --backend torch --model tf32".
  virtual std::string repro_flags() const = 0;
};

// Judges the kernel on one problem with each fill; `repeats` extra kernel
// runs must reproduce the first run's digests bit for bit, on each fill whose
// sums depend on their order (the exact fills too where there is none;
// never the combine probe). Per fill: inputs,
// references, check_range (bad input throws before the kernel runs), kernel,
// reruns, oracle. The problem passes only if every fill passes and every
// output is proven (gate::proves) by at least one fill; an output no fill
// proves makes it untrusted, with the reason. A failed allocation, or an
// environment that cannot run kernels (rt::Unavailable), throws RunError; a
// kernel's own error is a failed verdict.
Result evaluate(const Problem& p, const std::vector<Fill>& fills, int repeats = 1, const PhaseFn& phase = {},
                Runner* runner = nullptr, RefSite where = RefSite::host);

// The verdict of one fill from its judged roles (fr.roles): the worst role
// verdict, the roles it proved added to `proven`, the roles it could not
// prove named in fr.detail, the worst tier-2 margin.
void add_verdicts(FillResult& fr, std::set<std::string>& proven);
// The problem's verdict after its fills: a passed result with an output
// that no fill proved (and that is not zero for every input) is untrusted,
// with the reason.
void conclude(const Problem& p, Result& r, const std::set<std::string>& proven);

// The plan the oracle judges an external kernel's outputs with: the
// reductions `m` declares for every output of p (oracle/models.hpp); no
// launch steps.
kernels::Plan model_plan(const Problem& p, const oracle::Model& m);

// The bytes evaluate() holds at its peak for p, estimated from the tensor
// shapes and the plan: the inputs twice (host and device copies), the
// outputs three times (device, the first run's, a rerun's), the fp64
// reference and its absolute companion per output element, and the plan's
// workspace. 0 when no kernel runs p (unimplemented or unsupported).
double footprint_bytes(const Problem& p);

// The memory a run may use: MemAvailable of /proc/meminfo (the free physical
// memory from sysconf when it cannot be read).
double available_memory();

// The emulator's settings as a run uses them (the host backend's
// configuration, read from the KGATE_HOST_* / KGATE_MFMA_MODEL /
// KGATE_LDS_CHECK environment). A bad environment value is an InputError
// naming the variable.
nlohmann::json backend_settings();

// How a repro line starts: every KGATE_* environment variable of this
// process (the emulator's target and model, the references' threads: what
// can change a result), then the path of the binary that ran (kgate_mpi:
// the kgate beside it), so that the line reruns the same backend without
// kgate on PATH, e.g. "KGATE_HOST_TARGET=sm90 /opt/kgate/bin/kgate".
// A non-empty host_target replaces the process's KGATE_HOST_TARGET (and
// drops its KGATE_HOST_WAVE and KGATE_MFMA_MODEL, which belong to a target).
std::string command_prefix(const std::string& host_target = "");

// "src:dst" label for tables.
std::string dtype_label(const Problem& p);

}  // namespace kgate::gate
