// Sequential, ModuleList and ModuleDict: forward chaining, indexing, naming, errors.
#include "ember/nn/activation.h"
#include "ember/nn/container.h"
#include "ember/nn/linear.h"
#include "nn_test_util.h"

namespace ember::testing {
namespace {

namespace nn = ember::nn;

TEST(NnSequential, ChainsForwardAndIndexes) {
  nn::Sequential seq(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2));
  Tensor x = randn({5, 3});
  auto first = seq->ptr<nn::LinearImpl>(0);
  auto last = seq->ptr<nn::LinearImpl>(-1);
  EXPECT_CLOSE(seq(x), last->forward(first->forward(x).relu()));
  EXPECT_EQ(seq->size(), 3u);
  EXPECT_EQ(seq[1]->name(), "ReLU");
  EXPECT_EQ(&seq->at<nn::LinearImpl>(2), last.get());
  // state_dict keys: nn.Sequential(nn.Linear(3,4), nn.ReLU(), nn.Linear(4,2)).state_dict().keys()
  EXPECT_EQ(keys_of(seq->state_dict()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  // push_back, named or not; a shared_ptr works as well as a holder.
  seq->push_back("out", nn::Sigmoid());
  seq->push_back(std::make_shared<nn::TanhImpl>());
  EXPECT_EQ(seq->named_children().keys(), (std::vector<std::string>{"0", "1", "2", "out", "4"}));
  EXPECT_CLOSE(seq(x), last->forward(first->forward(x).relu()).sigmoid().tanh());
  // Empty, it passes its input through (as PyTorch's).
  nn::Sequential empty;
  EXPECT_TRUE(empty(x).is_same(x));
  EXPECT_TRUE(empty->is_empty());
  // Nested.
  nn::Sequential outer(seq, nn::Identity());
  EXPECT_EQ(keys_of(outer->state_dict())[0], "0.0.weight");
  EXPECT_CLOSE(outer(x), seq(x));
}

TEST(NnSequential, Errors) {
  nn::Sequential seq(nn::Linear(3, 4), nn::ReLU());
  EXPECT_EMBER_ERROR(seq[2], "Sequential: index 2 is out of range for 2 modules");
  EXPECT_EMBER_ERROR(seq[-3], "Sequential: index -3 is out of range");
  EXPECT_EMBER_ERROR(seq->ptr<nn::LinearImpl>(1), "Sequential: module 1 is a ReLU, not the type asked for");
  EXPECT_EMBER_ERROR(seq->push_back("0", nn::ReLU()),
                     "register_module: \"0\" is already a submodule of Sequential");
  EXPECT_EQ(seq->size(), 2u);  // the failed push_back left nothing behind
  // A layer's own error surfaces unchanged.
  EXPECT_EMBER_ERROR(seq(randn({2, 5})), "Linear: input has 5 features, expected 3");
}

TEST(NnModuleList, HoldsModulesByPosition) {
  nn::ModuleList list(nn::Linear(2, 2), nn::Linear(2, 3));
  list->push_back(nn::ReLU());
  EXPECT_EQ(list->size(), 3u);
  EXPECT_EQ(keys_of(list->state_dict()),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
  int64_t linears = 0;
  for (const auto& m : *list) linears += dynamic_cast<nn::LinearImpl*>(m.get()) != nullptr;
  EXPECT_EQ(linears, 2);
  EXPECT_EQ(list->at<nn::LinearImpl>(1).options.out_features(), 3);
  EXPECT_EMBER_ERROR(list[5], "ModuleList: index 5 is out of range for 3 modules");
}

TEST(NnModuleDict, HoldsModulesByKey) {
  nn::ModuleDict dict(std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{
      {"encoder", nn::Linear(4, 2).ptr()}, {"act", nn::ReLU().ptr()}});
  dict->insert("decoder", nn::Linear(2, 4));
  EXPECT_EQ(dict->keys(), (std::vector<std::string>{"encoder", "act", "decoder"}));
  EXPECT_EQ(dict->size(), 3u);
  EXPECT_TRUE(dict->contains("act"));
  EXPECT_FALSE(dict->contains("missing"));
  EXPECT_EQ(dict["act"]->name(), "ReLU");
  EXPECT_EQ(dict->values()[2].get(), dict["decoder"].get());
  EXPECT_EQ(dict->at<nn::LinearImpl>("decoder").options.in_features(), 2);
  EXPECT_EQ(keys_of(dict->state_dict()),
            (std::vector<std::string>{"encoder.weight", "encoder.bias", "decoder.weight", "decoder.bias"}));
  EXPECT_EMBER_ERROR(dict["missing"], "ModuleDict: no module \"missing\"");
  EXPECT_EMBER_ERROR(dict->ptr<nn::LinearImpl>("act"),
                     "ModuleDict: module \"act\" is a ReLU, not the type asked for");
  EXPECT_EMBER_ERROR(dict->insert("act", nn::ReLU()), "\"act\" is already a submodule");
  EXPECT_EMBER_ERROR(dict->insert("a.b", nn::ReLU()), "must not contain a dot");
  EXPECT_EQ(dict->size(), 3u);
}

}  // namespace
}  // namespace ember::testing
