#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "ember/data/dataset.h"

namespace ember::data {

// BERT's masking for masked-language-model training (Hugging Face's
// DataCollatorForLanguageModeling), drawn per sample so that a batch does not depend on the
// worker that builds it and a resumed run masks what the first run masked.
struct MaskedLMOptions {
  int64_t mask_token_id = -1;              // [MASK]
  int64_t vocab_size = 0;                  // random replacements are drawn from [0, vocab_size)
  std::vector<int64_t> special_token_ids;  // never masked: [CLS], [SEP], [PAD], ...
  double mlm_probability = 0.15;           // share of the other tokens chosen for prediction
  double mask_replace_prob = 0.8;          // of those: [MASK] ...
  double random_replace_prob = 0.1;        // ... a random token; the rest are kept as they are
};

// Sample i of `dataset` (field 0: an int64 token sequence [L]) with dynamic masking: each token
// that is not special is chosen with probability mlm_probability (at least one per sample that has
// any), and a chosen token becomes [MASK], a random token or stays, 80/10/10. The draws come from
// SampleRandom(seed, epoch, i). Returns (input ids [L], positions [M], labels [M]): the chosen
// positions in increasing order and their original ids. Other fields of the sample are dropped.
class MaskedLMDataset : public Dataset {
 public:
  MaskedLMDataset(std::shared_ptr<const Dataset> dataset, MaskedLMOptions options, uint64_t seed = 0);
  MaskedLMDataset(const MaskedLMDataset& other);

  int64_t size() const override { return dataset_->size(); }
  Example get(int64_t index) const override;  // negative indices count from the end
  void set_epoch(int64_t epoch) const override;

 private:
  std::shared_ptr<const Dataset> dataset_;
  MaskedLMOptions options_;
  uint64_t seed_;
  mutable std::atomic<int64_t> epoch_{0};
};

// Batches MaskedLMDataset's samples: (input ids [B, L] padded with padding_value, attention mask
// [B, L] int64, positions [M] into the flattened [B * L] tokens, labels [M]). The positions are
// what BertForMaskedLM takes as masked_positions: only those tokens go through the vocabulary
// projection, and the loss is cross_entropy(logits [M, V], labels). L is rounded up to a multiple
// of pad_to_multiple_of, as pad_collate's.
Example masked_lm_collate(std::vector<Example> examples, int64_t padding_value,
                          int64_t pad_to_multiple_of = 1);

}  // namespace ember::data
