// `kgate_mpi verify`: `kgate verify` spread over the ranks of
// MPI_COMM_WORLD. Every rank builds the same work list from the corpus; the
// problems are assigned to ranks deterministically (assign_ranks); each rank
// evaluates its share with --jobs threads; the results travel to rank 0 as
// their JSON form (tools/result_json.hpp), which prints the summary, runs the
// bitwise corpus and writes the one report -- equal to a single process's
// report apart from timings. Exit codes as kgate's, on every rank.
#pragma once

#include <vector>

#include "tools/verify.hpp"

namespace kgate {

// Rank of each problem of `work`: problems in decreasing cost (flops; ties by
// index), each to the rank with the least cost so far (ties: lowest rank). A
// function of the work list and the rank count alone.
std::vector<int> assign_ranks(const std::vector<Problem>& work, int ranks);

// Sets opt.distribute, opt.reports and opt.processes_label for MPI_COMM_WORLD
// (MPI must be initialised).
void distribute_over_mpi(VerifyOptions& opt);

}  // namespace kgate
