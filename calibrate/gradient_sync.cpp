// gradient_sync.cpp: the four gradient synchronizations behind GradientSync (gradient_sync.hpp), and the
// overlapped ones per model chunk.
#include "calibrate/gradient_sync.hpp"

#include <chrono>
#include <utility>

#include "calibrate/gradient_buckets.hpp"
#include "calibrate/torch_compat.hpp"
#include "calibrate/tp_comm.hpp"
#include "common/errors.hpp"

namespace itertime::calibrate {
namespace {

using Clock = std::chrono::steady_clock;

double since_us(Clock::time_point start) { return std::chrono::duration<double, std::micro>(Clock::now() - start).count(); }

int64_t element_count(const std::vector<torch::Tensor>& tensors) {
  int64_t count = 0;
  for (const auto& t : tensors) count += t.numel();
  return count;
}

// What every strategy shares: the setup, phase marks, device synchronization, time, the norms' TP sum.
class SyncBase : public GradientSync {
 public:
  explicit SyncBase(GradientSyncSetup setup) : s_(std::move(setup)) {
    ITERTIME_CHECK(s_.dp_comm != nullptr && s_.ranks >= 1 && s_.rank >= 0 && s_.rank < s_.ranks,
                   "a gradient sync needs its group's communicator and 0 <= rank < ranks");
    ITERTIME_CHECK(s_.norm_weights.empty() || s_.tp_comm != nullptr, "the norms' TP sum needs the TP communicator");
  }
  SyncBase(const SyncBase&) = delete;
  SyncBase& operator=(const SyncBase&) = delete;

 protected:
  void mark(Phase phase) const {
    if (s_.mark_phase) s_.mark_phase(phase);
  }
  void sync_device() const {
    if (s_.cuda) torch::cuda::synchronize();
  }
  void add_dp_time(Clock::time_point start) const {
    if (s_.dp_comm_us != nullptr) *s_.dp_comm_us += since_us(start);
  }
  void clear_gradients() {
    for (auto& p : s_.parameters) p.mutable_grad() = torch::Tensor();
  }
  std::vector<torch::Tensor> parameter_gradients() const {
    std::vector<torch::Tensor> grads;
    for (const auto& p : s_.parameters) grads.push_back(p.grad());
    return grads;
  }
  // With SP each TP rank's norm weights saw only its sequence shard: their gradients are summed over TP
  // (Megatron's all-reduce of the sequence-parallel parameters' gradients), as TP communication.
  void sum_norm_gradients() {
    if (s_.norm_weights.empty()) return;
    const auto start = Clock::now();
    mark(Phase::kSpGradients);
    torch::Tensor flat = make_flat_buffer(s_.norm_weights);
    flatten_into(flat, s_.norm_weights, FlatPart::kGradient);
    all_reduce_tensor(*s_.tp_comm, flat, s_.cuda);
    unflatten_from(flat, s_.norm_weights, FlatPart::kGradient);
    if (s_.tp_comm_us != nullptr) *s_.tp_comm_us += since_us(start);
  }

  GradientSyncSetup s_;
};

// ---- all-reduce of one flat buffer (no technique) ----
class AllReduceSync final : public SyncBase {
 public:
  using SyncBase::SyncBase;
  void begin_step() override { clear_gradients(); }
  void reduce() override {
    sum_norm_gradients();
    mark(Phase::kDpBuffer);
    const auto start = Clock::now();
    if (s_.ranks > 1) {
      torch::NoGradGuard no_grad;
      if (!buffer_.defined()) buffer_ = make_flat_buffer(s_.parameters);  // reused every step (tp_comm.hpp)
      flatten_into(buffer_, s_.parameters, FlatPart::kGradient);
      buffer_.div_(static_cast<double>(s_.ranks));
      all_reduce_tensor(*s_.dp_comm, buffer_, s_.cuda);
      unflatten_from(buffer_, s_.parameters, FlatPart::kGradient);
    }
    add_dp_time(start);
  }
  std::vector<torch::Tensor> optimizer_parameters() const override { return s_.parameters; }
  std::vector<torch::Tensor> optimizer_gradients() const override { return parameter_gradients(); }
  int64_t optimizer_elements() const override { return element_count(s_.parameters); }

 private:
  torch::Tensor buffer_;
};

// ---- distributed optimizer: reduce-scatter into the shard, all-gather after the update ----
class ShardedSync final : public SyncBase {
 public:
  explicit ShardedSync(GradientSyncSetup setup)
      : SyncBase(std::move(setup)), sharded_(make_sharded_buffers(s_.parameters, s_.ranks, s_.rank)) {}
  void begin_step() override { clear_gradients(); }
  void reduce() override {
    sum_norm_gradients();  // before the reduce-scatter, which keeps only a shard
    mark(Phase::kDpBuffer);
    const auto start = Clock::now();
    fill_gradient_buffer(sharded_, s_.parameters, s_.ranks);
    sync_device();
    s_.dp_comm->reduce_scatter_sum(sharded_.gradient_buffer.data_ptr(), sharded_.shard_gradient.data_ptr(),
                                   static_cast<std::size_t>(sharded_.shard_count),
                                   from_torch(sharded_.shard_gradient.scalar_type()));
    s_.dp_comm->synchronize();
    sharded_.shard.mutable_grad() = sharded_.shard_gradient;
    add_dp_time(start);
  }
  // The updated shards of every rank into every rank's parameters.
  void after_update() override {
    const auto start = Clock::now();
    sync_device();
    s_.dp_comm->all_gather(sharded_.shard.data_ptr(), sharded_.parameter_buffer.data_ptr(),
                           static_cast<std::size_t>(sharded_.shard_count), from_torch(sharded_.shard.scalar_type()));
    s_.dp_comm->synchronize();
    {
      torch::NoGradGuard no_grad;
      unflatten_from(sharded_.parameter_buffer, s_.parameters, FlatPart::kValue);
    }
    sync_device();
    add_dp_time(start);
  }
  std::vector<torch::Tensor> optimizer_parameters() const override { return {sharded_.shard}; }
  std::vector<torch::Tensor> optimizer_gradients() const override { return {sharded_.shard_gradient}; }
  int64_t optimizer_elements() const override { return sharded_.shard_count; }

 private:
  ShardedBuffers sharded_;
};

// What the bucketed strategies share: the buckets, armed for the step's last backward, and the wait for
// their collectives after it. MPI advances started collectives only inside its calls, so every final
// gradient gives it a chance (progress).
class BucketedSyncBase : public SyncBase {
 public:
  using SyncBase::SyncBase;
  void begin_step() override {
    mark(Phase::kDpBuffer);
    buckets_->begin_step();  // the gradient views start from zero
  }
  void before_backward(int /*chunk*/, bool last_of_chunk) override { buckets_->arm(last_of_chunk); }
  int bucket_count() const override { return static_cast<int>(buckets_->size()); }
  int buckets_completed() const override { return buckets_->completed(); }

 protected:
  void make_buckets(GradientBuckets::BucketCallback on_bucket, int64_t pad_multiple) {
    buckets_ = std::make_unique<GradientBuckets>(
        s_.parameters, s_.techniques.gradient_bucket_bytes, std::move(on_bucket), [this] { s_.dp_comm->progress(); },
        pad_multiple);
  }
  // After the backward: waits for the buckets' collectives (in place, in the gradients' views).
  void finish_buckets() {
    buckets_->arm(false);
    const auto start = Clock::now();
    ITERTIME_CHECK(buckets_->completed() == static_cast<int>(buckets_->size()),
                   "a gradient bucket was not complete after the backward");
    s_.dp_comm->finish_started();
    add_dp_time(start);
  }

  std::unique_ptr<GradientBuckets> buckets_;
};

// ---- overlapped bucketed all-reduce ----
class BucketedAllReduceSync final : public BucketedSyncBase {
 public:
  explicit BucketedAllReduceSync(GradientSyncSetup setup) : BucketedSyncBase(std::move(setup)) {
    make_buckets(
        [this](std::size_t, torch::Tensor& bucket) {
          mark(Phase::kDpBuffer);
          bucket.div_(static_cast<double>(s_.ranks));
          mark(Phase::kBackward);  // the all-reduce starts inside the backward
          s_.dp_comm->start_all_reduce_sum(bucket.data_ptr(), static_cast<std::size_t>(bucket.numel()),
                                           from_torch(bucket.scalar_type()));
        },
        1);
  }
  void reduce() override {
    finish_buckets();
    sum_norm_gradients();  // after the buckets, whose reduction writes every gradient view
    mark(Phase::kDpBuffer);
  }
  std::vector<torch::Tensor> optimizer_parameters() const override { return s_.parameters; }
  std::vector<torch::Tensor> optimizer_gradients() const override { return parameter_gradients(); }
  int64_t optimizer_elements() const override { return element_count(s_.parameters); }
};

// ---- overlapped bucketed distributed optimizer (Megatron-LM's overlap_grad_reduce with its distributed
// optimizer), with opg its overlap_param_gather ----
class BucketedShardedSync final : public BucketedSyncBase {
 public:
  explicit BucketedShardedSync(GradientSyncSetup setup);
  void reduce() override;
  void after_update() override;
  std::vector<torch::Tensor> optimizer_parameters() const override { return {sharded_.shard}; }
  std::vector<torch::Tensor> optimizer_gradients() const override { return {sharded_.shard_gradient}; }
  int64_t optimizer_elements() const override { return sharded_.shard_count; }
  bool gathers_parameters() const override { return overlap_gather_; }
  int parameter_gathers_in_flight() const override { return gathers_in_flight_; }
  void wait_for_parameters(std::size_t first, std::size_t end) override;
  void finish_parameter_gathers() override;

 private:
  void sum_shard_norm_gradients();
  void all_gather_buckets();
  void start_parameter_gathers();
  void make_parameters_views_of_buffer();

  ShardedBuffers sharded_;              // gradient_buffer undefined: the buckets' buffer holds the gradients
  std::vector<int64_t> shard_offsets_;  // per bucket: where this rank's slice lies in the shard
  std::vector<std::pair<int64_t, int64_t>> shard_norm_ranges_;  // SP: (offset in the shard, elements)
  bool overlap_gather_ = false;
  std::vector<std::size_t> bucket_of_parameter_;  // opg: per parameter
  std::vector<char> gather_in_flight_;            // opg: per bucket
  std::vector<std::size_t> gather_ids_;           // opg: per bucket (Communicator::start_all_gather)
  int gathers_in_flight_ = 0;
};

// Bucket k's reduce-scatter, divided by `ranks` first, lands in this rank's slice of the shard's gradient.
BucketedShardedSync::BucketedShardedSync(GradientSyncSetup setup)
    : BucketedSyncBase(std::move(setup)), overlap_gather_(s_.techniques.overlap_parameter_gather) {
  make_buckets(
      [this](std::size_t index, torch::Tensor& bucket) {
        mark(Phase::kDpBuffer);
        bucket.div_(static_cast<double>(s_.ranks));
        mark(Phase::kBackward);  // the reduce-scatter starts inside the backward
        sync_device();           // NCCL's reduce-scatter runs on its own stream (comm.hpp)
        const int64_t slice = bucket.numel() / s_.ranks;
        const torch::Tensor mine = sharded_.shard_gradient.narrow(0, shard_offsets_[index], slice);
        s_.dp_comm->start_reduce_scatter_sum(bucket.data_ptr(), mine.data_ptr(), static_cast<std::size_t>(slice),
                                             from_torch(bucket.scalar_type()));
      },
      s_.ranks);
  BucketedShard shard = shard_over_buckets(*buckets_, s_.norm_weights, s_.ranks, s_.rank);
  sharded_ = std::move(shard.buffers);
  shard_offsets_ = std::move(shard.offsets);
  shard_norm_ranges_ = std::move(shard.norm_ranges);
  if (overlap_gather_) make_parameters_views_of_buffer();
}

// The norms' sum over TP on the shard's norm elements, DP-reduced already (the sums commute, as in
// Megatron-LM's finalize_model_grads, which sums them over TP after the DP reduction).
void BucketedShardedSync::reduce() {
  finish_buckets();
  sum_shard_norm_gradients();
  mark(Phase::kDpBuffer);
  sharded_.shard.mutable_grad() = sharded_.shard_gradient;
}

void BucketedShardedSync::sum_shard_norm_gradients() {
  if (shard_norm_ranges_.empty()) return;
  const auto start = Clock::now();
  mark(Phase::kSpGradients);
  std::vector<torch::Tensor> parts;
  for (const auto& [offset, count] : shard_norm_ranges_) parts.push_back(sharded_.shard_gradient.narrow(0, offset, count));
  torch::Tensor flat = torch::cat(parts);
  all_reduce_tensor(*s_.tp_comm, flat, s_.cuda);
  int64_t at = 0;
  for (auto& part : parts) {
    part.copy_(flat.narrow(0, at, part.numel()));
    at += part.numel();
  }
  if (s_.tp_comm_us != nullptr) *s_.tp_comm_us += since_us(start);
}

void BucketedShardedSync::after_update() {
  const auto start = Clock::now();
  if (overlap_gather_) {
    start_parameter_gathers();  // waited for in the next forward (or finish_parameter_gathers)
  } else {
    sync_device();
    all_gather_buckets();
    sync_device();
  }
  add_dp_time(start);
}

// The updated slices of every rank into every rank's parameters, bucket by bucket (blocking): per bucket
// its range of the buffer, then this rank's slice of the shard (the operators' order), then the copies.
void BucketedShardedSync::all_gather_buckets() {
  for (std::size_t k = 0; k < buckets_->size(); ++k) {
    const int64_t slice = buckets_->bucket_elements(k) / s_.ranks;
    const torch::Tensor gathered = sharded_.parameter_buffer.narrow(0, buckets_->bucket_offset(k), buckets_->bucket_elements(k));
    const torch::Tensor mine = sharded_.shard.narrow(0, shard_offsets_[k], slice);
    s_.dp_comm->all_gather(mine.data_ptr(), gathered.data_ptr(), static_cast<std::size_t>(slice),
                           from_torch(sharded_.shard.scalar_type()));
  }
  s_.dp_comm->synchronize();
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor>& parameters = s_.parameters;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    parameters[i].copy_(
        sharded_.parameter_buffer.narrow(0, buckets_->parameter_offset(i), parameters[i].numel()).view_as(parameters[i]));
  }
}

// opg, at construction: every parameter becomes a view of its range of the padded parameter buffer
// (which holds their values already, shard_over_buckets), as Megatron's parameters are views of its
// param buffer, so the all-gathers write the parameters themselves and nothing is copied back. The old
// storage is released (the parameters are held once). Same dtype and device: set_data keeps each
// parameter's gradient accumulator (the buckets' hooks) and its .grad view.
void BucketedShardedSync::make_parameters_views_of_buffer() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor>& parameters = s_.parameters;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    torch::Tensor& p = parameters[i];
    p.set_data(sharded_.parameter_buffer.narrow(0, buckets_->parameter_offset(i), p.numel()).view_as(p));
  }
  bucket_of_parameter_.assign(parameters.size(), 0);
  for (std::size_t k = 0; k < buckets_->size(); ++k) {
    const int64_t begin = buckets_->bucket_offset(k), end = begin + buckets_->bucket_elements(k);
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      if (buckets_->parameter_offset(i) >= begin && buckets_->parameter_offset(i) < end) bucket_of_parameter_[i] = k;
    }
  }
  gather_in_flight_.assign(buckets_->size(), 0);
  gather_ids_.assign(buckets_->size(), 0);
}

// opg, after AdamW: every bucket's all-gather of the updated slices into the parameter buffer (the
// parameters) started, in the order the next forward needs them: bucket K-1 (the first parameters)
// first. all_gather_buckets' operators, in reverse bucket order, without its copies.
void BucketedShardedSync::start_parameter_gathers() {
  sync_device();  // the shard's update is complete before the all-gathers read it
  for (std::size_t k = buckets_->size(); k-- > 0;) {
    const int64_t slice = buckets_->bucket_elements(k) / s_.ranks;
    const torch::Tensor gathered = sharded_.parameter_buffer.narrow(0, buckets_->bucket_offset(k), buckets_->bucket_elements(k));
    const torch::Tensor mine = sharded_.shard.narrow(0, shard_offsets_[k], slice);
    ITERTIME_CHECK(!gather_in_flight_[k], "a bucket's all-gather started while the previous one is in flight");
    gather_ids_[k] = s_.dp_comm->start_all_gather(mine.data_ptr(), gathered.data_ptr(), static_cast<std::size_t>(slice),
                                                  from_torch(sharded_.shard.scalar_type()));
    gather_in_flight_[k] = 1;
    ++gathers_in_flight_;
  }
}

// Before the forward uses parameters [first, end) (a part of a chunk, in forward order): waits for the
// all-gathers of the buckets holding them (bucket_of_parameter_ decreases along the parameters), lets
// the library advance the others; the time counts as DP communication.
void BucketedShardedSync::wait_for_parameters(std::size_t first, std::size_t end) {
  if (gathers_in_flight_ == 0 || first >= end) return;
  const auto start = Clock::now();
  for (std::size_t k = bucket_of_parameter_[first] + 1; k-- > bucket_of_parameter_[end - 1];) {
    if (!gather_in_flight_[k]) continue;
    s_.dp_comm->wait_started(gather_ids_[k]);
    gather_in_flight_[k] = 0;
    --gathers_in_flight_;
  }
  if (gathers_in_flight_ > 0) s_.dp_comm->progress();
  add_dp_time(start);
}

// Every started all-gather finished (after the last step: before a parameter check, or at the end).
void BucketedShardedSync::finish_parameter_gathers() {
  if (gathers_in_flight_ == 0) return;
  for (std::size_t k = gather_in_flight_.size(); k-- > 0;) {
    if (!gather_in_flight_[k]) continue;
    s_.dp_comm->wait_started(gather_ids_[k]);
    gather_in_flight_[k] = 0;
    --gathers_in_flight_;
  }
  sync_device();
}

// ---- an overlapped strategy over several model chunks (interleaved 1F1B): one per chunk over its own
// parameters (Megatron-Core's DistributedDataParallel per model chunk), all on the one DP communicator.
// Chunk k's buckets are armed for chunk k's last backward only. reduce() waits for each chunk's (the
// first wait finishes every started collective of the communicator, the others find theirs done) and
// sums each chunk's norms over TP; after_update() runs chunk 0's first, so that with opg the first
// forward's all-gathers are started first. ----
class PerChunkSync final : public GradientSync {
 public:
  explicit PerChunkSync(GradientSyncSetup setup);
  void begin_step() override {
    for (auto& chunk : chunks_) chunk->begin_step();
  }
  void before_backward(int chunk, bool last_of_chunk) override {
    ITERTIME_CHECK(chunk >= 0 && static_cast<std::size_t>(chunk) < chunks_.size(), "a backward of a chunk the sync lacks");
    chunks_[static_cast<std::size_t>(chunk)]->before_backward(0, last_of_chunk);
  }
  void reduce() override {
    for (auto& chunk : chunks_) chunk->reduce();
  }
  void after_update() override {
    for (auto& chunk : chunks_) chunk->after_update();
  }
  std::vector<torch::Tensor> optimizer_parameters() const override {
    return gather_tensors([](const GradientSync& chunk) { return chunk.optimizer_parameters(); });
  }
  std::vector<torch::Tensor> optimizer_gradients() const override {
    return gather_tensors([](const GradientSync& chunk) { return chunk.optimizer_gradients(); });
  }
  int64_t optimizer_elements() const override {
    int64_t elements = 0;
    for (const auto& chunk : chunks_) elements += chunk->optimizer_elements();
    return elements;
  }
  int bucket_count() const override {
    int count = 0;
    for (const auto& chunk : chunks_) count += chunk->bucket_count();
    return count;
  }
  int buckets_completed() const override {
    int count = 0;
    for (const auto& chunk : chunks_) count += chunk->buckets_completed();
    return count;
  }
  bool gathers_parameters() const override { return chunks_.front()->gathers_parameters(); }
  int parameter_gathers_in_flight() const override {
    int count = 0;
    for (const auto& chunk : chunks_) count += chunk->parameter_gathers_in_flight();
    return count;
  }
  // Parameters [first, end) of the whole list lie in one chunk (a part of one chunk's forward).
  void wait_for_parameters(std::size_t first, std::size_t end) override {
    if (first >= end) return;
    std::size_t k = 0;
    while (k + 1 < firsts_.size() && firsts_[k + 1] <= first) ++k;
    const std::size_t chunk_end = k + 1 < firsts_.size() ? firsts_[k + 1] : total_;
    ITERTIME_CHECK(end <= chunk_end, "a forward part's parameters span two model chunks");
    chunks_[k]->wait_for_parameters(first - firsts_[k], end - firsts_[k]);
  }
  void finish_parameter_gathers() override {
    for (auto& chunk : chunks_) chunk->finish_parameter_gathers();
  }

 private:
  template <typename Get>
  std::vector<torch::Tensor> gather_tensors(Get get) const {
    std::vector<torch::Tensor> all;
    for (const auto& chunk : chunks_) {
      const std::vector<torch::Tensor> part = get(*chunk);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }

  std::vector<std::unique_ptr<GradientSync>> chunks_;
  std::vector<std::size_t> firsts_;  // per chunk: its first parameter's index in the whole list
  std::size_t total_ = 0;
};

std::unique_ptr<GradientSync> make_one_sync(GradientSyncSetup setup);

PerChunkSync::PerChunkSync(GradientSyncSetup setup) {
  std::size_t first = 0;
  for (std::size_t count : setup.chunk_parameters) {
    ITERTIME_CHECK(count > 0, "a model chunk without parameters");
    GradientSyncSetup part = setup;
    part.chunk_parameters.clear();
    part.parameters.assign(setup.parameters.begin() + static_cast<std::ptrdiff_t>(first),
                           setup.parameters.begin() + static_cast<std::ptrdiff_t>(first + count));
    part.norm_weights.clear();
    for (const torch::Tensor& norm : setup.norm_weights) {
      for (const torch::Tensor& p : part.parameters) {
        if (p.is_same(norm)) part.norm_weights.push_back(norm);
      }
    }
    firsts_.push_back(first);
    chunks_.push_back(make_one_sync(std::move(part)));
    first += count;
  }
  total_ = first;
}

std::unique_ptr<GradientSync> make_one_sync(GradientSyncSetup setup) {
  const TrainingTechniques& t = setup.techniques;
  if (t.distributed_optimizer && t.overlap_gradient_reduction) return std::make_unique<BucketedShardedSync>(std::move(setup));
  if (t.distributed_optimizer) return std::make_unique<ShardedSync>(std::move(setup));
  if (t.overlap_gradient_reduction) return std::make_unique<BucketedAllReduceSync>(std::move(setup));
  return std::make_unique<AllReduceSync>(std::move(setup));
}

}  // namespace

std::unique_ptr<GradientSync> make_gradient_sync(GradientSyncSetup setup) {
  const TrainingTechniques& t = setup.techniques;
  ITERTIME_CHECK(!t.overlap_gradient_reduction || setup.ranks > 1, "overlapped reduction over one rank (techniques not at_dp)");
  ITERTIME_CHECK(!t.overlap_parameter_gather || (t.distributed_optimizer && t.overlap_gradient_reduction),
                 "opg without the distributed optimizer's buckets");
  std::size_t in_chunks = 0;
  for (std::size_t count : setup.chunk_parameters) in_chunks += count;
  ITERTIME_CHECK(setup.chunk_parameters.empty() || in_chunks == setup.parameters.size(),
                 "the model chunks' parameter counts do not add up to the parameters");
  if (t.overlap_gradient_reduction && setup.chunk_parameters.size() > 1) return std::make_unique<PerChunkSync>(std::move(setup));
  return make_one_sync(std::move(setup));
}

}  // namespace itertime::calibrate
