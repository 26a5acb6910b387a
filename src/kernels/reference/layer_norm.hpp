// Plain references for kernels::layer_norm and layer_norm_backward (norm.hpp): the obvious
// loops, sums in double, no threads, templated on the number type so that the same loops serve
// the float kernels' tests (rounded once) and finite-difference checks in double. Same
// arguments as the kernels.
#pragma once

#include <cmath>
#include <cstdint>

namespace kael::kernels::ref {

template <class R>
void layer_norm(R* out, R* mean, R* rstd, const R* inp, const R* weight, const R* bias, std::int64_t T,
                std::int64_t C, R eps) {
  for (std::int64_t t = 0; t < T; ++t) {
    const R* x = inp + t * C;
    double mu = 0, var = 0;
    for (std::int64_t c = 0; c < C; ++c) mu += x[c];
    mu /= static_cast<double>(C);
    for (std::int64_t c = 0; c < C; ++c) var += (x[c] - mu) * (x[c] - mu);
    var /= static_cast<double>(C);
    const double s = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (std::int64_t c = 0; c < C; ++c)
      out[t * C + c] = static_cast<R>((x[c] - mu) * s * (weight != nullptr ? double{weight[c]} : 1.0) +
                                      (bias != nullptr ? double{bias[c]} : 0.0));
    if (mean != nullptr) mean[t] = static_cast<R>(mu);
    if (rstd != nullptr) rstd[t] = static_cast<R>(s);
  }
}

template <class R>
void layer_norm_backward(R* dinp, R* dweight, R* dbias, const R* dout, const R* inp, const R* weight, const R* mean,
                         const R* rstd, std::int64_t T, std::int64_t C) {
  for (std::int64_t t = 0; t < T; ++t) {
    const R* x = inp + t * C;
    const R* dy = dout + t * C;
    const double m = mean[t], s = rstd[t];
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      const double xhat = (x[c] - m) * s, w = weight != nullptr ? double{weight[c]} : 1.0;
      sum_dxhat += dy[c] * w;
      sum_dxhat_xhat += dy[c] * w * xhat;
      if (dweight != nullptr) dweight[c] = static_cast<R>(dweight[c] + dy[c] * xhat);
      if (dbias != nullptr) dbias[c] = static_cast<R>(dbias[c] + dy[c]);
    }
    for (std::int64_t c = 0; c < C; ++c) {
      const double xhat = (x[c] - m) * s, w = weight != nullptr ? double{weight[c]} : 1.0;
      dinp[t * C + c] = static_cast<R>(
          dinp[t * C + c] + s * (dy[c] * w - sum_dxhat / static_cast<double>(C) - xhat * sum_dxhat_xhat / static_cast<double>(C)));
    }
  }
}

}  // namespace kael::kernels::ref
