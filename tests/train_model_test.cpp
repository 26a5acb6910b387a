// TrainableGPT2 and AdamW as a whole on tiny configs: names and initialization, loading,
// gradients against finite differences of evaluate(), accumulation, thread independence,
// dropout streams, clipping, AdamW against its formula and a bit-exact resume, bad calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/train/adamw.hpp"
#include "kael/train/gpt2_train.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::train {
namespace {

model::Config tiny_config(bool tied = true) {
  model::Config c;
  c.n_layer = 2;
  c.n_head = 3;
  c.n_embd = 24;
  c.n_positions = 40;
  c.vocab_size = 53;
  c.n_inner = 40;
  c.tie_word_embeddings = tied;
  return c;
}

struct Batch {
  std::vector<std::int32_t> inputs, targets;
};

Batch random_batch(int B, int T, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  Batch b;
  for (int i = 0; i < B * T; ++i) {
    b.inputs.push_back(static_cast<std::int32_t>(rng() % vocab));
    b.targets.push_back(static_cast<std::int32_t>(rng() % vocab));
  }
  return b;
}

// Every parameter's gradient (or value), concatenated in order.
std::vector<float> concatenated(const TrainableGPT2& m, float* Parameter::*field) {
  std::vector<float> out;
  for (const Parameter& p : m.parameters()) out.insert(out.end(), p.*field, p.*field + p.numel);
  return out;
}
std::vector<float> all_grads(const TrainableGPT2& m) { return concatenated(m, &Parameter::grad); }
std::vector<float> all_values(const TrainableGPT2& m) { return concatenated(m, &Parameter::data); }

// A model whose weights are larger than GPT-2's init, so every path carries gradient.
TrainableGPT2 lively_model(bool tied = true) {
  TrainableGPT2 m = TrainableGPT2::init(tiny_config(tied), 7);
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  for (Parameter& p : m.parameters())
    for (std::int64_t i = 0; i < p.numel; ++i) p.data[i] += noise(rng);
  return m;
}

TEST(TrainModel, NamesShapesAndInitialization) {
  model::Config c = tiny_config(false);
  c.n_layer = 4;
  c.n_embd = 96;
  c.n_head = 4;
  c.vocab_size = 2000;
  TrainableGPT2 m = TrainableGPT2::init(c, 1);
  const auto params = m.parameters();
  ASSERT_EQ(params.size(), 2u + 12u * 4 + 2 + 1);
  EXPECT_EQ(params.front().name, "transformer.wte.weight");
  EXPECT_EQ(params[2].name, "transformer.h.0.ln_1.weight");
  EXPECT_EQ(params[4].name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(params[4].shape, (Shape{96, 288}));  // Conv1D (in, out)
  EXPECT_EQ(params.back().name, "lm_head.weight");
  std::int64_t total = 0;
  for (const Parameter& p : params) {
    total += p.numel;
    EXPECT_EQ(p.weight_decay, p.shape.size() >= 2) << p.name;
    double sum = 0, sq = 0;
    for (std::int64_t i = 0; i < p.numel; ++i) {
      sum += p.data[i];
      sq += double{p.data[i]} * p.data[i];
    }
    const double mean = sum / p.numel, std = std::sqrt(sq / p.numel - mean * mean);
    if (p.shape.size() >= 2) {
      const double want = p.name.ends_with("c_proj.weight") ? 0.02 / std::sqrt(8.0) : 0.02;
      EXPECT_NEAR(std, want, 0.1 * want) << p.name;
      EXPECT_NEAR(mean, 0.0, 0.05 * want) << p.name;
    } else {
      const bool ln_weight = p.name.find("ln_") != std::string::npos && p.name.ends_with(".weight");
      EXPECT_EQ(mean, ln_weight ? 1.0 : 0.0) << p.name;
      EXPECT_EQ(std, 0.0) << p.name;
    }
  }
  EXPECT_EQ(total, m.parameter_count());
  // Seeded: the same seed draws the same weights, another seed others.
  EXPECT_EQ(TrainableGPT2::init(c, 1).parameters()[0].data[5], params[0].data[5]);
  EXPECT_NE(TrainableGPT2::init(c, 2).parameters()[0].data[5], params[0].data[5]);
}

TEST(TrainModel, LoadsCheckpointTensorsByName) {
  const model::Config c = tiny_config(false);
  TrainableGPT2 source = lively_model(false);
  std::map<std::string, Tensor> tensors;
  for (const Parameter& p : source.parameters()) {
    Tensor t = Tensor::zeros(DType::F32, p.shape);
    std::copy(p.data, p.data + p.numel, t.data<float>());
    tensors[p.name] = t;
  }
  TrainableGPT2 loaded = TrainableGPT2::from_tensors(c, tensors);
  for (std::size_t i = 0; i < loaded.parameters().size(); ++i) {
    const Parameter& a = loaded.parameters()[i];
    const Parameter& b = source.parameters()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_TRUE(std::equal(a.data, a.data + a.numel, b.data)) << a.name;
  }
  tensors.erase("lm_head.weight");
  EXPECT_THROW(TrainableGPT2::from_tensors(c, tensors), Error);
}

TEST(TrainModel, GradientsMatchFiniteDifferencesOfTheLoss) {
  for (bool tied : {true, false}) {
    TrainableGPT2 m = lively_model(tied);
    const int B = 2, T = 9;
    Batch b = random_batch(B, T, 53, 5);
    b.targets[3] = kIgnoreTarget;
    m.zero_grad();
    m.forward_backward(b.inputs.data(), b.targets.data(), B, T, 1.0f);
    std::mt19937 rng(11);
    for (Parameter& p : m.parameters()) {
      for (int trial = 0; trial < 3; ++trial) {
        // wpe rows past T and wte rows of unseen tokens have no gradient; probe used ones.
        std::int64_t i = static_cast<std::int64_t>(rng() % static_cast<unsigned>(p.numel));
        if (p.name == "transformer.wpe.weight") i %= T * 24;
        const float saved = p.data[i], h = 1e-2f;
        p.data[i] = saved + h;
        const double up = m.evaluate(b.inputs.data(), b.targets.data(), B, T);
        p.data[i] = saved - h;
        const double down = m.evaluate(b.inputs.data(), b.targets.data(), B, T);
        p.data[i] = saved;
        const double numeric = (up - down) / (2.0 * h);
        EXPECT_NEAR(p.grad[i], numeric, 2e-3 + 0.03 * std::abs(numeric)) << p.name << "[" << i << "] tied " << tied;
      }
    }
  }
}

TEST(TrainModel, AccumulatedMicroBatchesEqualOneBatch) {
  TrainableGPT2 m = lively_model();
  const int T = 11;
  const Batch b = random_batch(2, T, 53, 9);
  m.zero_grad();
  const float loss = m.forward_backward(b.inputs.data(), b.targets.data(), 2, T, 1.0f);
  const std::vector<float> whole = all_grads(m);
  m.zero_grad();
  const float first = m.forward_backward(b.inputs.data(), b.targets.data(), 1, T, 0.5f);
  const float second = m.forward_backward(b.inputs.data() + T, b.targets.data() + T, 1, T, 0.5f);
  EXPECT_NEAR((first + second) / 2, loss, 1e-6);
  const std::vector<float> accumulated = all_grads(m);
  for (std::size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(accumulated[i], whole[i], 1e-6) << i;
}

TEST(TrainModel, ResultsDoNotDependOnTheThreadCount) {
  TrainableGPT2 m = lively_model();
  m.set_dropout({0.2f, 4});
  const Batch b = random_batch(3, 17, 53, 2);
  std::vector<float> grads[2];
  float losses[2];
  for (int threads : {1, 2}) {
    kernels::set_num_threads(threads);
    m.zero_grad();
    m.set_dropout_counter(0);
    losses[threads - 1] = m.forward_backward(b.inputs.data(), b.targets.data(), 3, 17, 1.0f);
    grads[threads - 1] = all_grads(m);
  }
  kernels::set_num_threads(0);
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_EQ(grads[0], grads[1]);
}

TEST(TrainModel, DropoutIsSeededPerCallAndResumable) {
  TrainableGPT2 m = lively_model();
  const Batch b = random_batch(2, 13, 53, 4);
  const auto step = [&] { return m.forward_backward(b.inputs.data(), b.targets.data(), 2, 13, 1.0f); };
  const float clean = step();
  EXPECT_EQ(m.evaluate(b.inputs.data(), b.targets.data(), 2, 13), clean);
  m.set_dropout({0.3f, 9});
  m.set_dropout_counter(5);
  const float a = step();
  const float next = step();
  EXPECT_EQ(m.dropout_counter(), 7u);
  EXPECT_NE(a, clean);
  EXPECT_NE(a, next) << "each call draws new masks";
  m.set_dropout_counter(5);
  EXPECT_EQ(step(), a) << "the same counter draws the same masks";
  EXPECT_EQ(m.evaluate(b.inputs.data(), b.targets.data(), 2, 13), clean) << "evaluate never drops";
  EXPECT_THROW(m.set_dropout({1.0f, 0}), ValueError);
}

TEST(TrainModel, RowsSplitOverProcessesDrawTheWholeBatchsDropoutMasks) {
  // Two data-parallel ranks each take two rows of a batch of four: with set_first_row, their
  // gradients (each scaled by 1/2) add up to the whole batch's, dropout included.
  TrainableGPT2 m = lively_model();
  m.set_dropout({0.3f, 5});
  const int T = 9;
  const Batch b = random_batch(4, T, 53, 21);
  m.zero_grad();
  m.set_dropout_counter(3);
  const float whole_loss = m.forward_backward(b.inputs.data(), b.targets.data(), 4, T, 1.0f);
  const std::vector<float> whole = all_grads(m);
  const auto split = [&](bool offset) {
    m.zero_grad();
    float loss = 0;
    for (int rank = 0; rank < 2; ++rank) {
      m.set_first_row(offset ? 2 * rank : 0);
      m.set_dropout_counter(3);  // each rank makes the same calls
      loss += m.forward_backward(b.inputs.data() + 2 * rank * T, b.targets.data() + 2 * rank * T, 2, T, 0.5f) / 2;
    }
    m.set_first_row(0);
    return std::pair(loss, all_grads(m));
  };
  const auto [loss, grads] = split(true);
  EXPECT_NEAR(loss, whole_loss, 1e-6);
  for (std::size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(grads[i], whole[i], 1e-6) << i;
  const auto [loss_same_rows, grads_same_rows] = split(false);
  EXPECT_GT(std::abs(loss_same_rows - whole_loss), 1e-4) << "without the offset both ranks draw rows 0-1's masks";
  EXPECT_THROW(m.set_first_row(-1), ValueError);
}

TEST(TrainModel, GradientsAreHandedOverOnceEachWhenComplete) {
  for (bool tied : {true, false}) {
    TrainableGPT2 m = lively_model(tied);
    const Batch b = random_batch(2, 7, 53, 5);
    const std::span<float> flat = m.flat_gradients();
    std::vector<std::pair<std::ptrdiff_t, std::vector<float>>> handed;  // (offset, values when handed over)
    m.set_gradients_ready([&](std::span<float> part) {
      handed.emplace_back(part.data() - flat.data(), std::vector<float>(part.begin(), part.end()));
    });
    m.zero_grad();
    m.forward_backward(b.inputs.data(), b.targets.data(), 2, 7, 1.0f);
    m.set_gradients_ready({});
    const std::vector<float> final_grads(flat.begin(), flat.end());
    // ln_f, an untied head, one per block from the last, then wte and wpe.
    const std::size_t head_parts = tied ? 1 : 2;
    ASSERT_EQ(handed.size(), head_parts + static_cast<std::size_t>(m.config().n_layer) + 2u) << tied;
    std::vector<int> covered(flat.size(), 0);
    for (const auto& [offset, values] : handed) {
      for (std::size_t i = 0; i < values.size(); ++i) {
        ++covered[static_cast<std::size_t>(offset) + i];
        ASSERT_EQ(values[i], final_grads[static_cast<std::size_t>(offset) + i]) << "handed over before complete";
      }
    }
    EXPECT_TRUE(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; })) << tied;
    EXPECT_GT(handed.front().first, handed[head_parts].first) << "ln_f (and the head) first, then the last block";
    EXPECT_GT(handed[head_parts].first, handed[head_parts + 1].first) << "the blocks from the last";
    EXPECT_EQ(handed[handed.size() - 2].first, 0) << "wte, then wpe, last";
    EXPECT_EQ(flat.data(), m.parameters()[0].grad);
    EXPECT_EQ(m.flat_values().data(), m.parameters()[0].data);
    EXPECT_EQ(static_cast<std::int64_t>(flat.size()), m.parameter_count());
  }
}

TEST(TrainModel, KeptEmbeddingRowsAddBackToTheSameGradient) {
  for (bool tied : {true, false}) {
    TrainableGPT2 m = lively_model(tied);
    const Batch b = random_batch(2, 7, 53, 8);
    m.zero_grad();
    m.forward_backward(b.inputs.data(), b.targets.data(), 2, 7, 1.0f);
    const std::vector<float> normal = all_grads(m);
    m.zero_grad();
    std::vector<std::ptrdiff_t> order;
    m.set_gradients_ready([&](std::span<float> part) { order.push_back(part.data() - m.flat_gradients().data()); });
    m.set_keep_embedding_rows(true);
    m.forward_backward(b.inputs.data(), b.targets.data(), 2, 7, 1.0f);
    m.set_gradients_ready({});
    EXPECT_EQ(order.front(), 0) << "wte first of all";
    const std::span<const float> rows = m.kept_embedding_rows();
    ASSERT_EQ(rows.size(), 2u * 7u * static_cast<std::size_t>(m.config().n_embd));
    EXPECT_NE(all_grads(m), normal) << "the rows are left out of wte's gradient";
    m.add_embedding_rows(b.inputs, std::vector<float>(rows.begin(), rows.end()));
    m.set_keep_embedding_rows(false);
    const std::vector<float> added = all_grads(m);
    for (std::size_t i = 0; i < normal.size(); ++i) ASSERT_NEAR(added[i], normal[i], 1e-6) << tied << " " << i;
    EXPECT_THROW(m.add_embedding_rows(b.inputs, std::vector<float>(3)), ValueError);
    EXPECT_THROW(m.add_embedding_rows(std::vector<std::int32_t>{53}, std::vector<float>(m.config().n_embd)),
                 IndexError);
  }
}

// lively_model() after one forward_backward on a seeded 2 x 7 batch b.
TrainableGPT2 model_with_grads(const Batch& b) {
  TrainableGPT2 m = lively_model();
  m.zero_grad();
  m.forward_backward(b.inputs.data(), b.targets.data(), 2, 7, 1.0f);
  return m;
}

TEST(TrainModel, EvaluateLeavesGradientsAlone) {
  const Batch b = random_batch(2, 7, 53, 6);
  TrainableGPT2 m = model_with_grads(b);
  const std::vector<float> before = all_grads(m);
  m.evaluate(b.inputs.data(), b.targets.data(), 2, 7);
  EXPECT_EQ(all_grads(m), before);
}

TEST(TrainModel, ClipGradNormHasTorchSemantics) {
  TrainableGPT2 m = model_with_grads(random_batch(2, 7, 53, 8));
  const std::vector<float> g = all_grads(m);
  const double norm = std::sqrt(std::inner_product(g.begin(), g.end(), g.begin(), 0.0, std::plus<>(),
                                                   [](float x, float y) { return double{x} * y; }));
  EXPECT_NEAR(m.grad_norm(), norm, 1e-9 * norm);
  EXPECT_EQ(m.clip_grad_norm(10 * norm), m.grad_norm()) << "no change below the limit";
  EXPECT_EQ(all_grads(m), g);
  EXPECT_NEAR(m.clip_grad_norm(norm / 4), norm, 1e-9 * norm);
  EXPECT_NEAR(m.grad_norm(), norm / 4 * norm / (norm + 1e-6), 1e-6 * norm);
}

TEST(TrainModel, BadCallsThrowAndChangeNothing) {
  TrainableGPT2 m = lively_model();
  m.zero_grad();
  Batch b = random_batch(1, 41, 53, 1);
  EXPECT_THROW(m.forward_backward(b.inputs.data(), b.targets.data(), 1, 41, 1.0f), ValueError);  // > n_positions
  b = random_batch(1, 8, 53, 1);
  b.inputs[3] = 53;
  EXPECT_THROW(m.forward_backward(b.inputs.data(), b.targets.data(), 1, 8, 1.0f), IndexError);
  b.inputs[3] = 0;
  b.targets[2] = -2;
  EXPECT_THROW(m.forward_backward(b.inputs.data(), b.targets.data(), 1, 8, 1.0f), IndexError);
  EXPECT_THROW(m.evaluate(b.inputs.data(), b.targets.data(), 0, 8), ValueError);
  EXPECT_EQ(m.grad_norm(), 0.0);
  EXPECT_EQ(m.dropout_counter(), 0u);
  EXPECT_THROW(m.reserve(1, 41), ValueError);
}

TEST(AdamW, FollowsTorchFormulaAndResumesBitForBit) {
  TrainableGPT2 m = lively_model();
  const Batch b = random_batch(2, 9, 53, 3);
  const AdamWOptions options{0.9, 0.95, 1e-8, 0.1};
  AdamW opt(m.parameters(), options);
  const double lr = 1e-2;
  // Two steps by hand in double on a few elements of a decayed and an undecayed parameter.
  Parameter& w = m.parameters()[4];  // h.0.attn.c_attn.weight
  Parameter& bias = m.parameters()[5];
  ASSERT_TRUE(w.weight_decay);
  ASSERT_FALSE(bias.weight_decay);
  struct Track {
    Parameter* p;
    std::int64_t i;
    double x, mo = 0, v = 0;
  };
  std::vector<Track> tracks{{&w, 7, w.data[7]}, {&w, 301, w.data[301]}, {&bias, 2, bias.data[2]}};
  for (int t = 1; t <= 2; ++t) {
    m.zero_grad();
    m.forward_backward(b.inputs.data(), b.targets.data(), 2, 9, 1.0f);
    for (Track& k : tracks) {
      const double g = k.p->grad[k.i];
      if (k.p->weight_decay) k.x *= 1 - lr * options.weight_decay;
      k.mo = options.beta1 * k.mo + (1 - options.beta1) * g;
      k.v = options.beta2 * k.v + (1 - options.beta2) * g * g;
      const double mhat = k.mo / (1 - std::pow(options.beta1, t));
      k.x -= lr * mhat / (std::sqrt(k.v) / std::sqrt(1 - std::pow(options.beta2, t)) + options.eps);
    }
    opt.step(m.parameters(), lr);
    for (const Track& k : tracks) EXPECT_NEAR(k.p->data[k.i], k.x, 1e-6 * (1 + std::abs(k.x))) << t;
  }
  EXPECT_EQ(opt.step_count(), 2);

  // Resume: a second optimizer given the first's moments and step makes the same update.
  AdamW copy(m.parameters(), options);
  for (std::size_t i = 0; i < opt.size(); ++i) {
    std::copy(opt.moments(i).m.begin(), opt.moments(i).m.end(), copy.moments(i).m.begin());
    std::copy(opt.moments(i).v.begin(), opt.moments(i).v.end(), copy.moments(i).v.begin());
  }
  copy.set_step_count(opt.step_count());
  const std::vector<float> saved = all_values(m);
  opt.step(m.parameters(), lr);
  const std::vector<float> first = all_values(m);
  std::size_t k = 0;
  for (Parameter& p : m.parameters())
    for (std::int64_t i = 0; i < p.numel; ++i) p.data[i] = saved[k++];
  copy.step(m.parameters(), lr);
  EXPECT_EQ(all_values(m), first);
  EXPECT_THROW(opt.step(m.parameters().subspan(1), lr), ValueError);
}

}  // namespace
}  // namespace kael::train
