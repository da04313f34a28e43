#pragma once

#include "ember/core/dispatch.h"
#include "ember/core/generator.h"
#include "ember/core/tensor.h"

namespace ember {

// Random factories and in-place fills; `gen` defaults to the device's default generator.
// Element i of a draw is a function of (seed, offset, i) only: see core/philox.h.
Tensor rand(IntArrayRef sizes, TensorOptions options = {}, Generator* gen = nullptr);
Tensor randn(IntArrayRef sizes, TensorOptions options = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, TensorOptions options = kInt64,
               Generator* gen = nullptr);
Tensor rand_like(const Tensor& t, Generator* gen = nullptr);
Tensor randn_like(const Tensor& t, Generator* gen = nullptr);
Tensor randperm(int64_t n, TensorOptions options = kInt64, Generator* gen = nullptr);
Tensor bernoulli(const Tensor& p, Generator* gen = nullptr);
Tensor bernoulli(const Tensor& like, double p, Generator* gen = nullptr);

// The generator's state as 16 uint8 bytes (seed, then offset, little-endian), as
// torch.get_rng_state(); set_rng_state restores it, so a resumed run draws the same numbers.
Tensor get_rng_state(Generator* gen = nullptr);
void set_rng_state(const Tensor& state, Generator* gen = nullptr);

const Tensor& uniform_(const Tensor& t, double from = 0, double to = 1, Generator* gen = nullptr);
const Tensor& normal_(const Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);
const Tensor& bernoulli_(const Tensor& t, double p, Generator* gen = nullptr);

// The kernel family the random fills dispatch to (one per device).
enum class RandomKind : int8_t { Uniform, Normal, Bernoulli, Integer };
using RandomFn = void (*)(const Tensor& out, RandomKind kind, PhiloxState state, double a, double b);
extern DispatchStub<RandomFn> random_stub;

}  // namespace ember
