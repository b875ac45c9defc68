#include "tools/files.hpp"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

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
      return;
    }
    case fs::file_type::regular:
      require_access(path, W_OK, flag, "is not writable");
      // Replaced by a rename: the folder must take a new file.
      require_access(folder_of(path), W_OK | X_OK, flag, "is not a writable folder (the report is replaced atomically)");
      return;
    case fs::file_type::directory: throw InputError(flag, quoted(path) + " is a folder; a file is expected");
    case fs::file_type::socket: throw InputError(flag, quoted(path) + " is a socket; a file is expected");
    default: require_access(path, W_OK, flag, "is not writable"); return;  // device, FIFO: written through
  }
}

void write_output_file(const std::string& path, const std::string& contents, const std::string& flag) {
  if (path == "-") {
    std::cout << contents << std::flush;
    return;
  }
  std::string target = path;
  std::error_code ec;
  if (fs::symlink_status(path, ec).type() == fs::file_type::symlink) {
    target = fs::canonical(path, ec).string();
    if (ec) throw InputError(flag, "the symbolic link " + quoted(path) + " cannot be resolved: " + ec.message());
  }
  const fs::file_type type = fs::symlink_status(target, ec).type();
  if (type == fs::file_type::not_found || type == fs::file_type::regular) {
    write_file_atomic(target, contents);
    return;
  }
  if (type == fs::file_type::directory) throw InputError(flag, quoted(path) + " is a folder; a file is expected");
  std::ofstream out(target, std::ios::binary);
  if (!out) throw InputError(flag, "cannot open " + quoted(path) + " for writing: " + std::strerror(errno));
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.flush();
  if (!out) throw InputError(flag, "writing " + quoted(path) + " failed: " + std::strerror(errno));
}

}  // namespace kgate::files
