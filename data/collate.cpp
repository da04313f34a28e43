#include "ember/data/collate.h"

#include "ember/core/ops/shape_ops.h"

namespace ember::data {

Example default_collate(std::vector<Example> examples) {
  EMBER_CHECK(!examples.empty(), "default_collate: got no examples");
  const Example& first = examples[0];
  for (size_t i = 0; i < examples.size(); ++i) {
    EMBER_CHECK(examples[i].size() == first.size(), "default_collate: example ", i, " has ",
                examples[i].size(), " fields, example 0 has ", first.size());
    for (size_t f = 0; f < first.size(); ++f) {
      const Tensor& t = examples[i][f];
      EMBER_CHECK(t.defined(), "default_collate: field ", f, " of example ", i, " is undefined");
      EMBER_CHECK(t.sizes().equals(first[f].sizes()) && t.dtype() == first[f].dtype(),
                  "default_collate: field ", f, " of example ", i, " is ", t.dtype(), " ", t.sizes(),
                  ", but in example 0 it is ", first[f].dtype(), " ", first[f].sizes(),
                  " (fields stack only when their shapes and dtypes match)");
    }
  }
  Example batch;
  std::vector<Tensor> column(examples.size());
  for (size_t f = 0; f < first.size(); ++f) {
    for (size_t i = 0; i < examples.size(); ++i) column[i] = std::move(examples[i][f]);
    Tensor stacked = stack(column);
    batch.push_back(stacked.dtype() == kInt32 ? stacked.to(kInt64) : stacked);
  }
  return batch;
}

}  // namespace ember::data
