// DeviceBuffer<T>: an owning, typed device allocation built on the backend's
// memory section. Backend-independent; included by runtime.hpp after the
// backend header.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace kgate::rt {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count)
      : ptr_(static_cast<T*>(device_malloc(count * sizeof(T)))), count_(count) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  T* data() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

  void upload(const std::vector<T>& host, Stream* s = nullptr) {
    if (host.size() != count_) throw Error("DeviceBuffer::upload: size mismatch");
    copy_h2d(ptr_, host.data(), bytes(), s);
  }
  std::vector<T> download(Stream* s = nullptr) const {
    std::vector<T> host(count_);
    copy_d2h(host.data(), ptr_, bytes(), s);
    if (s) s->synchronize();
    return host;
  }

 private:
  void reset() noexcept {
    if (ptr_) {
      try {
        device_free(ptr_);
      } catch (...) {
      }
    }
    ptr_ = nullptr;
    count_ = 0;
  }
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace kgate::rt
