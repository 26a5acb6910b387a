// The processes of one data-parallel training run. Under `mpirun -np N` (Open MPI, or any MPI
// whose launcher sets PMI/PMIx variables) each process is one rank of N; started any other way,
// a process is rank 0 of 1 and MPI is never initialized. kael built without MPI refuses a launch
// by mpirun with N > 1 (world() says so).
#pragma once

namespace kael::train {

struct WorldInfo {
  int rank = 0;
  int size = 1;
  int local_size = 1;  // ranks on this machine (they share its cores)
  bool mpi = false;    // true when MPI was initialized for this process
};

// This process's place, initializing MPI on the first call under mpirun. Error when launched
// with several ranks by a kael built without MPI, or when MPI cannot start.
WorldInfo world();

}  // namespace kael::train
