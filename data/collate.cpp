#include "ember/data/collate.h"

#include <algorithm>
#include <iterator>

#include "ember/core/factories.h"
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

Example pad_collate(std::vector<Example> examples, int64_t padding_value, int64_t pad_to_multiple_of) {
  EMBER_CHECK(!examples.empty(), "pad_collate: got no examples");
  EMBER_CHECK(pad_to_multiple_of >= 1, "pad_collate: pad_to_multiple_of must be positive, got ",
              pad_to_multiple_of);
  int64_t longest = 0;
  for (size_t i = 0; i < examples.size(); ++i) {
    EMBER_CHECK(!examples[i].empty() && examples[i][0].defined() && examples[i][0].dim() == 1,
                "pad_collate: field 0 of example ", i, " must be a 1-D sequence, got ",
                examples[i].empty() || !examples[i][0].defined()
                    ? std::string("nothing")
                    : ember::detail::str_cat(examples[i][0].sizes()));
    EMBER_CHECK(examples[i][0].dtype() == examples[0][0].dtype(), "pad_collate: sequence ", i, " is ",
                examples[i][0].dtype(), ", sequence 0 is ", examples[0][0].dtype());
    longest = std::max(longest, examples[i][0].size(0));
  }
  longest = (longest + pad_to_multiple_of - 1) / pad_to_multiple_of * pad_to_multiple_of;
  const auto n = static_cast<int64_t>(examples.size());
  Tensor ids = full({n, longest}, padding_value, TensorOptions(examples[0][0].dtype()));
  Tensor mask = zeros({n, longest}, TensorOptions(kInt64));
  std::vector<Example> rest(examples.size());
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& seq = examples[i][0];
    ids[i].narrow(0, 0, seq.size(0)).copy_(seq);
    mask[i].narrow(0, 0, seq.size(0)).fill_(1);
    rest[i].assign(std::make_move_iterator(examples[i].begin() + 1),
                   std::make_move_iterator(examples[i].end()));
  }
  Example batch{ids.dtype() == kInt32 ? ids.to(kInt64) : ids, mask};
  if (!rest[0].empty())
    for (Tensor& t : default_collate(std::move(rest))) batch.push_back(std::move(t));
  return batch;
}

}  // namespace ember::data
