#include "weftd_pool.hpp"

#include "weft/common/log.hpp"
#include "weft/common/text.hpp"

namespace weft::web {
namespace {

constexpr const char* kLog = "weft-web";

}  // namespace

WeftdPool::WeftdPool(zmq::context_t& ctx, client::Options options, int threads)
    : endpoint_(options.endpoint), timeout_(std::chrono::milliseconds(options.timeout_ms)) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, &ctx, options] {
      client::Client client(ctx, options);
      Run(client);
    });
  }
}

WeftdPool::~WeftdPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WeftdPool::Submit(std::function<void(client::Client&)> job, std::function<void()> expired) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(Job{std::chrono::steady_clock::now(), std::move(job), std::move(expired)});
  }
  cv_.notify_one();
}

void WeftdPool::Run(client::Client& client) {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;  // calls still queued are dropped with their handlers: the server is stopping
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (job.expired && std::chrono::steady_clock::now() - job.queued_at >= timeout_) {
      job.expired();
      continue;
    }
    job.run(client);
  }
}

Status WeftdPool::Expired(const std::string& op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++failed_;
  }
  return Status::Timeout("'" + op + "' waited " + std::to_string(timeout_.count()) +
                         " ms for a connection to weftd at " + endpoint_ +
                         ", all busy with calls it did not answer; not sent");
}

void WeftdPool::Note(const Status& transport) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (!transport.ok()) {
    ++failed_;
    if (failing_since_) return;
    failing_since_ = now;
    WEFT_LOG(kWarn, kLog) << "weftd at " << endpoint_ << " does not answer: " << transport.message()
                          << "; browsers get 503 until it does (logged once; the recovery is logged too)";
    return;
  }
  if (!failing_since_) return;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - *failing_since_).count();
  WEFT_LOG(kInfo, kLog) << "weftd at " << endpoint_ << " answers again, after " << DurationText(ms) << " in which "
                        << failed_ << " calls failed";
  failing_since_.reset();
  failed_ = 0;
}

}  // namespace weft::web
