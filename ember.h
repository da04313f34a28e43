#pragma once

// The one header users include: all of ember's public API.

#include "ember/core/factories.h"
#include "ember/core/generator.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/attention.h"
#include "ember/core/ops/dropout.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/embedding.h"
#include "ember/core/ops/indexing.h"
#include "ember/core/ops/loss.h"
#include "ember/core/ops/normalization.h"
#include "ember/core/ops/scan.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/ops/softmax.h"
#include "ember/core/ops/sorting.h"
#include "ember/core/parallel.h"
#include "ember/core/random.h"
#include "ember/core/tensor.h"
#include "ember/core/tensor_index.h"
#include "ember/core/type_promotion.h"
#include "ember/cuda/device.h"
