// einsum: the equation parsed into one letter per dim ("..." becomes reserved letters, aligned
// from the right), then the operands contracted a pair at a time. Each pair is permuted to
// (batch, kept, contracted) and (batch, contracted, kept), reshaped to three dims and
// multiplied with matmul, so the F32 work runs on the GEMM and the gradients follow.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "kael/tensor/ops.hpp"
#include "tensor/strided.hpp"

namespace kael {

namespace {

// An operand as a tensor and one label per dim. Labels are chars: the equation's letters, and
// for "..." the chars from '0' on, counted from the right.
struct Term {
  Tensor t;
  std::string labels;
};

constexpr char kEllipsisBase = '0';

std::string strip_spaces(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != ' ') out.push_back(c);
  return out;
}

// The labels of `spec` for a tensor of `rank` dims; `ellipsis_dims` is the most "..." covered.
std::string expand_labels(const std::string& spec, int rank, int& ellipsis_dims) {
  const auto dots = spec.find("...");
  std::string letters = spec;
  if (dots != std::string::npos) letters.erase(dots, 3);
  for (char c : letters)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
      throw ValueError(str("einsum: invalid subscript '", std::string(1, c), "' in '", spec, "' (letters and ... only)"));
  const int explicit_dims = static_cast<int>(letters.size());
  if (dots == std::string::npos) {
    if (explicit_dims != rank)
      throw ValueError(str("einsum: subscripts '", spec, "' name ", explicit_dims, " dims, the operand has ", rank));
    return spec;
  }
  const int covered = rank - explicit_dims;
  if (covered < 0) throw ValueError(str("einsum: subscripts '", spec, "' name more dims than the operand's ", rank));
  if (covered > 10) throw ValueError("einsum: '...' may cover at most 10 dims");
  ellipsis_dims = std::max(ellipsis_dims, covered);
  std::string middle;
  for (int i = covered - 1; i >= 0; --i) middle.push_back(static_cast<char>(kEllipsisBase + i));
  return spec.substr(0, dots) + middle + spec.substr(dots + 3);
}

// Sums the dims whose labels are not in `keep`.
Term sum_out(Term term, const std::set<char>& keep) {
  std::vector<int> dims;
  std::string labels;
  for (std::size_t i = 0; i < term.labels.size(); ++i) {
    if (keep.contains(term.labels[i])) labels.push_back(term.labels[i]);
    else dims.push_back(static_cast<int>(i));
  }
  if (!dims.empty()) term.t = sum(term.t, dims);
  term.labels = labels;
  return term;
}

// The tensor's dims in the order of `labels` (a permutation of its own).
Tensor ordered(const Term& term, const std::string& labels) {
  std::vector<int> order;
  for (char c : labels) order.push_back(static_cast<int>(term.labels.find(c)));
  return term.t.permute(order);
}

// a and b contracted over the labels they share that `keep` does not hold.
Term contract(Term a, Term b, const std::set<char>& keep, const std::map<char, std::int64_t>& sizes) {
  std::set<char> keep_a = keep, keep_b = keep;
  keep_a.insert(b.labels.begin(), b.labels.end());
  keep_b.insert(a.labels.begin(), a.labels.end());
  a = sum_out(std::move(a), keep_a);
  b = sum_out(std::move(b), keep_b);
  std::string batch, left, right, reduced;
  for (char c : a.labels) {
    const bool shared = b.labels.find(c) != std::string::npos;
    if (!shared) left.push_back(c);
    else if (keep.contains(c)) batch.push_back(c);
    else reduced.push_back(c);
  }
  for (char c : b.labels)
    if (a.labels.find(c) == std::string::npos) right.push_back(c);
  const auto extent = [&](const std::string& labels) {
    std::int64_t n = 1;
    for (char c : labels) n *= sizes.at(c);
    return n;
  };
  const auto shape_of = [&](const std::string& labels) {
    Shape s;
    for (char c : labels) s.push_back(sizes.at(c));
    return s;
  };
  // Size-1 dims broadcast against the other operand's (as "..." dims do).
  const auto expanded = [&](const Term& term, const std::string& labels) { return ordered(term, labels).expand(shape_of(labels)); };
  const Tensor lhs = expanded(a, batch + left + reduced).reshape({extent(batch), extent(left), extent(reduced)});
  const Tensor rhs = expanded(b, batch + reduced + right).reshape({extent(batch), extent(reduced), extent(right)});
  Term out{matmul(lhs, rhs), batch + left + right};
  out.t = out.t.reshape(shape_of(out.labels));
  return out;
}

}  // namespace

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands) {
  const std::string eq = strip_spaces(equation);
  const auto arrow = eq.find("->");
  const std::string inputs = eq.substr(0, arrow);
  std::vector<std::string> specs;
  for (std::size_t start = 0;;) {
    const auto comma = inputs.find(',', start);
    specs.push_back(inputs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (specs.size() != operands.size())
    throw ValueError(str("einsum: the equation names ", specs.size(), " operands, ", operands.size(), " were given"));
  int ellipsis_dims = 0;
  std::vector<Term> terms;
  std::map<char, std::int64_t> sizes;
  std::map<char, int> uses;
  for (std::size_t k = 0; k < operands.size(); ++k) {
    Term term{operands[k], expand_labels(specs[k], operands[k].dim(), ellipsis_dims)};
    for (std::size_t i = 0; i < term.labels.size(); ++i) {
      const char c = term.labels[i];
      if (term.labels.find(c) != i)
        throw ValueError(str("einsum: subscript '", std::string(1, c), "' repeats in operand ", k,
                             " (diagonals are not supported)"));
      const std::int64_t n = term.t.size(static_cast<int>(i));
      auto [it, fresh] = sizes.try_emplace(c, n);
      if (!fresh && it->second != n) {
        if (it->second != 1 && n != 1)
          throw ValueError(str("einsum: subscript '", std::string(1, c), "' has size ", it->second, " in one operand and ",
                               n, " in operand ", k));
        it->second = std::max(it->second, n);
      }
      ++uses[c];
    }
    terms.push_back(std::move(term));
  }
  std::string output;
  if (arrow == std::string::npos) {
    for (int i = ellipsis_dims - 1; i >= 0; --i) output.push_back(static_cast<char>(kEllipsisBase + i));
    for (const auto& [c, n] : uses)
      if (n == 1 && !(c >= kEllipsisBase && c < kEllipsisBase + 10)) output.push_back(c);
  } else {
    std::string spec = eq.substr(arrow + 2);
    const auto dots = spec.find("...");
    if (dots != std::string::npos) {
      std::string middle;
      for (int i = ellipsis_dims - 1; i >= 0; --i) middle.push_back(static_cast<char>(kEllipsisBase + i));
      spec = spec.substr(0, dots) + middle + spec.substr(dots + 3);
    }
    for (std::size_t i = 0; i < spec.size(); ++i) {
      if (!sizes.contains(spec[i]))
        throw ValueError(str("einsum: output subscript '", std::string(1, spec[i]), "' appears in no operand"));
      if (spec.find(spec[i]) != i) throw ValueError(str("einsum: output subscript '", std::string(1, spec[i]), "' repeats"));
    }
    output = spec;
  }
  const std::set<char> out_labels(output.begin(), output.end());
  Term acc = terms[0];
  for (std::size_t k = 1; k < terms.size(); ++k) {
    std::set<char> keep = out_labels;  // what the later operands still need
    for (std::size_t later = k + 1; later < terms.size(); ++later) keep.insert(terms[later].labels.begin(), terms[later].labels.end());
    acc = contract(std::move(acc), terms[k], keep, sizes);
  }
  acc = sum_out(std::move(acc), out_labels);
  Shape final_shape;
  for (char c : output) final_shape.push_back(sizes.at(c));
  return ordered(acc, output).expand(final_shape);
}

}  // namespace kael
