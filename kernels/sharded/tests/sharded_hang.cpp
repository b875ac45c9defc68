// Failure paths that end processes, run by ctest through expect_failure.sh:
//   hang   every rank but the last starts a sharded forward; the last never
//          joins (it waits for a message nobody sends): the watchdog (2 s)
//          must end the job with a report naming the rank and the phase.
//   die    the last rank dies (SIGKILL) before a sharded forward while the
//          others are in its halo exchange: mpirun must end the job non-zero
//          and name the dead rank; the survivors' watchdogs (20 s) are the
//          backstop if it does not.
#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "kernels/sharded/sharded.hpp"
#include "kernels/sharded/tests/sharded_check.hpp"
#include "kernels/sharded/watchdog.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"

using namespace kgate;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const bool die = argc > 1 && std::strcmp(argv[1], "die") == 0;
  const Problem p = parse_descriptor("conv3d.fwd fp32 n1 c2 k2 d8 h3 w3 kd3 p1");
  const sharded::Slabs slabs = sharded::even_slabs(8, n);
  const auto in = ref::make_inputs(p, parse_fill("signed", 1));
  const auto [a, b] = sharded::role_planes(p, Role::x, slabs, me);
  const Tensor x = sharded::d_planes(in.at(Role::x), a, b);
  sharded::Watchdog dog(die ? 20.0 : 2.0, me, die ? "sharded forward with a dead rank" : "a halo exchange nobody answers");
  if (die) {
    if (me == n - 1) std::raise(SIGKILL);
    (void)sharded::run(MPI_COMM_WORLD, p, slabs, {{Role::x, &x}, {Role::w, &in.at(Role::w)}},
                       sharded::test::reference_op());
    std::fprintf(stderr, "rank %d: the sharded forward returned although a rank died\n", me);
    MPI_Finalize();
    return 0;
  }
  if (me == n - 1) {
    // The last rank never joins: it waits for a message nobody sends.
    float buf = 0;
    MPI_Recv(&buf, 1, MPI_FLOAT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    (void)sharded::run(MPI_COMM_WORLD, p, slabs, {{Role::x, &x}, {Role::w, &in.at(Role::w)}},
                       sharded::test::reference_op());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::fprintf(stderr, "rank %d: the hang returned\n", me);
  MPI_Finalize();
  return 0;
}
