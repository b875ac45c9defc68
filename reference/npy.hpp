// NumPy .npy (format 1.0, little-endian, C order) for kgate tensors.
// fp64 '<f8', fp32 '<f4', fp16 '<f2'; bf16 has no NumPy dtype and is stored
// as its raw bits, '<u2' (read it back by naming bf16 as the expected dtype).
// Writes are atomic: a temporary file in the same folder, then rename.
#pragma once

#include <cstdint>
#include <fstream>
#include <istream>
#include <optional>
#include <string>

#include "reference/tensor.hpp"

namespace kgate {

void write_npy(const std::string& path, const TensorView& t);

// Reads format versions 1.0, 2.0 and 3.0. The header is parsed in one bounded
// pass; a 2.0/3.0 header longer than kMaxNpyHeader is refused (1.0's 16-bit
// length is its own limit). The data size the header claims is checked
// against the file before anything is allocated. Throws InputError(field =
// path) on a malformed file, a directory or non-regular file, fortran_order,
// an unsupported dtype, or a dtype other than `expected`.
Tensor read_npy(const std::string& path, std::optional<DType> expected = std::nullopt);
// The same on a stream holding `size` bytes; `path` names it in errors.
Tensor read_npy(std::istream& in, std::uintmax_t size, const std::string& path,
                std::optional<DType> expected = std::nullopt);
inline constexpr std::size_t kMaxNpyHeader = std::size_t{1} << 20;

// Opens a regular file (symbolic links followed) for binary reading and sets
// `size`. Throws InputError(path) saying what is wrong: missing, a directory,
// not a regular file, a symbolic-link loop, unreadable.
std::ifstream open_regular_file(const std::string& path, std::uintmax_t& size);

// Writes `contents` to path: a regular file (or a missing one) atomically
// (temporary file in its folder, then rename); a symbolic link is never
// replaced (what it points to is written); a device or FIFO is written
// through, never replaced, a FIFO only when it has a reader. Every failure
// (open, write, close, rename) is an InputError naming the path.
void write_file_atomic(const std::string& path, const std::string& contents);

// Opens a device or FIFO for writing without blocking: a FIFO with no reader
// is an InputError (ENXIO) rather than a hang. Returns a blocking descriptor.
int open_nonregular_for_writing(const std::string& path);
// Writes all of `contents` to `fd` and closes it; a failure is an InputError
// naming `path`.
void write_all(int fd, const std::string& path, const std::string& contents);

}  // namespace kgate
