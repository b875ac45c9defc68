#include "tools/data.hpp"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace fs = std::filesystem;

namespace kgate::data {

std::string path(const std::string& relative) {
  if (const char* dir = std::getenv("KGATE_DATA_DIR"); dir && *dir) return (fs::path(dir) / relative).string();
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / KGATE_INSTALL_DATADIR / relative;
    if (fs::is_regular_file(installed, ec)) return installed.string();
  }
  return (fs::path(KGATE_SOURCE_DIR) / relative).string();
}

}  // namespace kgate::data
