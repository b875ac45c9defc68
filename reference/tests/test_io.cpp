// Digests and .npy files.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "reference/host_memory.hpp"
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

// A .npy file from its parts: version, header text (padded as NumPy does
// when `pad`), and data bytes.
std::string npy_bytes(int version, std::string header, const std::string& data, bool pad = true) {
  const std::size_t prefix = version == 1 ? 10 : 12;
  if (pad) {
    header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
  }
  std::string b = "\x93NUMPY";
  b += static_cast<char>(version);
  b += '\0';
  const std::size_t n = header.size();
  b += static_cast<char>(n & 0xff);
  b += static_cast<char>((n >> 8) & 0xff);
  if (version != 1) {
    b += static_cast<char>((n >> 16) & 0xff);
    b += static_cast<char>((n >> 24) & 0xff);
  }
  return b + header + data;
}

// The message read_npy refuses `bytes` with (without the path), or "<accepted>".
std::string npy_error(const std::string& bytes, std::optional<DType> expected = std::nullopt) {
  const fs::path d = tmpdir();
  const std::string path = (d / "t.npy").string();
  write_file_atomic(path, bytes);
  std::string result = "<accepted>";
  try {
    read_npy(path, expected);
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), path);
    result = e.message();
  }
  fs::remove_all(d);
  return result;
}

TEST(Npy, HeaderParserIsBoundedAndStrict) {
  const std::string f4x3(12, '\0');
  EXPECT_EQ(npy_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f4x3)), "<accepted>");
  // Any key order, double quotes, no trailing comma, versions 2 and 3.
  EXPECT_EQ(npy_error(npy_bytes(2, "{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<f4\"}", f4x3)), "<accepted>");
  EXPECT_EQ(npy_error(npy_bytes(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3)}", f4x3)), "<accepted>");
  EXPECT_EQ(npy_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", std::string(4, '\0'))),
            "<accepted>");
  // A 30 KB header (std::regex overflowed the stack on these): padding inside
  // the dictionary is read, junk is refused, both without recursion.
  const std::string spaces(30000, ' ');
  EXPECT_EQ(npy_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False," + spaces + "'shape': (3,), }", f4x3)),
            "<accepted>");
  EXPECT_EQ(npy_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }" + std::string(30000, 'x'), f4x3))
                .substr(0, 23),
            "bad .npy header at byte");
  EXPECT_NE(npy_error(npy_bytes(1, "{'descr': '" + std::string(30000, 'f') + "', 'fortran_order': False, 'shape': (3,)}", f4x3))
                .find("unsupported dtype"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::string(30000, '(') + ")}", f4x3))
                .find("expected a non-negative integer"),
            std::string::npos);
  // Over the 2.0/3.0 limit: refused from the length alone.
  EXPECT_NE(npy_error(npy_bytes(2, std::string(kMaxNpyHeader + 1, ' '), "", false)).find("over the limit"), std::string::npos);
  // Malformed dictionaries.
  auto header_error = [&](const std::string& h) { return npy_error(npy_bytes(1, h, f4x3)); };
  EXPECT_NE(header_error("{'descr': '<f4', 'fortran_order': False}").find("no 'shape'"), std::string::npos);
  EXPECT_NE(header_error("{'descr': '<f4', 'shape': (3,)}").find("no 'fortran_order'"), std::string::npos);
  EXPECT_NE(header_error("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}").find("given twice"),
            std::string::npos);
  EXPECT_NE(header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}").find("unknown key 'x'"),
            std::string::npos);
  EXPECT_NE(header_error("{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}").find("expected ',' or '}'"),
            std::string::npos);
  EXPECT_NE(header_error("{'descr' '<f4', 'fortran_order': False, 'shape': (3,)}").find("expected ':'"), std::string::npos);
  EXPECT_NE(npy_error(npy_bytes(1, "{'descr': '<f4", "", false)).find("unterminated string"), std::string::npos);
  EXPECT_NE(header_error("{'descr': '<f4").find("newlines are not supported"), std::string::npos);
  EXPECT_NE(header_error("{'descr': '<f4', 'fortran_order': false, 'shape': (3,)}").find("True or False"), std::string::npos);
  EXPECT_NE(header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}").find("non-negative"), std::string::npos);
  EXPECT_NE(header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3 4)}").find("expected ',' or ')'"),
            std::string::npos);
  EXPECT_NE(header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}").find("out of range"),
            std::string::npos);
  std::string rank65 = "(";
  for (int i = 0; i < 65; ++i) rank65 += "1,";
  EXPECT_NE(header_error("{'descr': '<f4', 'fortran_order': False, 'shape': " + rank65 + ")}").find("more than 64"),
            std::string::npos);
  EXPECT_NE(header_error("").find("expected '{'"), std::string::npos);
}

TEST(Npy, ContentsAreCheckedBeforeAllocating) {
  const std::string hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': ";
  // A 144-byte file claiming 1.5 GB: refused from the file size, nothing allocated.
  const std::string big = npy_bytes(1, hdr + "(375000000,), }", std::string(16, '\0'));
  EXPECT_EQ(big.size(), 144u);
  EXPECT_EQ(npy_error(big), "truncated data: shape 375000000 of fp32 needs 1500000000 bytes, the file holds 16");
  // More than 2^63 bytes, and more than this machine's memory.
  EXPECT_NE(npy_error(npy_bytes(1, hdr + "(4611686018427387904, 4), }", "")).find("more than 2^63"), std::string::npos);
  EXPECT_NE(npy_error(npy_bytes(1, hdr + "(1099511627776, 1024), }", "")).find("the file holds 0"), std::string::npos);
  // Truncated data, trailing bytes, truncated header, bad magic, unknown version.
  EXPECT_NE(npy_error(npy_bytes(1, hdr + "(3,), }", std::string(11, '\0'))).find("needs 12 bytes, the file holds 11"),
            std::string::npos);
  EXPECT_EQ(npy_error(npy_bytes(1, hdr + "(3,), }", std::string(13, '\0'))), "1 trailing bytes after the data");
  EXPECT_NE(npy_error(npy_bytes(1, hdr + "(3,), }", "").substr(0, 40)).find("truncated header"), std::string::npos);
  EXPECT_NE(npy_error("\x93NUMPY\x01\x00").find("bad magic"), std::string::npos);
  EXPECT_NE(npy_error("\x93NUMPX\x01\x00\x00\x00").find("bad magic"), std::string::npos);
  EXPECT_NE(npy_error(npy_bytes(4, hdr + "(3,), }", std::string(12, '\0'))).find("unsupported .npy version 4"),
            std::string::npos);
  // Dtypes: unsupported, big-endian, bf16 bits only when bf16 is expected.
  EXPECT_NE(npy_error(npy_bytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", std::string(12, '\0')))
                .find("unsupported dtype '<i4'"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_bytes(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", std::string(12, '\0')))
                .find("unsupported dtype '>f4'"),
            std::string::npos);
  const std::string u2 = npy_bytes(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", std::string(6, '\0'));
  EXPECT_NE(npy_error(u2).find("bf16 is expected"), std::string::npos);
  EXPECT_EQ(npy_error(u2, DType::bf16), "<accepted>");
  EXPECT_NE(npy_error(u2, DType::fp16).find("bf16 is expected"), std::string::npos);
  EXPECT_NE(npy_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", std::string(12, '\0')))
                .find("fortran_order arrays are not supported"),
            std::string::npos);
}

TEST(Npy, PathsThatAreNotRegularFiles) {
  const fs::path d = tmpdir();
  auto message = [](const std::string& path) {
    try {
      read_npy(path);
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), path);
      return e.message();
    }
    return std::string("<accepted>");
  };
  EXPECT_EQ(message(d.string()), "is a directory, expected a file");
  const fs::path loop = d / "loop.npy";
  fs::create_symlink(loop, loop);
  EXPECT_NE(message(loop.string()).find("cannot open: "), std::string::npos);
  EXPECT_EQ(message((d / "missing.npy").string()), "cannot open: No such file or directory");
  EXPECT_EQ(message("/dev/null"), "is not a regular file");
  fs::remove_all(d);
}

// Huge-page advice covers only whole 2 MiB pages inside the region (never a
// neighbour's memory) and skips regions too small to hold one.
TEST(HostMemory, HugePageAdviceStaysInsideTheRegion) {
  constexpr std::size_t H = kgate::kHugePageAdviceBytes;
  void* block = std::aligned_alloc(H, 4 * H);
  ASSERT_NE(block, nullptr);
  auto* base = static_cast<unsigned char*>(block);
  EXPECT_EQ(kgate::advise_huge_pages(base, 4 * H), 4 * H);        // aligned: all of it
  EXPECT_EQ(kgate::advise_huge_pages(base + 1, 4 * H - 1), 3 * H);  // both ends cut to whole pages
  EXPECT_EQ(kgate::advise_huge_pages(base + 1, 2 * H), H);
  EXPECT_EQ(kgate::advise_huge_pages(base + 1, H + 1), 0u);         // no whole page inside
  EXPECT_EQ(kgate::advise_huge_pages(base, H - 1), 0u);             // too small to ask
  kgate::LargeVector<double> v(3 * H / sizeof(double), 1.5);        // the allocator advises and stores normally
  EXPECT_EQ(v.front() + v.back(), 3.0);
  std::free(block);
}

// The host block cache: a freed large block is what the next request of its
// size gets (resident, contents kept, no fresh mapping); a smaller request
// takes the head of a larger idle block and leaves the rest idle; idle
// neighbours merge; the budget bounds the idle bytes, unmapping the least
// recently freed first; small blocks are heap memory.
TEST(HostMemory, LargeBlocksAreReusedWithinTheBudget) {
  if (!kgate::host_cache_reuses()) GTEST_SKIP() << "AddressSanitizer build: every block is heap memory";
  constexpr std::size_t H = kgate::kHugePageAdviceBytes;
  kgate::host_cache_release();
  kgate::set_host_cache_budget(64 * H);
  const auto s0 = kgate::host_cache_stats();
  EXPECT_EQ(s0.idle_bytes, 0u);
  EXPECT_EQ(s0.budget_bytes, 64 * H);

  auto* a = static_cast<double*>(kgate::host_alloc(8 * H - 100));  // rounded up to 8 pages
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % H, 0u);
  a[0] = 7.0;
  kgate::host_free(a, 8 * H - 100);
  EXPECT_EQ(kgate::host_cache_stats().idle_bytes, 8 * H);
  auto* b = static_cast<double*>(kgate::host_alloc(8 * H));
  EXPECT_EQ(b, a);
  EXPECT_EQ(b[0], 7.0);  // the same resident page, not a fresh zeroed one
  auto s1 = kgate::host_cache_stats();
  EXPECT_EQ(s1.maps, s0.maps + 1);
  EXPECT_EQ(s1.reuses, s0.reuses + 1);
  EXPECT_EQ(s1.idle_bytes, 0u);

  // Head of a larger idle block; the tail stays idle and is handed out next.
  kgate::host_free(b, 8 * H);
  void* head = kgate::host_alloc(3 * H);
  EXPECT_EQ(head, static_cast<void*>(a));
  EXPECT_EQ(kgate::host_cache_stats().idle_bytes, 5 * H);
  void* tail = kgate::host_alloc(5 * H);
  EXPECT_EQ(tail, static_cast<void*>(reinterpret_cast<char*>(a) + 3 * H));
  // Freed in either order, the halves merge back into one block.
  kgate::host_free(tail, 5 * H);
  kgate::host_free(head, 3 * H);
  s1 = kgate::host_cache_stats();
  EXPECT_EQ(kgate::host_alloc(8 * H), static_cast<void*>(a));
  EXPECT_EQ(kgate::host_cache_stats().maps, s1.maps);
  kgate::host_free(a, 8 * H);

  // The budget: a second block of 8 pages under a budget of 12 evicts the
  // least recently freed one (a's).
  void* c = kgate::host_alloc(8 * H);  // a's block again
  kgate::set_host_cache_budget(12 * H);
  void* d = kgate::host_alloc(8 * H);
  kgate::host_free(c, 8 * H);
  kgate::host_free(d, 8 * H);
  EXPECT_EQ(kgate::host_cache_stats().idle_bytes, 8 * H);
  s1 = kgate::host_cache_stats();
  EXPECT_EQ(kgate::host_alloc(8 * H), d);  // c's block was unmapped, d's kept
  kgate::host_free(d, 8 * H);
  EXPECT_EQ(kgate::host_cache_stats().reuses, s1.reuses + 1);

  // A request no idle block holds first unmaps idle blocks of at least its
  // size, least recently freed first: three idle 4-page blocks (kept apart
  // by live ones) and a 6-page request leave only the newest idle.
  kgate::set_host_cache_budget(64 * H);
  kgate::host_cache_release();
  void* blk[3];
  void* sep[3];
  for (int i = 0; i < 3; ++i) {
    blk[i] = kgate::host_alloc(4 * H);
    sep[i] = kgate::host_alloc(H);
  }
  for (int i = 0; i < 3; ++i) kgate::host_free(blk[i], 4 * H);
  EXPECT_EQ(kgate::host_cache_stats().idle_bytes, 12 * H);
  void* big = kgate::host_alloc(6 * H);
  EXPECT_EQ(kgate::host_cache_stats().idle_bytes, 4 * H);
  s1 = kgate::host_cache_stats();
  EXPECT_EQ(kgate::host_alloc(4 * H), blk[2]);  // the newest survived
  EXPECT_EQ(kgate::host_cache_stats().reuses, s1.reuses + 1);
  kgate::host_free(blk[2], 4 * H);
  kgate::host_free(big, 6 * H);
  for (void* p : sep) kgate::host_free(p, H);

  // Budget 0: nothing is kept.
  kgate::set_host_cache_budget(0);
  EXPECT_EQ(kgate::host_cache_stats().idle_bytes, 0u);
  void* e = kgate::host_alloc(4 * H);
  kgate::host_free(e, 4 * H);
  EXPECT_EQ(kgate::host_cache_stats().idle_bytes, 0u);

  // Small blocks: heap memory, 64-byte aligned, never cached.
  void* f = kgate::host_alloc(100);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(f) % 64, 0u);
  kgate::host_free(f, 100);
  kgate::set_host_cache_budget(kgate::default_host_cache_budget());
  EXPECT_EQ(kgate::host_cache_stats().budget_bytes, kgate::default_host_cache_budget());
}

// Threads allocating and freeing large blocks at once each get memory no
// other thread holds (each writes its id over its block and reads it back).
TEST(HostMemory, ConcurrentLargeBlocksDoNotOverlap) {
  constexpr std::size_t H = kgate::kHugePageAdviceBytes;
  kgate::set_host_cache_budget(16 * H);
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([t, &bad] {
      for (int i = 0; i < 50; ++i) {
        const std::size_t n = (1 + (t + i) % 3) * H;
        auto* p = static_cast<unsigned char*>(kgate::host_alloc(n));
        std::memset(p, t + 1, n);
        std::this_thread::yield();
        for (std::size_t k = 0; k < n; k += 4096)
          if (p[k] != t + 1) ++bad;
        kgate::host_free(p, n);
      }
    });
  for (auto& th : ts) th.join();
  EXPECT_EQ(bad.load(), 0);
  kgate::set_host_cache_budget(kgate::default_host_cache_budget());
}

TEST(Tensor, TooBigForMemoryIsAnInputError) {
  EXPECT_THROW(Tensor(DType::fp64, {1LL << 20, 1LL << 20, 1LL << 10}), InputError);
  EXPECT_THROW(Tensor(DType::fp64, {1LL << 40, 1LL << 40}), InputError);  // overflows int64
}

}  // namespace
}  // namespace kgate
