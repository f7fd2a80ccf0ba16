#include "weftd_pool.hpp"

namespace weft::web {

WeftdPool::WeftdPool(zmq::context_t& ctx, client::Options options, int threads) {
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

void WeftdPool::Submit(std::function<void(client::Client&)> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void WeftdPool::Run(client::Client& client) {
  while (true) {
    std::function<void(client::Client&)> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;  // calls still queued are dropped with their handlers: the server is stopping
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job(client);
  }
}

}  // namespace weft::web
