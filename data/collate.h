#pragma once

#include <vector>

#include "ember/data/dataset.h"

namespace ember::data {

// Field k of the batch is field k of every example stacked along a new first dim (torch's
// default_collate on tuples of tensors). int32 fields come out as int64, as Python ints do, so
// class labels are ready for the losses; bool and uint8 fields keep their dtype.
Example default_collate(std::vector<Example> examples);

// For token sequences of different lengths (Hugging Face's DataCollatorWithPadding): field 0 of
// every example is a 1-D tensor; they are padded with `padding_value` to the longest of the batch
// (dynamic padding) into [B, L], followed by the attention mask [B, L] (int64, 1 for a real token,
// 0 for padding) and then the other fields, stacked as default_collate stacks them. With
// pad_to_multiple_of (Hugging Face's option of that name), L is rounded up to a multiple of it:
// fewer distinct shapes, which a CUDA graph per shape (the trainers' --cuda-graphs) needs.
//   DataLoaderOptions().collate_fn([](std::vector<Example> e) { return pad_collate(std::move(e), pad_id); })
Example pad_collate(std::vector<Example> examples, int64_t padding_value, int64_t pad_to_multiple_of = 1);

}  // namespace ember::data
