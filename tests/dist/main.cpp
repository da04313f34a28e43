// The dist suite's main: `--worker NAME` runs a worker program (dist_test_util.h), anything
// else runs the tests.
#include <iostream>

#include "dist_test_util.h"

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--worker") {
    int code = ember::testing::dist::run_worker(argv[2]);
    if (code < 0) std::cerr << argv[0] << ": no worker named " << argv[2] << "\n";
    return code < 0 ? 2 : code;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
