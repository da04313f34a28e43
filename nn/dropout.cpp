#include "ember/nn/dropout.h"

#include "ember/core/ops/dropout.h"

namespace ember::nn {

DropoutImpl::DropoutImpl(const DropoutOptions& options_) : Module("Dropout"), options(options_) {
  EMBER_CHECK(options.p() >= 0 && options.p() <= 1,
              "Dropout: dropout probability has to be between 0 and 1, got ", options.p());
}

Tensor DropoutImpl::forward(const Tensor& input) { return dropout(input, options.p(), is_training()); }

std::string DropoutImpl::extra_repr() const { return ember::detail::str_cat("p=", options.p()); }

}  // namespace ember::nn
