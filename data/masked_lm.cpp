#include "ember/data/masked_lm.h"

#include <algorithm>

#include "ember/core/factories.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/data/collate.h"
#include "ember/data/sample_random.h"

namespace ember::data {

MaskedLMDataset::MaskedLMDataset(std::shared_ptr<const Dataset> dataset, MaskedLMOptions options,
                                 uint64_t seed)
    : dataset_(std::move(dataset)), options_(std::move(options)), seed_(seed) {
  const MaskedLMOptions& o = options_;
  EMBER_CHECK(dataset_, "MaskedLMDataset: the dataset is null");
  EMBER_CHECK(o.vocab_size > 0, "MaskedLMDataset: vocab_size must be positive, got ", o.vocab_size);
  EMBER_CHECK(o.mask_token_id >= 0 && o.mask_token_id < o.vocab_size, "MaskedLMDataset: mask_token_id ",
              o.mask_token_id, " is outside the vocabulary [0, ", o.vocab_size, ")");
  EMBER_CHECK(o.mlm_probability > 0 && o.mlm_probability <= 1,
              "MaskedLMDataset: mlm_probability must be in (0, 1], got ", o.mlm_probability);
  EMBER_CHECK(o.mask_replace_prob >= 0 && o.random_replace_prob >= 0 &&
                  o.mask_replace_prob + o.random_replace_prob <= 1,
              "MaskedLMDataset: mask_replace_prob ", o.mask_replace_prob, " and random_replace_prob ",
              o.random_replace_prob, " must be non-negative with a sum of at most 1");
}

MaskedLMDataset::MaskedLMDataset(const MaskedLMDataset& other)
    : dataset_(other.dataset_),
      options_(other.options_),
      seed_(other.seed_),
      epoch_(other.epoch_.load(std::memory_order_relaxed)) {}

Example MaskedLMDataset::get(int64_t index) const {
  index = detail::wrap_index("MaskedLMDataset", index, size());
  Example sample = dataset_->get(index);
  EMBER_CHECK(!sample.empty() && sample[0].defined() && sample[0].dim() == 1 && sample[0].dtype() == kInt64,
              "MaskedLMDataset: field 0 of sample ", index, " must be an int64 sequence [L]");
  Tensor ids = sample[0].contiguous().clone();
  int64_t* p = ids.data_ptr<int64_t>();
  const int64_t n = ids.numel();
  const auto& special = options_.special_token_ids;
  std::vector<int64_t> candidates;
  for (int64_t i = 0; i < n; ++i)
    if (std::find(special.begin(), special.end(), p[i]) == special.end()) candidates.push_back(i);

  transforms::SampleRandom random(seed_, epoch_.load(std::memory_order_relaxed), index);
  std::vector<int64_t> positions, labels;
  for (int64_t i : candidates)
    if (random.uniform() < options_.mlm_probability) positions.push_back(i);
  // A sample with nothing chosen would add nothing to the loss; a batch of them, a 0/0.
  if (positions.empty() && !candidates.empty())
    positions.push_back(
        candidates[static_cast<size_t>(random.randint(static_cast<int64_t>(candidates.size())))]);
  for (int64_t i : positions) {
    labels.push_back(p[i]);
    const double r = random.uniform();
    if (r < options_.mask_replace_prob)
      p[i] = options_.mask_token_id;
    else if (r < options_.mask_replace_prob + options_.random_replace_prob)
      p[i] = random.randint(options_.vocab_size);
  }
  return {ids, tensor(positions, kInt64), tensor(labels, kInt64)};
}

void MaskedLMDataset::set_epoch(int64_t epoch) const {
  epoch_.store(epoch, std::memory_order_relaxed);
  dataset_->set_epoch(epoch);
}

Example masked_lm_collate(std::vector<Example> examples, int64_t padding_value, int64_t pad_to_multiple_of) {
  EMBER_CHECK(!examples.empty(), "masked_lm_collate: got no examples");
  std::vector<Tensor> positions, labels;
  for (size_t i = 0; i < examples.size(); ++i) {
    EMBER_CHECK(examples[i].size() == 3, "masked_lm_collate: example ", i,
                " must be (input ids, positions, labels) as MaskedLMDataset gives, got ", examples[i].size(),
                " fields");
    positions.push_back(std::move(examples[i][1]));
    labels.push_back(std::move(examples[i][2]));
    examples[i].resize(1);
  }
  Example batch = pad_collate(std::move(examples), padding_value, pad_to_multiple_of);
  const int64_t width = batch[0].size(1);
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = positions[i] + static_cast<int64_t>(i) * width;
  batch.push_back(cat(positions));
  batch.push_back(cat(labels));
  return batch;
}

}  // namespace ember::data
