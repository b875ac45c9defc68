#include "kernels/sharded/sharded.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"

namespace kgate::sharded {

namespace {

// ---------------------------------------------------------------------------
// The phase the watchdog reports.
std::mutex g_phase_mu;
std::string g_phase = "outside the sharded operators";

class Phase {
 public:
  explicit Phase(std::string what) {
    std::lock_guard lock(g_phase_mu);
    prev_ = std::exchange(g_phase, std::move(what));
  }
  ~Phase() {
    std::lock_guard lock(g_phase_mu);
    g_phase = std::move(prev_);
  }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  std::string prev_;
};

int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c) {
  int n = 0;
  MPI_Comm_size(c, &n);
  return n;
}

// Messages are cut into pieces of at most 1 GiB (MPI counts are int); MPI
// keeps the order of messages with one tag between two ranks.
constexpr std::int64_t kPiece = std::int64_t{1} << 30;

void post_send(MPI_Comm c, const void* p, std::int64_t bytes, int to, int tag, std::vector<MPI_Request>& reqs) {
  for (std::int64_t o = 0; o < bytes || o == 0; o += kPiece) {
    reqs.emplace_back();
    MPI_Isend(static_cast<const char*>(p) + o, static_cast<int>(std::min(kPiece, bytes - o)), MPI_BYTE, to, tag, c,
              &reqs.back());
    if (bytes == 0) break;
  }
}
void post_recv(MPI_Comm c, void* p, std::int64_t bytes, int from, int tag, std::vector<MPI_Request>& reqs) {
  for (std::int64_t o = 0; o < bytes || o == 0; o += kPiece) {
    reqs.emplace_back();
    MPI_Irecv(static_cast<char*>(p) + o, static_cast<int>(std::min(kPiece, bytes - o)), MPI_BYTE, from, tag, c,
              &reqs.back());
    if (bytes == 0) break;
  }
}
void wait_all(std::vector<MPI_Request>& reqs) {
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  reqs.clear();
}

// Every rank's verdict, agreed: ok only when all are ok, else the reason of
// the lowest declining rank.
kernels::Support agree(MPI_Comm comm, const kernels::Support& mine) {
  const int n = size_of(comm), me = rank_of(comm);
  std::vector<int> oks(n);
  int ok = mine.ok ? 1 : 0;
  MPI_Allgather(&ok, 1, MPI_INT, oks.data(), 1, MPI_INT, comm);
  const auto first = std::find(oks.begin(), oks.end(), 0);
  if (first == oks.end()) return {};
  const int d = static_cast<int>(first - oks.begin());
  std::string reason = me == d ? mine.reason : std::string();
  int len = static_cast<int>(reason.size());
  MPI_Bcast(&len, 1, MPI_INT, d, comm);
  reason.resize(len);
  MPI_Bcast(reason.data(), len, MPI_CHAR, d, comm);
  return {false, "rank " + std::to_string(d) + ": " + reason};
}

// Runs f on this rank, then agrees on success; a failure anywhere throws
// ShardError on every rank.
template <class F>
auto agreed(MPI_Comm comm, const std::string& what, F&& f) -> decltype(f()) {
  std::optional<decltype(f())> res;
  kernels::Support mine;
  try {
    res.emplace(f());
  } catch (const std::exception& e) {
    mine = {false, e.what()};
  }
  Phase ph("agreeing on the result of " + what);
  const kernels::Support all = agree(comm, mine);
  if (!all) throw ShardError(what + " failed on " + all.reason);
  return std::move(*res);
}

struct Geom5 {
  std::int64_t n, d, plane;  // plane = H*W*C elements
};
Geom5 geom5(const Tensor& t) {
  if (t.dims().size() != 5) throw std::logic_error("sharded: expected an [N][D][H][W][C] tensor");
  return {t.dims()[0], t.dims()[1], t.dims()[2] * t.dims()[3] * t.dims()[4]};
}

// Copies src's planes into dst starting at plane d0.
void put_planes(Tensor& dst, std::int64_t d0, const Tensor& src) {
  const Geom5 a = geom5(dst), b = geom5(src);
  const std::int64_t es = static_cast<std::int64_t>(size_of(dst.dtype()));
  for (std::int64_t n = 0; n < a.n; ++n)
    std::memcpy(static_cast<char*>(dst.data()) + ((n * a.d + d0) * a.plane) * es,
                static_cast<const char*>(src.data()) + (n * b.d * b.plane) * es, static_cast<std::size_t>(b.d * b.plane * es));
}

Dims with_d(Dims dims, std::int64_t d) {
  dims[1] = d;
  return dims;
}

// Sends to_prev to rank-1 and to_next to rank+1 while receiving from_prev
// from rank-1 and from_next from rank+1 (none past the volume's edge; those
// buffers are left as they are). Tags `tag` and `tag`+1.
void swap_with_neighbours(MPI_Comm comm, const Tensor& to_prev, const Tensor& to_next, Tensor& from_prev,
                          Tensor& from_next, int tag) {
  const int me = rank_of(comm), n = size_of(comm);
  const int prev = me > 0 ? me - 1 : MPI_PROC_NULL, next = me + 1 < n ? me + 1 : MPI_PROC_NULL;
  std::vector<MPI_Request> reqs;
  post_recv(comm, from_prev.data(), from_prev.nbytes(), prev, tag, reqs);
  post_recv(comm, from_next.data(), from_next.nbytes(), next, tag + 1, reqs);
  post_send(comm, to_prev.data(), to_prev.nbytes(), prev, tag + 1, reqs);
  post_send(comm, to_next.data(), to_next.nbytes(), next, tag, reqs);
  wait_all(reqs);
}

// x's slab extended by h planes per side: the neighbours' planes, zeros at
// the volume's edge.
Tensor with_halo(MPI_Comm comm, const Tensor& x, std::int64_t h) {
  const int me = rank_of(comm), n = size_of(comm);
  const Geom5 g = geom5(x);
  Tensor out(x.dtype(), with_d(x.dims(), g.d + 2 * h));
  put_planes(out, h, x);
  if (h == 0) return out;
  const int prev = me > 0 ? me - 1 : MPI_PROC_NULL, next = me + 1 < n ? me + 1 : MPI_PROC_NULL;
  Phase ph("halo exchange of " + std::to_string(h) + " plane(s) with ranks " + std::to_string(me - 1) + " and " +
           std::to_string(me + 1));
  Tensor from_prev(x.dtype(), with_d(x.dims(), h)), from_next(x.dtype(), with_d(x.dims(), h));
  swap_with_neighbours(comm, d_planes(x, 0, h), d_planes(x, g.d - h, g.d), from_prev, from_next, 11);
  if (prev != MPI_PROC_NULL) put_planes(out, 0, from_prev);
  if (next != MPI_PROC_NULL) put_planes(out, g.d + h, from_next);
  return out;
}

// dx of the adapter form (D_loc + 2h planes) -> this rank's D_loc planes:
// the halo planes go back to the neighbours that own them and are added
// there (own, previous rank's, next rank's, in fp64, rounded once).
Tensor return_halo(MPI_Comm comm, const Tensor& dxe, std::int64_t h) {
  const int me = rank_of(comm), n = size_of(comm);
  const Geom5 g = geom5(dxe);
  const std::int64_t d = g.d - 2 * h;
  Tensor own = d_planes(dxe, h, h + d);
  if (h == 0) return own;
  const int prev = me > 0 ? me - 1 : MPI_PROC_NULL, next = me + 1 < n ? me + 1 : MPI_PROC_NULL;
  Phase ph("boundary-gradient return of " + std::to_string(h) + " plane(s) with ranks " + std::to_string(me - 1) +
           " and " + std::to_string(me + 1));
  Tensor from_prev(dxe.dtype(), with_d(dxe.dims(), h)), from_next(dxe.dtype(), with_d(dxe.dims(), h));
  swap_with_neighbours(comm, d_planes(dxe, 0, h), d_planes(dxe, h + d, g.d), from_prev, from_next, 13);
  Tensor out(dxe.dtype(), own.dims());
  for (std::int64_t b = 0; b < g.n; ++b)
    for (std::int64_t p = 0; p < d; ++p)
      for (std::int64_t e = 0; e < g.plane; ++e) {
        double v = own.get((b * d + p) * g.plane + e);
        if (prev != MPI_PROC_NULL && p < h) v += from_prev.get((b * h + p) * g.plane + e);
        if (next != MPI_PROC_NULL && p >= d - h) v += from_next.get((b * h + p - (d - h)) * g.plane + e);
        out.set((b * d + p) * g.plane + e, v);
      }
  return out;
}

// Reduces v over the ranks in a fixed binary tree (rank r combines rank
// r+s's value into its own at s = 1, 2, 4, ...; left operand the lower
// rank's), then broadcasts rank 0's result: the same bits on every rank, run
// after run.
std::vector<double> tree_reduce(MPI_Comm comm, std::vector<double> v,
                                const std::function<void(std::vector<double>&, const std::vector<double>&)>& combine,
                                const std::string& what) {
  const int me = rank_of(comm), n = size_of(comm);
  Phase ph("rank-ordered reduction of " + what);
  std::vector<double> other(v.size());
  const std::int64_t bytes = static_cast<std::int64_t>(v.size() * sizeof(double));
  for (int s = 1; s < n; s *= 2) {
    std::vector<MPI_Request> reqs;
    if (me % (2 * s) == 0) {
      if (me + s >= n) continue;
      post_recv(comm, other.data(), bytes, me + s, 15, reqs);
      wait_all(reqs);
      combine(v, other);
    } else if (me % (2 * s) == s) {
      post_send(comm, v.data(), bytes, me - s, 15, reqs);
      wait_all(reqs);
      break;
    }
  }
  for (std::int64_t o = 0; o < bytes; o += kPiece)
    MPI_Bcast(reinterpret_cast<char*>(v.data()) + o, static_cast<int>(std::min(kPiece, bytes - o)), MPI_BYTE, 0, comm);
  return v;
}

void add_into(std::vector<double>& a, const std::vector<double>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
}

// The rank-ordered sum of every rank's partial, rounded once to its dtype.
Tensor ordered_sum(MPI_Comm comm, const Tensor& partial, const std::string& what) {
  std::vector<double> v(static_cast<std::size_t>(partial.numel()));
  for (std::int64_t i = 0; i < partial.numel(); ++i) v[i] = partial.get(i);
  v = tree_reduce(comm, std::move(v), add_into, what);
  Tensor out(partial.dtype(), partial.dims());
  for (std::int64_t i = 0; i < out.numel(); ++i) out.set(i, v[i]);
  return out;
}

// D extent of the whole problem's x.
std::int64_t x_planes(const Problem& p) {
  if (const auto* c = std::get_if<ConvProblem>(&p)) return c->in[0];
  return std::get<GroupNormProblem>(p).spatial[0];
}

const Tensor& input(const std::map<Role, const Tensor*>& in, Role r) {
  auto it = in.find(r);
  if (it == in.end() || !it->second) throw ShardError("sharded: missing input " + std::string(name(r)));
  return *it->second;
}

// ---------------------------------------------------------------------------
// GroupNorm with the statistics of the whole volume: the local operator's
// partials (kernels::groupnorm_partials), combined over the ranks in the
// rank tree in fp64 and rounded once to fp32, then the local operator's
// finish with the combined partials (kernels::groupnorm_finish).

// (count, mean, M2) triples: Chan's pairwise combine.
void chan_combine(std::vector<double>& a, const std::vector<double>& b) {
  for (std::size_t i = 0; i < a.size(); i += 3) {
    const double na = a[i], nb = b[i], n = na + nb;
    if (nb == 0) continue;
    const double delta = b[i + 1] - a[i + 1];
    a[i + 1] = a[i + 1] + delta * (nb / n);
    a[i + 2] = a[i + 2] + b[i + 2] + delta * delta * (na * nb / n);
    a[i] = n;
  }
}

std::map<Role, Tensor> gn_global(MPI_Comm comm, const GroupNormProblem& whole, const GroupNormProblem& local,
                                 const std::map<Role, const Tensor*>& in, const LocalOp& op, const std::string& what) {
  const Tensor part = agreed(comm, "GroupNorm partials of " + what, [&] { return op.gn_partials(local, in); });
  std::vector<double> v(static_cast<std::size_t>(part.numel()));
  for (std::int64_t i = 0; i < part.numel(); ++i) v[i] = part.get(i);
  const bool fwd = whole.dir == GnDir::fwd;
  v = tree_reduce(comm, std::move(v), fwd ? chan_combine : add_into, fwd ? "GroupNorm moments" : "GroupNorm backward sums");
  Tensor comb(DType::fp32, part.dims());
  for (std::int64_t i = 0; i < comb.numel(); ++i) comb.set(i, v[i]);
  return agreed(comm, "GroupNorm finish of " + what, [&] { return op.gn_finish(local, in, comb, whole.group_size()); });
}

}  // namespace

std::string current_phase() {
  std::lock_guard lock(g_phase_mu);
  return g_phase;
}

Slabs even_slabs(std::int64_t d, int ranks) {
  if (ranks < 1) throw InputError("ranks", "must be >= 1");
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(ranks), d / ranks);
  for (std::int64_t r = 0; r < d % ranks; ++r) ++sizes[r];
  return slabs_of_sizes(sizes);
}

Slabs slabs_of_sizes(const std::vector<std::int64_t>& sizes) {
  Slabs s;
  s.begin = {0};
  for (std::int64_t v : sizes) {
    if (v < 0) throw InputError("slabs", "a slab has a negative size");
    s.begin.push_back(s.begin.back() + v);
  }
  return s;
}

std::string to_string(const Slabs& s) {
  std::string o;
  for (std::size_t i = 0; i < s.begin.size(); ++i) o += (i ? "|" : "") + std::to_string(s.begin[i]);
  return o;
}

LocalOp production_kernels() {
  return {"kernels", [](const Problem& p) { return kernels::is_supported(p); },
          [](const Problem& p) { return kernels::plan(p); },
          [](const Problem& p, const kernels::Plan& pl, const std::map<Role, const Tensor*>& in) {
            return kernels::run(p, pl, in);
          },
          [](const GroupNormProblem& p, const std::map<Role, const Tensor*>& in) {
            return kernels::groupnorm_partials(p, in);
          },
          [](const GroupNormProblem& p, const std::map<Role, const Tensor*>& in, const Tensor& combined,
             std::int64_t whole_group_elems) { return kernels::groupnorm_finish(p, in, combined, whole_group_elems); }};
}

Split split_of(const Problem& whole) {
  if (std::holds_alternative<GroupNormProblem>(whole)) return {true, "", 0, 1};
  const auto& c = std::get<ConvProblem>(whole);
  if (c.form != ShapeForm::logical) return {false, "the whole problem must be in logical form", 0, 1};
  if (c.op == ConvOp::conv3d) {
    if (c.stride[0] == 1 && c.dilation[0] == 1 && c.kernel[0] % 2 == 1 && c.pad_front[0] == c.kernel[0] / 2 &&
        c.pad_back[0] == c.kernel[0] / 2)
      return {true, "", c.kernel[0] / 2, 1};
    return {false, "conv3d splits along D only with stride 1, dilation 1, an odd kernel and padding kd/2 along D", 0, 1};
  }
  if (c.kernel[0] == c.stride[0] && c.pad_front[0] == 0 && c.pad_back[0] == 0 && c.dilation[0] == 1 &&
      c.output_padding[0] == 0)
    return {true, "", 0, c.stride[0]};
  return {false, "conv_transpose3d splits along D only with kernel = stride, no padding, dilation 1", 0, 1};
}

Problem local_problem(const Problem& whole, const Slabs& slabs, int rank) {
  const Split sp = split_of(whole);
  if (!sp.ok) throw ShardError(sp.reason);
  if (rank < 0 || rank >= slabs.ranks()) throw ShardError("rank " + std::to_string(rank) + " has no slab");
  const std::int64_t d = slabs.size(rank);
  if (d < std::max<std::int64_t>(1, sp.halo))
    throw ShardError("thin shard: rank " + std::to_string(rank) + " holds " + std::to_string(d) +
                     " plane(s), fewer than max(1, halo " + std::to_string(sp.halo) + ")");
  if (const auto* g = std::get_if<GroupNormProblem>(&whole)) {
    GroupNormProblem q = *g;
    q.spatial[0] = d;
    return q;
  }
  ConvProblem q = std::get<ConvProblem>(whole);
  q.in[0] = d + 2 * sp.halo;
  if (sp.halo > 0) {
    q.form = ShapeForm::adapter;
    q.halo = {sp.halo, 0, 0};
    q.pad_front[0] = q.pad_back[0] = 0;
  }
  return q;
}

bool is_activation(const Problem& p, Role r) {
  (void)p;
  return r == Role::x || r == Role::y || r == Role::dx || r == Role::dy;
}

std::pair<std::int64_t, std::int64_t> role_planes(const Problem& whole, Role r, const Slabs& slabs, int rank) {
  const std::int64_t k = (r == Role::y || r == Role::dy) ? split_of(whole).y_per_x : 1;
  return {slabs.d0(rank) * k, (slabs.d0(rank) + slabs.size(rank)) * k};
}

kernels::Support route(MPI_Comm comm, const Problem& whole, const Slabs& slabs, const LocalOp& op, GnStats gn) {
  const int me = rank_of(comm), n = size_of(comm);
  Phase ph("routing " + op_dir_name(whole));
  kernels::Support mine;
  // Ranks must agree on the problem and the slabs before anything else.
  const std::string key = to_descriptor(whole) + " slabs " + to_string(slabs) + " stats " +
                          (gn == GnStats::global ? "global" : "per-shard") + " op " + op.name;
  const std::uint64_t h = std::hash<std::string>{}(key);
  std::vector<std::uint64_t> all(static_cast<std::size_t>(n));
  MPI_Allgather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm);
  try {
    validate(whole);
    const Split sp = split_of(whole);
    if (std::any_of(all.begin(), all.end(), [&](std::uint64_t v) { return v != h; }))
      mine = {false, "the ranks were given different problems or slabs (this rank: " + key + ")"};
    else if (!sp.ok)
      mine = {false, sp.reason};
    else if (slabs.ranks() != n)
      mine = {false, "slabs for " + std::to_string(slabs.ranks()) + " ranks on a communicator of " + std::to_string(n)};
    else if (slabs.begin.front() != 0 || slabs.total() != x_planes(whole))
      mine = {false, "slabs " + to_string(slabs) + " do not cover D of the whole problem"};
    else if (gn == GnStats::global && !std::holds_alternative<GroupNormProblem>(whole))
      mine = {false, "global statistics are a GroupNorm option"};
    else {
      const Problem local = local_problem(whole, slabs, me);  // thin shard: ShardError
      if (gn == GnStats::global && !(op.gn_partials && op.gn_finish))
        mine = {false, "local operator " + op.name + " has no GroupNorm partials/finish phases"};
      else if (gn == GnStats::global && !(mine = op.supported(whole)))
        mine.reason = "whole volume: " + mine.reason;
      else
        mine = op.supported(local);
    }
  } catch (const std::exception& e) {
    mine = {false, e.what()};
  }
  return agree(comm, mine);
}

ReductionPlan combined(const ReductionPlan& local, std::int64_t parts, DType stored) {
  if (parts <= 1) return local;
  ReductionPlan p = local;
  if (local.splits > 1 && local.combine == PartialCombine::serial) {
    p.splits = local.splits * parts;
  } else {
    std::int64_t pow2 = 1;
    while (pow2 < parts) pow2 *= 2;
    p.combine = PartialCombine::tree;
    p.splits = local.splits * pow2;
  }
  if (significand_bits(stored) < significand_bits(p.partial)) p.partial = stored;
  return p;
}

Tensor d_planes(const Tensor& t, std::int64_t d0, std::int64_t d1) {
  const Geom5 g = geom5(t);
  if (d0 < 0 || d1 > g.d || d0 > d1) throw std::logic_error("d_planes: planes out of range");
  Tensor out(t.dtype(), with_d(t.dims(), d1 - d0));
  const std::int64_t es = static_cast<std::int64_t>(size_of(t.dtype()));
  for (std::int64_t n = 0; n < g.n; ++n)
    std::memcpy(static_cast<char*>(out.data()) + (n * (d1 - d0) * g.plane) * es,
                static_cast<const char*>(t.data()) + ((n * g.d + d0) * g.plane) * es,
                static_cast<std::size_t>((d1 - d0) * g.plane * es));
  return out;
}

Tensor gather_planes(MPI_Comm comm, const Tensor& slab, int root) {
  const int me = rank_of(comm), n = size_of(comm);
  Phase ph("gathering planes at rank " + std::to_string(root));
  std::int64_t d = geom5(slab).d;
  std::vector<std::int64_t> ds(static_cast<std::size_t>(n));
  MPI_Gather(&d, 1, MPI_INT64_T, ds.data(), 1, MPI_INT64_T, root, comm);
  std::vector<MPI_Request> reqs;
  if (me != root) {
    post_send(comm, slab.data(), slab.nbytes(), root, 16, reqs);
    wait_all(reqs);
    return {};
  }
  std::int64_t total = 0;
  for (std::int64_t v : ds) total += v;
  Tensor out(slab.dtype(), with_d(slab.dims(), total));
  std::int64_t at = 0;
  for (int r = 0; r < n; ++r) {
    if (r == root) {
      put_planes(out, at, slab);
    } else {
      Tensor part(slab.dtype(), with_d(slab.dims(), ds[r]));
      post_recv(comm, part.data(), part.nbytes(), r, 16, reqs);
      wait_all(reqs);
      put_planes(out, at, part);
    }
    at += ds[r];
  }
  return out;
}

Output run(MPI_Comm comm, const Problem& whole, const Slabs& slabs, const std::map<Role, const Tensor*>& in,
           const LocalOp& op, GnStats gn) {
  const kernels::Support s = route(comm, whole, slabs, op, gn);
  if (!s) throw ShardError("sharded " + op_dir_name(whole) + " declined: " + s.reason);
  const int me = rank_of(comm), n = size_of(comm);
  const Split sp = split_of(whole);
  Output o;
  o.local = local_problem(whole, slabs, me);
  const std::string what = op_dir_name(whole) + " on rank " + std::to_string(me);

  o.local_plan = agreed(comm, "planning " + what, [&] { return op.plan(o.local); });
  auto plan_of = [&](Role r) {
    auto it = o.local_plan.reduction.find(std::string(name(r)));
    if (it == o.local_plan.reduction.end()) throw ShardError("local plan declares no reduction for " + std::string(name(r)));
    return it->second;
  };

  if (gn == GnStats::global) {
    const auto& g = std::get<GroupNormProblem>(whole);
    o.tensors = gn_global(comm, g, std::get<GroupNormProblem>(o.local), in, op, what);
    // Every output rests on partials combined over the ranks and stored in
    // fp32: the local plan's reduction with the rank tree as further splits.
    for (const auto& spec : outputs(whole))
      o.reduction[std::string(name(spec.role))] = combined(plan_of(spec.role), n, DType::fp32);
    return o;
  }

  auto run_local = [&](const std::map<Role, const Tensor*>& lin) {
    return agreed(comm, "local " + what + " (" + op.name + ")", [&] { return op.run(o.local, o.local_plan, lin); });
  };
  if (const auto* g = std::get_if<GroupNormProblem>(&whole)) {
    o.tensors = run_local(in);
    for (const auto& spec : outputs(whole)) {
      const std::string role(name(spec.role));
      if (spec.role == Role::dgamma || spec.role == Role::dbeta) {
        o.tensors[spec.role] = ordered_sum(comm, o.tensors.at(spec.role), "GroupNorm " + role);
        o.reduction[role] = combined(plan_of(spec.role), n, spec.dtype);
      } else {
        o.reduction[role] = plan_of(spec.role);
      }
    }
    (void)g;
    return o;
  }

  const auto& c = std::get<ConvProblem>(whole);
  std::map<Role, const Tensor*> lin = in;
  switch (c.dir) {
    case ConvDir::fwd: {
      const Tensor xe = with_halo(comm, input(in, Role::x), sp.halo);
      lin[Role::x] = &xe;
      o.tensors = run_local(lin);
      o.reduction["y"] = plan_of(Role::y);
      break;
    }
    case ConvDir::bwd_data: {
      std::map<Role, Tensor> got = run_local(lin);
      o.tensors[Role::dx] = return_halo(comm, got.at(Role::dx), sp.halo);
      // A plane near a cut sums its own part and up to one from each neighbour.
      const std::int64_t parts = sp.halo > 0 ? 1 + std::min(2, n - 1) : 1;
      o.reduction["dx"] = combined(plan_of(Role::dx), parts, c.dst);
      break;
    }
    case ConvDir::bwd_weight: {
      Tensor xe;
      if (c.op == ConvOp::conv3d) {
        xe = with_halo(comm, input(in, Role::x), sp.halo);
        lin[Role::x] = &xe;
      }
      std::map<Role, Tensor> got = run_local(lin);
      for (const auto& spec : outputs(whole)) {
        const std::string role(name(spec.role));
        o.tensors[spec.role] = ordered_sum(comm, got.at(spec.role), op_dir_name(whole) + " " + role);
        o.reduction[role] = combined(plan_of(spec.role), n, spec.dtype);
      }
      break;
    }
  }
  return o;
}

}  // namespace kgate::sharded
