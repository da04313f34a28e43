#pragma once

#include <vector>

#include "ember/data/dataset.h"

namespace ember::data {

// Field k of the batch is field k of every example stacked along a new first dim (torch's
// default_collate on tuples of tensors). int32 fields come out as int64, as Python ints do, so
// class labels are ready for the losses; bool and uint8 fields keep their dtype.
Example default_collate(std::vector<Example> examples);

}  // namespace ember::data
