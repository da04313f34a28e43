// A user's program against the installed package: builds, links, runs, checks one result.
#include <ember/ember.h>

int main() {
  ember::Tensor x = ember::ones({2, 3}) * 2;
  return (x + 1)[1][2].item<double>() == 3.0 ? 0 : 1;
}
