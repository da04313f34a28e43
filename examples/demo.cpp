#include <ember/ember.h>
#include <iostream>
int main() {
  auto x = ember::arange(6).view({2, 3}).to(ember::kFloat32);
  std::cout << x * 2 + 1 << "\n" << ember::exp(x) << "\n";
}
