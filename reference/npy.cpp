#include "reference/npy.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "reference/error.hpp"

namespace kgate {

namespace {

std::string descr_of(DType t) {
  switch (t) {
    case DType::fp64: return "<f8";
    case DType::fp32: return "<f4";
    case DType::fp16: return "<f2";
    case DType::bf16: return "<u2";
  }
  return "";
}

// Writes with a temporary name, flushes, then renames over `path`.
template <class WriteFn>
void atomic_write(const std::string& path, WriteFn&& write) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, "cannot open for writing: " + std::string(std::strerror(errno)));
    write(out);
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(path, "write failed: " + std::string(std::strerror(errno)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(path, "rename failed: " + std::string(std::strerror(errno)));
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& contents) {
  atomic_write(path, [&](std::ofstream& out) { out.write(contents.data(), static_cast<std::streamsize>(contents.size())); });
}

void write_npy(const std::string& path, const TensorView& t) {
  std::string shape = "(";
  for (std::size_t i = 0; i < t.dims.size(); ++i) shape += std::to_string(t.dims[i]) + (t.dims.size() == 1 || i + 1 < t.dims.size() ? "," : "");
  shape += ")";
  std::string header = "{'descr': '" + descr_of(t.dtype) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic (6) + version (2) + length (2) + header, padded with spaces to a
  // multiple of 64 and ended by a newline.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  atomic_write(path, [&](std::ofstream& out) {
    const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
    out.write(magic, 8);
    const std::uint16_t len = static_cast<std::uint16_t>(header.size());
    const char lenb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    out.write(lenb, 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    const std::size_t es = size_of(t.dtype);
    if (t.contiguous()) {
      out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.numel() * static_cast<std::int64_t>(es)));
    } else {
      Tensor copy(t.dtype, t.dims);
      std::vector<std::int64_t> idx(t.dims.size(), 0);
      for (std::int64_t i = 0; i < copy.numel(); ++i) {
        std::memcpy(static_cast<char*>(copy.data()) + i * static_cast<std::int64_t>(es),
                    static_cast<const char*>(t.data) + t.offset(idx) * static_cast<std::int64_t>(es), es);
        for (std::size_t d = idx.size(); d-- > 0;) {
          if (++idx[d] < t.dims[d]) break;
          idx[d] = 0;
        }
      }
      out.write(static_cast<const char*>(copy.data()), static_cast<std::streamsize>(copy.nbytes()));
    }
  });
}

Tensor read_npy(const std::string& path, std::optional<DType> expected) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open: " + std::string(std::strerror(errno)));
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw InputError(path, "not a .npy file (bad magic)");
  std::size_t hlen = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) throw InputError(path, "truncated header");
    hlen = b[0] | (b[1] << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) throw InputError(path, "truncated header");
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<std::size_t>(b[3]) << 24);
  } else {
    throw InputError(path, "unsupported .npy version " + std::to_string(magic[6]));
  }
  if (hlen > (1u << 20)) throw InputError(path, "header too long");
  std::string header(hlen, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(hlen))) throw InputError(path, "truncated header");

  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')"))) throw InputError(path, "header has no descr");
  const std::string descr = m[1];
  if (std::regex_search(header, m, std::regex(R"('fortran_order'\s*:\s*True)"))) throw InputError(path, "fortran_order arrays are not supported");
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))"))) throw InputError(path, "header has no shape");
  Dims dims;
  {
    std::stringstream ss(m[1].str());
    for (std::string part; std::getline(ss, part, ',');) {
      part.erase(0, part.find_first_not_of(" \t"));
      part.erase(part.find_last_not_of(" \t") + 1);
      if (part.empty()) continue;
      try {
        std::size_t used = 0;
        const long long v = std::stoll(part, &used);
        if (used != part.size() || v < 0) throw std::invalid_argument("");
        dims.push_back(v);
      } catch (const std::exception&) {
        throw InputError(path, "bad shape entry '" + part + "'");
      }
    }
  }
  DType t;
  if (descr == "<f8") t = DType::fp64;
  else if (descr == "<f4") t = DType::fp32;
  else if (descr == "<f2") t = DType::fp16;
  else if (descr == "<u2" && expected == DType::bf16) t = DType::bf16;
  else if (descr == "<u2") throw InputError(path, "'<u2' holds bf16 bits only when bf16 is expected");
  else throw InputError(path, "unsupported dtype '" + descr + "'");
  if (expected && *expected != t)
    throw InputError(path, "dtype is " + std::string(name(t)) + ", expected " + std::string(name(*expected)));
  Tensor out(t, dims);
  if (!in.read(static_cast<char*>(out.data()), static_cast<std::streamsize>(out.nbytes())))
    throw InputError(path, "truncated data: expected " + std::to_string(out.nbytes()) + " bytes");
  if (in.peek() != std::char_traits<char>::eof()) throw InputError(path, "trailing bytes after the data");
  return out;
}

}  // namespace kgate
