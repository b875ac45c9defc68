#include "tools/verify_mpi.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <numeric>
#include <thread>

#include "reference/error.hpp"
#include "tools/result_json.hpp"

namespace kgate {

std::vector<int> assign_ranks(const std::vector<Problem>& work, int ranks) {
  std::vector<std::size_t> order(work.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> cost(work.size());
  for (std::size_t i = 0; i < work.size(); ++i) cost[i] = flops(work[i]);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
  std::vector<double> load(static_cast<std::size_t>(ranks), 0.0);
  std::vector<int> owner(work.size(), 0);
  for (std::size_t i : order) {
    const auto r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = r;
    load[r] += cost[i];
  }
  return owner;
}

namespace {

std::optional<std::vector<gate::Result>> evaluate_on_ranks(const std::vector<Problem>& work,
                                                           const std::function<gate::Result(const Problem&)>& eval,
                                                           int jobs) {
  int me = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::vector<int> owner = assign_ranks(work, n);
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < work.size(); ++i)
    if (owner[i] == me) mine.push_back(i);

  // This rank's share on `jobs` threads; the first error stops it.
  std::vector<nlohmann::json> done(mine.size());
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::string error;
  auto worker = [&] {
    for (std::size_t k; (k = next++) < mine.size();) {
      try {
        done[k] = eval(work[mine[k]]).to_json();
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (error.empty()) error = "rank " + std::to_string(me) + ": " + e.what();
        next = mine.size();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < jobs; ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  nlohmann::json payload{{"error", error}, {"results", nlohmann::json::array()}};
  if (error.empty())
    for (std::size_t k = 0; k < mine.size(); ++k) payload["results"].push_back({mine[k], std::move(done[k])});
  const std::string text = payload.dump();
  int len = static_cast<int>(text.size());
  std::vector<int> lens(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (me == 0) {
    std::int64_t total = 0;
    for (int r = 0; r < n; ++r) {
      displs[r] = static_cast<int>(total);
      total += lens[r];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);

  std::vector<gate::Result> results;
  std::string first_error;
  if (me == 0) {
    results.resize(work.size());
    for (int r = 0; r < n; ++r) {
      const auto j = nlohmann::json::parse(all.substr(displs[r], lens[r]));
      if (first_error.empty()) first_error = j.at("error").get<std::string>();
      for (const auto& e : j.at("results")) results.at(e.at(0).get<std::size_t>()) = gate::result_from_json(e.at(1));
    }
  }
  // Every rank learns whether some rank failed, and fails the same way.
  int elen = static_cast<int>(first_error.size());
  MPI_Bcast(&elen, 1, MPI_INT, 0, MPI_COMM_WORLD);
  first_error.resize(static_cast<std::size_t>(elen));
  MPI_Bcast(first_error.data(), elen, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (!first_error.empty()) throw InputError("verify", first_error);
  if (me != 0) return std::nullopt;
  for (const auto& r : results)
    if (gate::is_failure(r.state))
      std::cout << oracle::name(r.state) << " " << r.descriptor << " (rank " << owner[&r - results.data()]
                << ")\n    repro: " << r.repro() << "\n";
  return results;
}

}  // namespace

void distribute_over_mpi(VerifyOptions& opt) {
  int me = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  opt.reports = me == 0;
  opt.processes_label = " on each of " + std::to_string(n) + " MPI rank(s)";
  const int jobs = opt.jobs;
  opt.distribute = [jobs](const std::vector<Problem>& work, const std::function<gate::Result(const Problem&)>& eval) {
    return evaluate_on_ranks(work, eval, jobs);
  };
}

}  // namespace kgate
