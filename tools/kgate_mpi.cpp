// kgate_mpi: `kgate verify` spread over MPI ranks (tools/verify_mpi.hpp).
//   mpirun -np 4 kgate_mpi verify [the options of kgate verify]
// Rank 0 prints and writes the report; exit codes as kgate's (0 passed,
// 1 a verification failed, 2 bad input), the same on every rank.
#include <mpi.h>

#include <iostream>

#include <CLI/CLI.hpp>

#include "reference/error.hpp"
#include "tools/bitwise_cmd.hpp"
#include "tools/verify_mpi.hpp"

using namespace kgate;

namespace {

int run(int argc, char** argv, int rank) {
  CLI::App app{"kgate_mpi: kgate verify over the ranks of an MPI job"};
  app.require_subcommand(1);
  VerifyOptions vopt;
  vopt.corpus = verify_default_corpus();
  vopt.bitwise = bitwise_default_path();
  auto* verify = app.add_subcommand("verify", "Run the gate over the corpus, spread over the ranks");
  add_verify_options(*verify, vopt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank != 0) return e.get_exit_code() == 0 ? 0 : 2;
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    distribute_over_mpi(vopt);
    if (rank != 0) vopt.report = vopt.junit = "";
    return run_verify(vopt);
  } catch (const InputError& e) {
    if (rank == 0) std::cerr << "kgate_mpi: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "kgate_mpi: error: out of memory (rank " << rank << ")\n";
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int rc = run(argc, argv, rank);
  MPI_Finalize();
  return rc;
}
