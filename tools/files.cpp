#include "tools/files.hpp"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "reference/error.hpp"
#include "reference/npy.hpp"

namespace fs = std::filesystem;

namespace kgate::files {

namespace {

// The name itself: not empty, within PATH_MAX, every component within
// NAME_MAX (checked here because the kernel's ENAMETOOLONG does not say which).
void check_name(const std::string& path, const std::string& flag) {
  if (path.empty()) throw InputError(flag, "the path is empty");
  if (path.size() >= PATH_MAX)
    throw InputError(flag, "the path is " + std::to_string(path.size()) + " characters, over the system's limit of " +
                               std::to_string(PATH_MAX - 1));
  for (const auto& part : fs::path(path))
    if (part.native().size() > NAME_MAX)
      throw InputError(flag, "the name '" + part.native().substr(0, 32) + "...' is " +
                                 std::to_string(part.native().size()) + " characters, over the system's limit of " +
                                 std::to_string(NAME_MAX));
}

std::string quoted(const std::string& path) { return "'" + path + "'"; }

void require_access(const std::string& path, int mode, const std::string& flag, const std::string& what) {
  if (::access(path.c_str(), mode) != 0)
    throw InputError(flag, quoted(path) + " " + what + ": " + std::strerror(errno));
}

// The status of an existing path (following links), or not_found; any other
// failure (a symbolic-link loop, a component that is not a folder, no
// permission) is an InputError naming the flag.
fs::file_status status_of(const std::string& path, const std::string& flag) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) return st;
  if (ec) throw InputError(flag, "cannot use " + quoted(path) + ": " + ec.message());
  return st;
}

std::string folder_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Devices and FIFOs that output_file opened, by path, until
// write_output_file writes them: a FIFO's reader must not see end-of-file
// between the check before a run and the report after it.
std::map<std::string, int>& held() {
  static std::map<std::string, int> fds;
  return fds;
}

// A file replaced by a rename needs a folder that takes a new file: access()
// says yes for root on file systems that refuse any new file (/proc, /sys),
// so a temporary file is created there and removed.
void probe_folder(const std::string& path, const std::string& flag) {
  const std::string probe = path + ".probe." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw InputError(flag, "cannot write " + quoted(path) + ": its folder " + quoted(folder_of(path)) +
                               " does not take a new file (" + std::strerror(errno) + ")");
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void output_folder(const std::string& path, const std::string& flag) {
  check_name(path, flag);
  const fs::file_status st = status_of(path, flag);
  if (st.type() == fs::file_type::not_found) {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) throw InputError(flag, "cannot create the folder " + quoted(path) + ": " + ec.message());
  } else if (st.type() != fs::file_type::directory) {
    throw InputError(flag, quoted(path) + " exists and is not a folder");
  }
  require_access(path, W_OK | X_OK, flag, "is not a writable folder");
}

void input_folder(const std::string& path, const std::string& flag) {
  check_name(path, flag);
  const fs::file_status st = status_of(path, flag);
  if (st.type() == fs::file_type::not_found) throw InputError(flag, "the folder " + quoted(path) + " does not exist");
  if (st.type() != fs::file_type::directory) throw InputError(flag, quoted(path) + " is not a folder");
  require_access(path, R_OK | X_OK, flag, "is not a readable folder");
}

void input_file(const std::string& path, const std::string& flag) {
  check_name(path, flag);
  const fs::file_status st = status_of(path, flag);
  if (st.type() == fs::file_type::not_found) throw InputError(flag, "the file " + quoted(path) + " does not exist");
  if (st.type() == fs::file_type::directory) throw InputError(flag, quoted(path) + " is a folder; a file is expected");
  require_access(path, R_OK, flag, "is not readable");
}

void output_file(const std::string& path, const std::string& flag) {
  if (path == "-") return;
  check_name(path, flag);
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(path, ec);
  if (link.type() == fs::file_type::symlink) {
    const fs::path target = fs::canonical(path, ec);
    if (ec) throw InputError(flag, "the symbolic link " + quoted(path) + " cannot be resolved: " + ec.message());
    output_file(target.string(), flag);
    return;
  }
  const fs::file_status st = status_of(path, flag);
  switch (st.type()) {
    case fs::file_type::not_found: {
      const std::string dir = folder_of(path);
      const fs::file_status d = status_of(dir, flag);
      if (d.type() != fs::file_type::directory)
        throw InputError(flag, "cannot create " + quoted(path) + ": the folder " + quoted(dir) + " does not exist");
      require_access(dir, W_OK | X_OK, flag, "is not a writable folder");
      probe_folder(path, flag);
      return;
    }
    case fs::file_type::regular:
      require_access(path, W_OK, flag, "is not writable");
      // Replaced by a rename: the folder must take a new file.
      require_access(folder_of(path), W_OK | X_OK, flag, "is not a writable folder (the report is replaced atomically)");
      probe_folder(path, flag);
      return;
    case fs::file_type::directory: throw InputError(flag, quoted(path) + " is a folder; a file is expected");
    case fs::file_type::socket: throw InputError(flag, quoted(path) + " is a socket; a file is expected");
    default: {  // device, FIFO: written through; a FIFO needs a reader now
      require_access(path, W_OK, flag, "is not writable");
      if (held().count(path)) return;
      try {
        held()[path] = open_nonregular_for_writing(path);  // kept open: the reader stays until the report
      } catch (const InputError& e) {
        throw InputError(flag, e.what());
      }
      return;
    }
  }
}

void write_output_file(const std::string& path, const std::string& contents, const std::string& flag) {
  if (path == "-") {
    std::cout << contents << std::flush;
    if (!std::cout) throw InputError(flag, "writing to standard output failed");
    return;
  }
  try {
    if (auto it = held().find(path); it != held().end()) {
      const int fd = it->second;
      held().erase(it);
      write_all(fd, path, contents);
      return;
    }
    write_file_atomic(path, contents);
  } catch (const InputError& e) {
    throw InputError(flag, e.what());
  }
}

std::string identity(const std::string& path) {
  if (path == "-") return "-";
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(path, ec);
  return ec ? path : p.string();
}

void distinct_outputs(const std::vector<std::pair<std::string, std::string>>& flag_paths) {
  for (std::size_t i = 0; i < flag_paths.size(); ++i)
    for (std::size_t j = i + 1; j < flag_paths.size(); ++j) {
      const auto& [fa, pa] = flag_paths[i];
      const auto& [fb, pb] = flag_paths[j];
      if (pa.empty() || pb.empty() || identity(pa) != identity(pb)) continue;
      if (pa != "-" && fs::exists(pa) && !fs::is_regular_file(pa)) continue;  // e.g. both /dev/null
      throw InputError(fb, "names the same file as " + fa + " (" + quoted(pa) + "): each report needs its own");
    }
}

}  // namespace kgate::files
