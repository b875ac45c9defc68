#include "kernels/sharded/tests/sharded_check.hpp"

#include <cstring>
#include <iostream>
#include <sstream>

#include "oracles/oracle.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"
#include "tools/gate.hpp"

namespace kgate::sharded::test {

namespace {

int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}

Tensor copy_of(const Tensor& t) { return t.to(t.dtype()); }

bool same_bits(const Tensor& a, const Tensor& b, std::int64_t first, std::int64_t count) {
  const std::size_t es = size_of(a.dtype());
  return a.dtype() == b.dtype() &&
         std::memcmp(static_cast<const char*>(a.data()) + first * es, static_cast<const char*>(b.data()) + first * es,
                     static_cast<std::size_t>(count) * es) == 0;
}
bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dims() == b.dims() && same_bits(a, b, 0, a.numel());
}

// Passed, or untrusted only because the reference is (nearly) all zeros.
bool acceptable(const oracle::Report& r) {
  return r.state == oracle::State::passed ||
         (r.state == oracle::State::untrusted && r.trust.ref_zero_fraction > oracle::Options{}.max_ref_zero_fraction);
}

std::map<Role, const Tensor*> pointers(const std::map<Role, Tensor>& m) {
  std::map<Role, const Tensor*> r;
  for (const auto& [k, v] : m) r[k] = &v;
  return r;
}

// The oracle on every output; failures are added to `ev`.
bool judged(const Problem& p, const std::map<std::string, ReductionPlan>& reduction, const Fill& fill,
            const std::map<Role, Tensor>& in, const std::map<Role, Tensor>& got, std::string& ev,
            std::int64_t& elements) {
  kernels::Plan pl;
  pl.reduction = reduction;
  bool ok = true;
  for (const auto& rr : gate::judge(p, pl, fill, in, got)) {
    elements += rr.report.numel;
    if (!acceptable(rr.report)) {
      ok = false;
      ev += oracle::to_table(rr.report) + "\n";
    }
  }
  return ok;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[i] = t.get(i);
  return v;
}

}  // namespace

LocalOp reference_op() {
  LocalOp op;
  op.name = "fp64 reference";
  op.supported = [](const Problem&) { return kernels::Support{}; };
  op.plan = [](const Problem& p) {
    kernels::Plan pl;
    pl.op = op_dir_name(p);
    pl.variant = "fp64-direct-reference";
    for (const auto& s : outputs(p)) {
      std::int64_t len = 1;
      if (const auto* c = std::get_if<ConvProblem>(&p)) {
        len = c->reduction_length();
      } else {
        const auto& g = std::get<GroupNormProblem>(p);
        len = s.role == Role::dgamma || s.role == Role::dbeta ? g.n * g.spatial[0] * g.spatial[1] * g.spatial[2]
                                                               : g.group_size();
      }
      pl.reduction[std::string(name(s.role))] = ReductionPlan::sequential(len, DType::fp32);
    }
    return pl;
  };
  op.run = [](const Problem& p, const kernels::Plan&, const std::map<Role, const Tensor*>& in) {
    ref::Inputs rin;
    for (const auto& [r, t] : in) rin.emplace(r, std::cref(*t));
    const ref::Outputs out = ref::run_reference(p, rin, ref::Impl::direct);
    std::map<Role, Tensor> res;
    for (const auto& s : outputs(p)) res.emplace(s.role, out.at(s.role).to(s.dtype));
    return res;
  };
  return op;
}

LocalOp kernels_or_reference(MPI_Comm comm, const Problem& whole, const Slabs& slabs, GnStats gn) {
  if (route(comm, whole, slabs, production_kernels(), gn).ok) return production_kernels();
  return reference_op();
}

Verdict sharded_vs_whole(MPI_Comm comm, const Problem& whole, const Slabs& slabs, const Fill& fill, GnStats gn,
                         const LocalOp& op) {
  const int me = rank_of(comm);
  Verdict v;
  std::string ev;
  std::ostringstream head;
  head << to_descriptor(whole) << " slabs " << to_string(slabs) << " fill " << fill_string(fill) << " seed "
       << fill.seed << (gn == GnStats::global ? " global statistics" : "") << ", local operator: "
       << op.name;
  const std::map<Role, Tensor> in = ref::make_inputs(whole, fill);
  const Problem local = local_problem(whole, slabs, me);
  std::map<Role, Tensor> mine;  // this rank's inputs
  for (const auto& s : inputs(whole)) {
    if (is_activation(whole, s.role)) {
      const auto [a, b] = role_planes(whole, s.role, slabs, me);
      mine.emplace(s.role, d_planes(in.at(s.role), a, b));
    } else {
      mine.emplace(s.role, copy_of(in.at(s.role)));
    }
  }
  const auto* gnp = std::get_if<GroupNormProblem>(&whole);
  const bool per_shard = gnp && gn == GnStats::per_shard;
  if (per_shard && gnp->dir == GnDir::bwd)  // the slab's own statistics, as its forward produced them
    for (auto& [r, t] : ref::derived_inputs(local, ref::refs(mine))) mine[r] = std::move(t);

  const Output o = run(comm, whole, slabs, pointers(mine), op, gn);
  bool ok = true;
  head << "\n  rank " << me << " local problem: " << to_descriptor(o.local);

  // Reductions over the ranks: a second run gives the same bits.
  const bool reduces = (!gnp && std::get<ConvProblem>(whole).dir == ConvDir::bwd_weight) || (gnp && gnp->dir == GnDir::bwd);
  if (reduces) {
    const Output again = run(comm, whole, slabs, pointers(mine), op, gn);
    for (const auto& [r, t] : o.tensors)
      if (!same_bits(t, again.tensors.at(r))) {
        ok = false;
        ev += "rank " + std::to_string(me) + ": " + std::string(name(r)) + " differs between two runs\n";
      }
  }

  if (per_shard) {
    // Each slab against its own reference; the reduced parameters equal the
    // rank-ordered sum of the slabs' own results.
    const kernels::Plan lp = op.plan(local);
    const std::map<Role, Tensor> alone = op.run(local, lp, pointers(mine));
    std::map<Role, Tensor> got;
    for (const auto& [r, t] : o.tensors) {
      const bool reduced = r == Role::dgamma || r == Role::dbeta;
      if (!reduced) {
        v.bitwise_elements += t.numel();
        if (!same_bits(t, alone.at(r))) {
          ok = false;
          ev += "rank " + std::to_string(me) + ": " + std::string(name(r)) + " differs from the slab run alone\n";
        }
      }
      got.emplace(r, copy_of(alone.at(r)));
    }
    ok = judged(local, lp.reduction, fill, mine, got, ev, v.oracle_elements) && ok;
    for (Role r : {Role::dgamma, Role::dbeta}) {
      if (!o.tensors.count(r)) continue;
      const std::vector<double> part = values(alone.at(r));
      std::vector<double> all(part.size() * static_cast<std::size_t>(slabs.ranks()));
      MPI_Gather(part.data(), static_cast<int>(part.size()), MPI_DOUBLE, all.data(), static_cast<int>(part.size()),
                 MPI_DOUBLE, 0, comm);
      if (me != 0) continue;
      Tensor sum(o.tensors.at(r).dtype(), o.tensors.at(r).dims());
      for (std::size_t i = 0; i < part.size(); ++i) {
        double s = 0;
        for (int k = 0; k < slabs.ranks(); ++k) s += all[k * part.size() + i];
        sum.set(static_cast<std::int64_t>(i), s);
      }
      if (!same_bits(sum, o.tensors.at(r))) {
        ok = false;
        ev += std::string(name(r)) + " is not the rank-ordered sum of the slabs' results\n";
      }
      v.bitwise_elements += sum.numel();
    }
  } else {
    std::map<Role, Tensor> got;
    for (const auto& s : outputs(whole)) {
      if (is_activation(whole, s.role)) {
        Tensor g = gather_planes(comm, o.tensors.at(s.role), 0);
        if (me == 0) got.emplace(s.role, std::move(g));
      } else if (me == 0) {
        got.emplace(s.role, copy_of(o.tensors.at(s.role)));
      }
    }
    if (me == 0) {
      ok = judged(whole, o.reduction, fill, in, got, ev, v.oracle_elements) && ok;
      const auto* c = std::get_if<ConvProblem>(&whole);
      if (c && c->dir != ConvDir::bwd_weight && op.supported(whole)) {
        const kernels::Plan wp = op.plan(whole);
        const Role r = c->dir == ConvDir::fwd ? Role::y : Role::dx;
        const std::string rn(name(r));
        const std::map<Role, Tensor> ref_whole = op.run(whole, wp, pointers(in));
        if (wp.reduction.at(rn) == o.local_plan.reduction.at(rn)) {
          // Planes farther than h from every cut: one rank computed them all.
          const Split sp = split_of(whole);
          const Tensor& a = got.at(r);
          const Tensor& b = ref_whole.at(r);
          const std::int64_t planes = a.dims()[1], plane = a.numel() / (a.dims()[0] * planes);
          for (std::int64_t bn = 0; bn < a.dims()[0]; ++bn)
            for (std::int64_t p = 0; p < planes; ++p) {
              bool near = false;
              if (r == Role::dx)
                for (int k = 1; k < slabs.ranks(); ++k)
                  near = near || (p >= slabs.begin[k] - sp.halo && p < slabs.begin[k] + sp.halo);
              if (near) continue;
              v.bitwise_elements += plane;
              if (!same_bits(a, b, (bn * planes + p) * plane, plane)) {
                ok = false;
                ev += rn + " plane " + std::to_string(p) + " (batch " + std::to_string(bn) +
                      ") differs from the whole-volume run\n";
              }
            }
        } else {
          head << "\n  no bitwise comparison: the whole problem's plan declares another reduction for " << rn;
        }
      }
    }
  }

  if (!ok) std::cerr << "[rank " << me << "] sharded check failed: " << head.str() << "\n" << ev;
  int mine_ok = ok ? 1 : 0, all_ok = 0;
  MPI_Allreduce(&mine_ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  v.ok = all_ok == 1;
  std::int64_t counts[2] = {v.bitwise_elements, v.oracle_elements}, sums[2] = {0, 0};
  MPI_Allreduce(counts, sums, 2, MPI_INT64_T, MPI_SUM, comm);
  v.bitwise_elements = sums[0];
  v.oracle_elements = sums[1];
  v.evidence = head.str() + "\n" + ev;
  return v;
}

}  // namespace kgate::sharded::test
