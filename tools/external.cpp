#include "tools/external.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/json.hpp"
#include "reference/npy.hpp"
#include "tools/data.hpp"

extern char** environ;

namespace fs = std::filesystem;

namespace kgate::gate {

namespace {

constexpr int kProtocol = 1;
constexpr std::size_t kMaxLine = std::size_t{1} << 20;  // a protocol message is one line of at most 1 MiB

std::string clip(const std::string& s) { return s.size() > 200 ? s.substr(0, 200) + "..." : s; }

// The driver process: requests on its stdin, one JSON line per answer on its
// stdout; its stderr is ours.
class Driver {
 public:
  Driver(const std::vector<std::string>& argv, const std::string& pythonpath) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
      throw RunError(std::string("cannot create the driver's pipes: ") + std::strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e)
      if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env.emplace_back(*e);
    const char* old = std::getenv("PYTHONPATH");
    env.push_back("PYTHONPATH=" + pythonpath + (old && *old ? ":" + std::string(old) : ""));
    env.push_back("PYTHONDONTWRITEBYTECODE=1");
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const int rc = ::posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    if (rc != 0) {
      pid_ = -1;
      throw RunError("cannot start '" + argv[0] + "': " + std::strerror(rc) + " (KGATE_PYTHON names the interpreter)");
    }
  }
  ~Driver() {
    if (to_ >= 0) ::close(to_);
    if (pid_ > 0) {
      // Given a moment to exit after "exit" (or the closed stdin), then killed.
      for (int i = 0; i < 50 && !reaped(); ++i) ::usleep(20000);
      if (!reaped()) {
        ::kill(pid_, SIGKILL);
        int st = 0;
        ::waitpid(pid_, &st, 0);
      }
    }
    if (from_ >= 0) ::close(from_);
  }
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Sends one line; false when the driver has gone.
  bool send(const std::string& line) {
    const std::string s = line + "\n";
    std::size_t done = 0;
    ::signal(SIGPIPE, SIG_IGN);
    while (done < s.size()) {
      const ssize_t n = ::write(to_, s.data() + done, s.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  }
  // One line within `timeout` seconds: the line, or why there is none.
  bool receive(double timeout, std::string& line, std::string& why) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
    for (;;) {
      const auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return true;
      }
      if (buf_.size() > kMaxLine) {
        why = "a protocol message longer than 1 MiB: '" + clip(buf_) + "'";
        return false;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        why = "no answer within " + format_double(timeout) + " s (--driver-timeout)";
        return false;
      }
      pollfd p{from_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        why = "the driver exited" + exit_status() + (buf_.empty() ? "" : " after writing '" + clip(buf_) + "'");
        return false;
      }
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }

 private:
  bool reaped() {
    if (pid_ <= 0) return true;
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      pid_ = -1;
      return true;
    }
    return false;
  }
  std::string exit_status() {
    for (int i = 0; i < 25 && !reaped(); ++i) ::usleep(20000);
    if (pid_ > 0 || status_ < 0) return "";
    if (WIFEXITED(status_)) return " (exit status " + std::to_string(WEXITSTATUS(status_)) + ")";
    if (WIFSIGNALED(status_)) return " (killed by signal " + std::to_string(WTERMSIG(status_)) + ")";
    return "";
  }
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  int status_ = -1;
  std::string buf_;
};

class ExternalRunner final : public Runner {
 public:
  explicit ExternalRunner(const ExternalOptions& o) : o_(o), model_(oracle::parse_model(o.model)) {
    if (o.backend == "torch") target_ = "kgate.backends.torch";
    else target_ = o.backend.substr(std::string("python:").size());
    if (target_.empty() || target_.find_first_of(" \t\n'\"") != std::string::npos)
      throw InputError("--backend", "expected python:MODULE[:ATTR], got '" + o.backend + "'");
    for (const auto& kv : o.options)
      if (kv.find('=') == std::string::npos || kv.front() == '=')
        throw InputError("--backend-option", "expected KEY=VALUE, got '" + kv + "'");
    std::error_code ec;
    // One folder per runner: a run may hold several drivers at once (kgate
    // bench's external arms).
    static std::atomic<int> runners{0};
    scratch_ = fs::temp_directory_path(ec) /
               ("kgate-driver-" + std::to_string(::getpid()) + "-" + std::to_string(runners++));
    fs::remove_all(scratch_, ec);
    if (!fs::create_directories(scratch_, ec) && ec)
      throw RunError("cannot create the driver's scratch folder " + scratch_.string() + ": " + ec.message());
    const char* py = std::getenv("KGATE_PYTHON");
    std::vector<std::string> argv{py && *py ? py : "python3", "-m", "kgate.driver", "--protocol",
                                  std::to_string(kProtocol), "--target", target_};
    for (const auto& kv : o.options) {
      argv.push_back("--option");
      argv.push_back(kv);
    }
    // The package: the source tree's, and an installed one beside kgate
    // (<prefix>/lib/python3/dist-packages, tools/python/CMakeLists.txt).
    std::string pythonpath = data::path("tools/python");
    std::error_code pec;
    const fs::path self = fs::read_symlink("/proc/self/exe", pec);
    if (!pec) pythonpath = (self.parent_path().parent_path() / "lib/python3/dist-packages").string() + ":" + pythonpath;
    driver_ = std::make_unique<Driver>(argv, pythonpath);
    std::string line, why;
    if (!driver_->receive(o_.timeout, line, why)) fail("", "no handshake: " + why);
    const nlohmann::json h = parse(line, "");
    if (!h.contains("kgate_protocol") || h.at("kgate_protocol") != kProtocol)
      fail("", "the handshake does not speak protocol " + std::to_string(kProtocol) + ": '" + clip(line) + "'");
    if (h.contains("error")) fail("", "the driver could not start: " + h.at("error").dump());
    hello_ = h;
  }
  ~ExternalRunner() override {
    if (driver_) driver_->send(R"({"op": "exit"})");
    driver_.reset();
    std::error_code ec;
    fs::remove_all(scratch_, ec);
  }

  kernels::Support is_supported(const Problem& p) override {
    std::lock_guard lock(mutex_);
    const nlohmann::json a = request(p, {{"op", "supports"}});
    const std::string st = a.at("status").get<std::string>();
    if (st == "ok") return {true, ""};
    if (st == "declined") return {false, "declined by " + o_.backend + ": " + reason(a)};
    fail(to_descriptor(p), "supports answered '" + st + "': " + clip(a.dump()));
  }

  // A convolution-only model (mma-sm90, tf32, ...) over a selection with
  // GroupNorm: GroupNorm is judged under fp32-any-order, and its plan says so.
  kernels::Plan plan(const Problem& p) override {
    if (std::holds_alternative<GroupNormProblem>(p) && model_.kind != oracle::Model::Kind::any_order &&
        model_.kind != oracle::Model::Kind::split) {
      kernels::Plan pl = model_plan(p, oracle::Model{});
      pl.variant += " (" + model_.name() + " applies to convolutions)";
      return pl;
    }
    return model_plan(p, model_);
  }

  std::map<Role, Tensor> run(const Problem& p, const kernels::Plan&, const std::map<Role, Tensor>& in,
                             int rerun) override {
    return exchange(p, in, rerun, nullptr).outputs;
  }

  // A run request (with the timing field when `timing` is given) and its
  // answer: every output read back and checked, and for a timed run the
  // times, checked before the outputs (a driver that does not know the
  // field answers a plain run's ok).
  TimedRun exchange(const Problem& p, const std::map<Role, Tensor>& in, int rerun, const Timing* timing) {
    std::lock_guard lock(mutex_);
    const std::string desc = to_descriptor(p);
    const fs::path dir = scratch_ / ("r" + std::to_string(++requests_));
    fs::create_directories(dir);
    nlohmann::json ins = nlohmann::json::object(), outs = nlohmann::json::object();
    for (const auto& s : inputs(p)) {
      const fs::path f = dir / (std::string(name(s.role)) + ".npy");
      write_npy(f.string(), in.at(s.role).view());
      ins[std::string(name(s.role))] = {{"file", f.string()}, {"dtype", name(s.dtype)}, {"dims", s.dims}};
    }
    for (const auto& s : outputs(p))
      outs[std::string(name(s.role))] = {
          {"file", (dir / (std::string(name(s.role)) + ".npy")).string()}, {"dtype", name(s.dtype)}, {"dims", s.dims}};
    nlohmann::json req{{"op", "run"}, {"rerun", rerun}, {"inputs", ins}, {"outputs", outs}};
    if (timing)
      req["timing"] = {{"warmup", timing->warmup}, {"iters", timing->iters}, {"flush_bytes", timing->flush_bytes}};
    const nlohmann::json a = request(p, req);
    const std::string st = a.at("status").get<std::string>();
    TimedRun got;
    if (st == "ok") {
      if (timing) read_times(desc, a, *timing, got);
      for (const auto& s : outputs(p)) {
        const std::string file = outs.at(std::string(name(s.role))).at("file").get<std::string>();
        std::error_code ec;
        if (!fs::exists(file, ec)) fail(desc, "answered ok without writing " + std::string(name(s.role)) + ".npy");
        try {
          Tensor t = read_npy(file, s.dtype);
          if (t.dims() != s.dims)
            fail(desc, std::string(name(s.role)) + " has dims " + dims_string(t.dims()) + ", expected " + dims_string(s.dims));
          got.outputs.emplace(s.role, std::move(t));
        } catch (const InputError& e) {
          fail(desc, std::string(name(s.role)) + ": " + e.message());
        }
      }
    }
    fs::remove_all(dir);
    if (st == "ok") return got;
    // A decline at run time (after supports said yes) is the kernel's
    // failure to run a problem it claimed; an error is the kernel's own.
    if (st == "declined") throw std::runtime_error("declined at run time after supports accepted: " + reason(a));
    if (st == "error") throw std::runtime_error(reason(a));
    fail(desc, "run answered '" + st + "': " + clip(a.dump()));
  }

  std::string repro_flags() const override {
    std::string s = " --backend " + o_.backend;
    for (const auto& kv : o_.options) s += " --backend-option " + kv;
    return s + " --model " + model_.name();
  }

  std::string implementation() const {
    const auto it = hello_.find("implementation");
    return it != hello_.end() && it->is_string() ? it->get<std::string>() : o_.backend;
  }

  std::string describe() const {
    std::string s = o_.backend + " (driver " + hello_.value("driver", std::string("?"));
    if (hello_.contains("implementation")) s += ", " + hello_.at("implementation").get<std::string>();
    return s + ", model " + model_.name() + ")";
  }

 private:
  [[noreturn]] void fail(const std::string& desc, const std::string& why) const {
    throw RunError("driver " + o_.backend + (desc.empty() ? "" : " on '" + desc + "'") + ": " + why +
                   "; an error of the run, not a verdict on the kernel");
  }
  nlohmann::json parse(const std::string& line, const std::string& desc) const {
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      if (!j.is_object()) fail(desc, "a protocol message that is not a JSON object: '" + clip(line) + "'");
      return j;
    } catch (const nlohmann::json::exception&) {
      fail(desc, "a malformed protocol message (stray output on the protocol channel?): '" + clip(line) + "'");
    }
  }
  // A timed run's times_ms (t.iters finite non-negative numbers) and its
  // optional timer (a string).
  void read_times(const std::string& desc, const nlohmann::json& a, const Timing& t, TimedRun& got) const {
    if (!a.contains("times_ms"))
      fail(desc, "a timed run answered ok without times_ms (a driver that does not know the request's timing "
                 "field?): '" + clip(a.dump()) + "'");
    const nlohmann::json& ms = a.at("times_ms");
    if (!ms.is_array() || ms.size() != static_cast<std::size_t>(t.iters))
      fail(desc, "times_ms must be an array of " + std::to_string(t.iters) + " number(s) (the request's iters), got " +
                     clip(ms.dump()));
    for (const auto& v : ms) {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
        fail(desc, "times_ms holds " + clip(v.dump()) + ", not a finite non-negative number of milliseconds");
      got.ms.push_back(v.get<double>());
    }
    if (a.contains("timer")) {
      if (!a.at("timer").is_string()) fail(desc, "timer must be a string, got " + clip(a.at("timer").dump()));
      got.timer = a.at("timer").get<std::string>();
    }
  }
  static std::string reason(const nlohmann::json& a) {
    if (a.contains("reason") && a.at("reason").is_string()) return a.at("reason").get<std::string>();
    if (a.contains("message") && a.at("message").is_string()) return a.at("message").get<std::string>();
    return "(no reason given)";
  }
  nlohmann::json request(const Problem& p, nlohmann::json req) {
    const std::string desc = to_descriptor(p);
    const std::int64_t id = ++ids_;
    req["id"] = id;
    req["descriptor"] = desc;
    req["problem"] = to_json(p);
    if (!driver_->send(req.dump())) fail(desc, "the driver is gone (its stdin is closed)");
    std::string line, why;
    if (!driver_->receive(o_.timeout, line, why)) fail(desc, why);
    const nlohmann::json a = parse(line, desc);
    if (!a.contains("id") || a.at("id") != id)
      fail(desc, "an answer to another request (id " + (a.contains("id") ? a.at("id").dump() : "missing") +
                     ", expected " + std::to_string(id) + ")");
    if (!a.contains("status") || !a.at("status").is_string()) fail(desc, "an answer without a status: '" + clip(line) + "'");
    return a;
  }

  ExternalOptions o_;
  oracle::Model model_;
  std::string target_;
  fs::path scratch_;
  std::unique_ptr<Driver> driver_;
  nlohmann::json hello_;
  std::mutex mutex_;
  std::int64_t ids_ = 0, requests_ = 0;
};

}  // namespace

bool is_external_backend(const std::string& backend) {
  return backend == "torch" || backend.rfind("python:", 0) == 0;
}

std::unique_ptr<Runner> start_external(const ExternalOptions& o) { return std::make_unique<ExternalRunner>(o); }

std::string external_description(const Runner& r) {
  const auto* e = dynamic_cast<const ExternalRunner*>(&r);
  return e ? e->describe() : "kgate kernels";
}

std::string external_implementation(const Runner& r) {
  const auto* e = dynamic_cast<const ExternalRunner*>(&r);
  return e ? e->implementation() : "kgate kernels";
}

TimedRun run_timed(Runner& r, const Problem& p, const std::map<Role, Tensor>& in, const Timing& t) {
  auto* e = dynamic_cast<ExternalRunner*>(&r);
  if (!e) throw std::logic_error("run_timed: not an external runner");
  return e->exchange(p, in, 0, &t);
}

}  // namespace kgate::gate
