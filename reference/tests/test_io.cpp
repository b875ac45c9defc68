// Digests and .npy files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/npy.hpp"

namespace kgate {
namespace {

namespace fs = std::filesystem;

fs::path tmpdir() {
  fs::path d = fs::temp_directory_path() / ("kgate_test_io_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

TEST(Digest, SensitiveToBytesDtypeAndShape) {
  Tensor a(DType::fp32, {2, 3});
  for (int i = 0; i < 6; ++i) a.set(i, i);
  const std::string d = digest(a);
  EXPECT_EQ(d.size(), 32u);
  EXPECT_EQ(d.find_first_not_of("0123456789abcdef"), std::string::npos);
  Tensor b(DType::fp32, {3, 2});
  for (int i = 0; i < 6; ++i) b.set(i, i);
  EXPECT_NE(digest(b), d);  // same bytes, other shape
  Tensor c(DType::fp32, {2, 3});
  for (int i = 0; i < 6; ++i) c.set(i, i);
  EXPECT_EQ(digest(c), d);
  c.set(5, std::nextafter(5.0f, 6.0f));  // one ulp
  EXPECT_NE(digest(c), d);
  Tensor z1(DType::bf16, {4}), z2(DType::fp16, {4});
  EXPECT_NE(digest(z1), digest(z2));  // same zero bytes, other dtype
  // A strided view hashes its logical elements in order.
  TensorView v = a.view();
  v.dims = {3, 2};
  v.strides = {1, 3};  // transpose of a
  Tensor at(DType::fp32, {3, 2});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) at.set(i * 2 + j, a.get(j * 3 + i));
  EXPECT_EQ(digest(v), digest(at));
}

TEST(Npy, RoundTripsEveryDtype) {
  const fs::path d = tmpdir();
  for (DType t : {DType::fp64, DType::fp32, DType::bf16, DType::fp16}) {
    Tensor a(t, {1, 2, 3, 4, 5});
    for (std::int64_t i = 0; i < a.numel(); ++i) a.set(i, static_cast<double>(i) * 0.37 - 20);
    const std::string path = (d / (std::string(name(t)) + ".npy")).string();
    write_npy(path, a.view());
    const Tensor b = read_npy(path, t);
    EXPECT_EQ(b.dims(), a.dims());
    EXPECT_EQ(digest(b), digest(a)) << name(t);
    // Header is 64-byte aligned per the format.
    std::ifstream in(path, std::ios::binary);
    in.seekg(8);
    unsigned char l[2];
    in.read(reinterpret_cast<char*>(l), 2);
    EXPECT_EQ((10 + (l[0] | (l[1] << 8))) % 64, 0);
  }
  fs::remove_all(d);
}

TEST(Npy, MalformedFilesAreInputErrorsNamingThePath) {
  const fs::path d = tmpdir();
  const std::string good = (d / "good.npy").string();
  Tensor a(DType::fp32, {4});
  write_npy(good, a.view());
  auto field_of = [](const std::string& path, std::optional<DType> t) {
    try {
      read_npy(path, t);
    } catch (const InputError& e) {
      return e.field();
    }
    return std::string("<accepted>");
  };
  EXPECT_EQ(field_of(good, DType::fp32), "<accepted>");
  EXPECT_EQ(field_of(good, DType::fp16), good);  // dtype mismatch
  const std::string missing = (d / "missing.npy").string();
  EXPECT_EQ(field_of(missing, std::nullopt), missing);
  const std::string junk = (d / "junk.npy").string();
  write_file_atomic(junk, "not numpy at all");
  EXPECT_EQ(field_of(junk, std::nullopt), junk);
  // Truncated data.
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = (d / "cut.npy").string();
  write_file_atomic(cut, bytes.substr(0, bytes.size() - 3));
  EXPECT_EQ(field_of(cut, std::nullopt), cut);
  // No temporary files are left behind.
  for (const auto& e : fs::directory_iterator(d)) EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos);
  fs::remove_all(d);
}

TEST(Tensor, TooBigForMemoryIsAnInputError) {
  EXPECT_THROW(Tensor(DType::fp64, {1LL << 20, 1LL << 20, 1LL << 10}), InputError);
  EXPECT_THROW(Tensor(DType::fp64, {1LL << 40, 1LL << 40}), InputError);  // overflows int64
}

}  // namespace
}  // namespace kgate
