#include <nlohmann/json.hpp>

#include "kael/train/run.hpp"

namespace kael::train {

std::string record_json(const Record& record) {
  nlohmann::ordered_json doc;
  if (record.kind == Record::Kind::step) {
    doc["type"] = "step";
    doc["step"] = record.step;
    doc["total_steps"] = record.total_steps;
    doc["loss"] = record.loss;
    doc["lr"] = record.lr;
    doc["grad_norm"] = record.grad_norm;
    doc["tokens_per_s"] = record.tokens_per_s;
    doc["step_s"] = record.step_s;
    doc["cpu_s"] = record.cpu_s;
    doc["epoch"] = record.epoch;
    if (record.reduce_wait_s) doc["reduce_wait_s"] = *record.reduce_wait_s;
  } else {
    doc["type"] = "eval";
    doc["step"] = record.step;
    doc["val_loss"] = record.val_loss;
  }
  doc["elapsed_s"] = record.elapsed_s;
  return doc.dump();
}

}  // namespace kael::train
