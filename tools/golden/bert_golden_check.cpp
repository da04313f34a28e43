// ember's BERT against transformers' on the same weights and batch (the folder that
// tools/golden/torch_bert_golden.py writes: golden.safetensors and config.json), on the GPU: the
// encoder's hidden states, pooler output and sentence embeddings in float32 (tolerance 1e-4) and
// under bf16 autocast (2e-2), then one training step's loss and every gradient in float32 (1e-4).
//
// With --masked-lm MODEL_DIR REFERENCE: the masked-LM logits of a folder train_bert --task mlm
// saved, against those transformers computes after loading it
// (tools/golden/hf_masked_lm_reference.py), on the tokens the mask keeps, in float32 (1e-4).
//
// Prints a line per check and exits 1 when one fails:
//
//   PASS hidden f32 rel=3.1e-07 tol=1e-04
//
// An error is ||ember - torch|| / ||torch||; the gradient line gives the error over all
// gradients at once and the worst parameter's. The attention's key biases have a gradient of
// zero in exact arithmetic (a bias on every key shifts a query's scores alike, and softmax
// ignores that), so theirs are rounding on both sides and their relative error is near 1.
#include <cmath>
#include <cstdio>
#include <string>

#include <ember/core/autocast_mode.h>
#include <ember/ember.h>
#include <ember/examples/models/bert_model.h>
#include <ember/examples/models/bert_pretrained.h>

#include "golden_compare.h"

using namespace ember;
using golden_compare::f64;
using golden_compare::rel_error;
using golden_compare::report;

namespace {

bool check_masked_lm(const std::string& model_dir, const std::string& reference) {
  StateDict ref = load(reference);
  const auto& g = ref.tensors;
  models::BertForMaskedLM m(models::BertConfig::from_file(model_dir + "/config.json"));
  nn::IncompatibleKeys keys = models::load_pretrained(*m, model_dir);
  bool ok = keys.missing_keys.empty() && keys.unexpected_keys.empty();
  std::printf("%s load %s: %zu missing, %zu unexpected keys\n", ok ? "PASS" : "FAIL", model_dir.c_str(),
              keys.missing_keys.size(), keys.unexpected_keys.size());
  m->to(Device(kCUDA));
  m->eval();
  NoGradGuard no_grad;
  Tensor logits = m(g.at("input_ids").cuda(), g.at("attention_mask").cuda()).cpu();
  Tensor drop = g.at("attention_mask").eq(0).unsqueeze(-1);
  return report("masked-lm logits f32",
                rel_error(logits.masked_fill(drop, 0), g.at("logits").masked_fill(drop, 0)), 1e-4) &&
         ok;
}

}  // namespace

int main(int argc, char** argv) try {
  const bool masked_lm = argc == 4 && std::string(argv[1]) == "--masked-lm";
  if (argc != 2 && !masked_lm) {
    std::fprintf(stderr,
                 "usage: bert_golden_check DIR (golden.safetensors, config.json)\n"
                 "       bert_golden_check --masked-lm MODEL_DIR REFERENCE.safetensors\n");
    return 2;
  }
  EMBER_CHECK(cuda::is_available(), "bert_golden_check: needs a GPU");
  if (masked_lm) return check_masked_lm(argv[2], argv[3]) ? 0 : 1;
  const Device dev(kCUDA);
  const std::string dir = argv[1];
  StateDict golden = load(dir + "/golden.safetensors");
  const auto& g = golden.tensors;
  const OrderedDict<Tensor> weights = golden_compare::model_weights(golden);
  models::BertForSequenceClassification m(models::BertConfig::from_file(dir + "/config.json"), 3);
  nn::IncompatibleKeys keys = models::load_pretrained(*m, weights);
  bool ok = keys.missing_keys.empty() && keys.unexpected_keys.empty();
  std::printf("%s load: %zu missing, %zu unexpected keys\n", ok ? "PASS" : "FAIL", keys.missing_keys.size(),
              keys.unexpected_keys.size());
  m->to(dev);
  Tensor ids = g.at("input_ids").to(dev), mask = g.at("attention_mask").to(dev),
         labels = g.at("labels").to(dev);
  m->eval();
  {
    NoGradGuard no_grad;
    for (const std::string prec : {"f32", "bf16"}) {
      const double tol = prec == "f32" ? 1e-4 : 2e-2;
      models::BertOutput o;
      {
        amp::AutocastGuard autocast(kCUDA, kBFloat16, prec == "bf16");
        o = m->bert(ids, mask);
      }
      Tensor h = o.last_hidden_state.to(kFloat32);
      // Padded positions are free to differ: compare the tokens the mask keeps.
      Tensor keep = g.at("attention_mask").to(kBool).unsqueeze(-1);
      ok &= report("hidden " + prec,
                   rel_error(h.cpu().masked_fill(keep.logical_not(), 0),
                             g.at(prec + ".hidden").masked_fill(keep.logical_not(), 0)),
                   tol);
      ok &= report("pooler " + prec, rel_error(o.pooler_output.to(kFloat32), g.at(prec + ".pooler")), tol);
      ok &= report("embedding " + prec,
                   rel_error(models::sentence_embedding(h, mask), g.at(prec + ".embedding")), tol);
    }
  }
  m->train();
  Tensor loss = cross_entropy(m(ids.narrow(0, 0, 32), mask.narrow(0, 0, 32)), labels.narrow(0, 0, 32));
  loss.backward();
  ok &= report("step loss f32", rel_error(loss.reshape({1}), g.at("step.loss")), 1e-4);
  std::vector<Tensor> mine, theirs;
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, p] : m->named_parameters()) {
    const Tensor* want = g.find("step.grad." + name);
    if (!want) {
      std::printf("FAIL no torch gradient for %s\n", name.c_str());
      ok = false;
      continue;
    }
    mine.push_back(f64(p.grad()).flatten());
    theirs.push_back(f64(*want).flatten());
    const double e = rel_error(p.grad(), *want);
    if (!(e <= worst)) {
      worst = e;
      worst_name = name;
    }
  }
  ok &= report("step grads f32 (all)", rel_error(cat(mine), cat(theirs)), 1e-4,
               detail::str_cat(", worst ", worst, " (", worst_name, ")"));
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
