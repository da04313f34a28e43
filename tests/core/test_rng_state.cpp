#include "test_util.h"

namespace ember::testing {

TEST(RngState, LayoutIsSeedThenOffsetLittleEndian) {
  Generator g(0x0102030405060708ull);
  g.set_state({0x0102030405060708ull, 0x1122});
  Tensor s = get_rng_state(&g);
  EXPECT_EQ(s.dtype(), kUInt8);
  ASSERT_EQ(s.numel(), 16);
  const uint8_t* p = s.data_ptr<uint8_t>();
  const uint8_t expected[16] = {8, 7, 6, 5, 4, 3, 2, 1, 0x22, 0x11, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(p[i], expected[i]) << "byte " << i;
}

TEST(RngState, RestoringReplaysTheSameDraws) {
  manual_seed(123);
  randn({5});  // advance the offset, so the saved state is not the seed's start
  Tensor state = get_rng_state();
  Tensor a = randn({4, 3});
  Tensor b = randint(0, 100, {7});
  randn({9});  // move on; restoring must undo this too
  set_rng_state(state);
  EXPECT_CLOSE(randn({4, 3}), a, Tolerance{0, 0});
  EXPECT_CLOSE(randint(0, 100, {7}), b, Tolerance{0, 0});

  // A private generator's state moves to another generator.
  Generator g1(7), g2(99);
  rand({2}, {}, &g1);
  set_rng_state(get_rng_state(&g1), &g2);
  EXPECT_CLOSE(rand({6}, {}, &g2), rand({6}, {}, &g1), Tolerance{0, 0});
  EXPECT_EQ(g2.initial_seed(), 7u);
}

TEST(RngState, RejectsMalformedState) {
  EXPECT_EMBER_ERROR(set_rng_state(zeros({16})), "set_rng_state", "uint8", "float32", "[16]");
  EXPECT_EMBER_ERROR(set_rng_state(zeros({15}, kUInt8)), "set_rng_state", "16 bytes", "[15]");
  EXPECT_EMBER_ERROR(set_rng_state(zeros({4, 4}, kUInt8)), "set_rng_state", "[4, 4]");
}

}  // namespace ember::testing
