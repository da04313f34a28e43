#pragma once

// A stream of samples (torch.utils.data.IterableDataset), for data read as it comes (the lines of
// a file, a generator) rather than by index. iter() starts a pass: the function it returns gives
// the next sample at each call and std::nullopt at the end. A DataLoader calls iter() at each epoch
// in each worker thread (in the loop's thread without workers), so every worker sees the whole
// stream unless the dataset takes a share by get_worker_info(), as in PyTorch.
//
//   struct Counter : data::IterableDataset {
//     data::SampleGenerator iter() const override {
//       return [i = int64_t{0}]() mutable -> std::optional<data::Example> {
//         if (i == 10) return std::nullopt;
//         return data::Example{full({}, i++)};
//       };
//     }
//   };

#include <cstdint>
#include <functional>
#include <optional>

#include "ember/data/dataset.h"

namespace ember::data {

using SampleGenerator = std::function<std::optional<Example>()>;

class IterableDataset {
 public:
  virtual ~IterableDataset() = default;
  // A new pass over the samples. May be called from several threads at once.
  virtual SampleGenerator iter() const = 0;
  // Called before each epoch's passes start, as Dataset::set_epoch.
  virtual void set_epoch(int64_t epoch) const { (void)epoch; }
};

}  // namespace ember::data
