#pragma once

// Loading Hugging Face BERT weights (a transformers state_dict, as model.safetensors holds it)
// into the models of bert_model.h, as transformers' from_pretrained does:
// - a checkpoint of the bare encoder (keys "embeddings...", as all-MiniLM-L6-v2's) loads into the
//   `bert` of a task model, and a task model's checkpoint ("bert.embeddings...") into a BertModel;
// - tied weights left out of the file (cls.predictions.decoder.weight) are taken from the tensor
//   they are tied to;
// - legacy LayerNorm names (gamma, beta) are read as weight and bias, and the buffer
//   embeddings.position_ids is ignored;
// - floating point values are converted to the model's dtype.
// Missing keys (the model's names) and unexpected keys (the file's names) are returned, as
// torch's load_state_dict(strict=False) reports them; a tensor of the wrong shape is an error
// naming the key and both shapes, and then nothing is copied.
//
//   models::BertForSequenceClassification model(config, 3);
//   auto keys = models::load_pretrained(*model, "all-MiniLM-L6-v2");  // missing: classifier.*
//
// save_pretrained writes the folder transformers' from_pretrained reads.
#include <string>
#include <vector>

#include <ember/ember.h>

#include "ember/examples/models/bert_config.h"

namespace ember::models {

// `state` holds transformers' names; errors start with "load_pretrained".
nn::IncompatibleKeys load_pretrained(nn::Module& model, const OrderedDict<Tensor>& state);
// `path` is a safetensors file or a directory holding model.safetensors; errors name the file.
nn::IncompatibleKeys load_pretrained(nn::Module& model, const std::string& path);

// Writes dir/config.json (with `architecture`, e.g. "BertForMaskedLM") and dir/model.safetensors
// as transformers' save_pretrained does: float32 CPU copies, the "format": "pt" metadata
// transformers requires, and tied weights once (cls.predictions.decoder.* are left out; the
// loader ties them again). Each file is written atomically; `dir` is created.
// `labels`: a classifier's label names, for config.json's id2label.
void save_pretrained(nn::Module& model, const BertConfig& config, const std::string& architecture,
                     const std::string& dir, const std::vector<std::string>& labels = {});

}  // namespace ember::models
