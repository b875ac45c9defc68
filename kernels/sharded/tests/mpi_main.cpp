// main() of the mpi GoogleTest executables: MPI around GoogleTest, and a
// watchdog per test (KGATE_MPI_TEST_TIMEOUT seconds, default 300) that turns
// a hang into a failure with a report (which rank, which test, which phase of
// the sharded code). Only rank 0 prints GoogleTest's progress; every rank
// prints its failures. Tests must make the same collective calls on every
// rank whatever their assertions find (check after gathering; use EXPECT).
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "kernels/sharded/watchdog.hpp"

namespace {

class WatchdogListener : public testing::EmptyTestEventListener {
 public:
  WatchdogListener(int rank, double seconds) : rank_(rank), seconds_(seconds) {}
  void OnTestStart(const testing::TestInfo& t) override {
    dog_ = std::make_unique<kgate::sharded::Watchdog>(seconds_, rank_,
                                                      std::string(t.test_suite_name()) + "." + t.name());
  }
  void OnTestEnd(const testing::TestInfo&) override { dog_.reset(); }
  // Ranks other than 0 have no result printer: their failures are printed here.
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (rank_ != 0 && r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.message());
  }

 private:
  int rank_;
  double seconds_;
  std::unique_ptr<kgate::sharded::Watchdog> dog_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* t = std::getenv("KGATE_MPI_TEST_TIMEOUT");
  const double seconds = t ? std::atof(t) : 300.0;
  auto& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new WatchdogListener(rank, seconds));
  const int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}
