#include "ember/core/parallel.h"

#include "ember/core/error.h"

namespace ember {

int get_num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void set_num_threads(int n) {
  EMBER_CHECK(n > 0, "set_num_threads: expected a positive number of threads, got ", n);
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
}

}  // namespace ember
