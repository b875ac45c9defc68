#include "reference/npy.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "reference/error.hpp"

namespace kgate {

namespace fs = std::filesystem;

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

int open_nonregular_for_writing(const std::string& path) {
  // Non-blocking, so that a FIFO without a reader is refused (ENXIO) instead
  // of blocking the run; blocking again for the write itself.
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO) throw InputError(path, "the FIFO has no reader (start the reader first)");
    throw InputError(path, "cannot open for writing: " + std::string(std::strerror(errno)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

void write_all(int fd, const std::string& path, const std::string& contents) {
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t k = ::write(fd, contents.data() + done, contents.size() - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      const int err = errno;
      ::close(fd);
      throw InputError(path, "write failed: " + std::string(std::strerror(err)));
    }
    done += static_cast<std::size_t>(k);
  }
  if (::close(fd) != 0) throw InputError(path, "write failed at close: " + std::string(std::strerror(errno)));
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  std::error_code ec;
  std::string target = path;
  if (fs::symlink_status(path, ec).type() == fs::file_type::symlink) {
    target = fs::canonical(path, ec).string();
    if (ec) throw InputError(path, "the symbolic link cannot be resolved: " + ec.message());
  }
  const fs::file_type type = fs::status(target, ec).type();
  if (type == fs::file_type::directory) throw InputError(path, "is a folder; a file is expected");
  if (type != fs::file_type::not_found && type != fs::file_type::regular && type != fs::file_type::none) {
    // A device or FIFO is written through, never replaced.
    write_all(open_nonregular_for_writing(target), path, contents);
    return;
  }
  atomic_write(target, [&](std::ofstream& out) { out.write(contents.data(), static_cast<std::streamsize>(contents.size())); });
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

namespace {

// The header dictionary of a .npy file, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// parsed in one bounded left-to-right pass (no recursion, no backtracking):
// exactly the three keys, each once, in any order; strings in ' or "; the
// shape a tuple of non-negative integers; then only whitespace (padding).
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Dims shape;
};

// NumPy's own limit on the number of dimensions.
constexpr std::size_t kMaxRank = 64;

class HeaderParser {
 public:
  HeaderParser(std::string_view h, const std::string& path) : h_(h), path_(path) {}

  NpyHeader parse() {
    NpyHeader r;
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    for (;;) {
      if (peek() == '}') break;
      const std::string key = string();
      expect(':');
      auto once = [&](bool& have) {
        if (have) fail("key '" + key + "' given twice");
        have = true;
      };
      if (key == "descr") {
        once(have_descr);
        r.descr = string();
      } else if (key == "fortran_order") {
        once(have_fortran);
        r.fortran_order = boolean();
      } else if (key == "shape") {
        once(have_shape);
        r.shape = shape();
      } else {
        fail("unknown key '" + key + "' (descr, fortran_order, shape)");
      }
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}'");
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != h_.size()) fail("unexpected text after the dictionary");
    if (!have_descr) fail("no 'descr'");
    if (!have_fortran) fail("no 'fortran_order'");
    if (!have_shape) fail("no 'shape'");
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InputError(path_, "bad .npy header at byte " + std::to_string(pos_) + ": " + why);
  }
  void skip_space() {
    while (pos_ < h_.size() && (h_[pos_] == ' ' || h_[pos_] == '\t' || h_[pos_] == '\n' || h_[pos_] == '\r')) ++pos_;
  }
  // The next non-space character, or '\0' at the end.
  char peek() {
    skip_space();
    return pos_ < h_.size() ? h_[pos_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const std::size_t begin = ++pos_;
    while (pos_ < h_.size() && h_[pos_] != q) {
      if (h_[pos_] == '\\' || h_[pos_] == '\n') fail("escapes and newlines are not supported in strings");
      ++pos_;
    }
    if (pos_ == h_.size()) fail("unterminated string");
    return std::string(h_.substr(begin, pos_++ - begin));
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, {std::string_view("False"), false}})
      if (h_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    fail("expected True or False");
  }
  Dims shape() {
    expect('(');
    Dims dims;
    for (;;) {
      if (peek() == ')') break;
      if (dims.size() == kMaxRank) fail("more than " + std::to_string(kMaxRank) + " dimensions");
      std::int64_t v = 0;
      const char* first = h_.data() + pos_;
      const auto r = std::from_chars(first, h_.data() + h_.size(), v);
      if (r.ec == std::errc::result_out_of_range) fail("shape entry out of range");
      if (r.ec != std::errc() || v < 0 || *first == '-') fail("expected a non-negative integer in the shape");
      pos_ += static_cast<std::size_t>(r.ptr - first);
      dims.push_back(v);
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
    ++pos_;  // ')'
    return dims;
  }

  std::string_view h_;
  const std::string& path_;
  std::size_t pos_ = 0;
};

DType dtype_of(const std::string& descr, std::optional<DType> expected, const std::string& path) {
  if (descr == "<f8") return DType::fp64;
  if (descr == "<f4") return DType::fp32;
  if (descr == "<f2") return DType::fp16;
  if (descr == "<u2") {
    if (expected == DType::bf16) return DType::bf16;
    throw InputError(path, "'<u2' holds bf16 bits only when bf16 is expected");
  }
  throw InputError(path, "unsupported dtype '" + descr + "' (<f8, <f4, <f2, and <u2 for bf16 bits)");
}

}  // namespace

std::ifstream open_regular_file(const std::string& path, std::uintmax_t& size) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec) throw InputError(path, "cannot open: " + ec.message());
  if (fs::is_directory(st)) throw InputError(path, "is a directory, expected a file");
  if (!fs::is_regular_file(st)) throw InputError(path, "is not a regular file");
  size = fs::file_size(path, ec);
  if (ec) throw InputError(path, "cannot read its size: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open: " + std::string(std::strerror(errno)));
  return in;
}

Tensor read_npy(const std::string& path, std::optional<DType> expected) {
  std::uintmax_t size = 0;
  std::ifstream in = open_regular_file(path, size);
  return read_npy(in, size, path, expected);
}

Tensor read_npy(std::istream& in, std::uintmax_t size, const std::string& path, std::optional<DType> expected) {
  char magic[8];
  if (size < 10 || !in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw InputError(path, "not a .npy file (bad magic)");
  std::size_t hlen = 0, prefix = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) throw InputError(path, "truncated header");
    hlen = b[0] | (b[1] << 8);
    prefix = 10;
  } else if (magic[6] == 2 || magic[6] == 3) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) throw InputError(path, "truncated header");
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<std::size_t>(b[3]) << 24);
    prefix = 12;
    if (hlen > kMaxNpyHeader)
      throw InputError(path, "header of " + std::to_string(hlen) + " bytes is over the limit of " +
                                 std::to_string(kMaxNpyHeader));
  } else {
    throw InputError(path, "unsupported .npy version " + std::to_string(static_cast<unsigned char>(magic[6])) +
                               " (1, 2 and 3 are read)");
  }
  if (size < prefix + hlen)
    throw InputError(path, "truncated header: it claims " + std::to_string(hlen) + " bytes, the file holds " +
                               std::to_string(size - prefix));
  std::string header(hlen, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(hlen))) throw InputError(path, "truncated header");
  const NpyHeader h = HeaderParser(header, path).parse();
  if (h.fortran_order) throw InputError(path, "fortran_order arrays are not supported (write C order)");
  const DType t = dtype_of(h.descr, expected, path);
  if (expected && *expected != t)
    throw InputError(path, "dtype is " + std::string(name(t)) + ", expected " + std::string(name(*expected)));
  // The data size the header claims, checked against the file before anything is allocated.
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(checked_numel(h.shape, path), static_cast<std::int64_t>(size_of(t)), &bytes))
    throw InputError(path, "shape " + dims_string(h.shape) + " needs more than 2^63 bytes");
  const std::uintmax_t held = size - prefix - hlen;
  if (held < static_cast<std::uintmax_t>(bytes))
    throw InputError(path, "truncated data: shape " + dims_string(h.shape) + " of " + std::string(name(t)) + " needs " +
                               std::to_string(bytes) + " bytes, the file holds " + std::to_string(held));
  if (held > static_cast<std::uintmax_t>(bytes))
    throw InputError(path, std::to_string(held - static_cast<std::uintmax_t>(bytes)) + " trailing bytes after the data");
  Tensor out(t, h.shape);
  if (!in.read(static_cast<char*>(out.data()), static_cast<std::streamsize>(bytes)))
    throw InputError(path, "truncated data: expected " + std::to_string(bytes) + " bytes");
  return out;
}

}  // namespace kgate
