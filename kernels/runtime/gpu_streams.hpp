// Streams, events, graphs and the copies and fills on them: one host-side
// implementation for the CUDA and HIP backends (runtime.hpp's section 10),
// over the vendor shim the including backend defines first (namespace
// kgate::rt::vendor: the runtime's types and calls, and `call`, the name
// an error message gives a call: "cudaStreamCreate", "hipStreamCreate").
// Every call is checked with the backend's detail::check.
#pragma once

#include <cstddef>

namespace kgate::rt {

class Stream {
 public:
  Stream() { detail::check(vendor::stream_create(&s_), vendor::call("StreamCreate")); }
  // concurrent: the stream does not synchronise with the default stream, so
  // its work overlaps the default stream's (the determinism audit's noise).
  explicit Stream(bool concurrent) {
    detail::check(vendor::stream_create_with_flags(&s_, concurrent), vendor::call("StreamCreateWithFlags"));
  }
  ~Stream() { (void)vendor::stream_destroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void synchronize() { detail::check(vendor::stream_synchronize(s_), vendor::call("StreamSynchronize")); }
  vendor::stream_t native() const { return s_; }

 private:
  vendor::stream_t s_ = nullptr;
};

namespace detail {
// The stream a Graph is capturing on this thread (null: none). While one
// is, every operation that names no stream goes to it and is captured.
inline vendor::stream_t& capture_stream() {
  static thread_local vendor::stream_t s = nullptr;
  return s;
}
inline vendor::stream_t native(Stream* s) { return s ? s->native() : capture_stream(); }
}  // namespace detail

// While a StreamScope lives on a host thread, every operation that thread
// issues without naming a stream goes to `native` (a caller's stream, e.g.
// PyTorch's current one through kgate's C ABI), and is captured with it
// when that stream is capturing a graph. A null `native` changes nothing.
class StreamScope {
 public:
  explicit StreamScope(void* native) : prev_(detail::capture_stream()) {
    if (native) detail::capture_stream() = static_cast<vendor::stream_t>(native);
  }
  ~StreamScope() { detail::capture_stream() = prev_; }
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  vendor::stream_t prev_;
};

class Event {
 public:
  Event() { detail::check(vendor::event_create(&e_), vendor::call("EventCreate")); }
  ~Event() { (void)vendor::event_destroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(Stream* s = nullptr) {
    detail::check(vendor::event_record(e_, detail::native(s)), vendor::call("EventRecord"));
  }
  void synchronize() const { detail::check(vendor::event_synchronize(e_), vendor::call("EventSynchronize")); }
  friend float elapsed_ms(const Event& start, const Event& stop) {
    float ms = 0.0f;
    detail::check(vendor::event_elapsed_ms(&ms, start.e_, stop.e_), vendor::call("EventElapsedTime"));
    return ms;
  }

 private:
  vendor::event_t e_ = nullptr;
};

float elapsed_ms(const Event& start, const Event& stop);

inline void device_synchronize() { detail::check(vendor::device_synchronize(), vendor::call("DeviceSynchronize")); }

// A launch sequence recorded once and replayed as one unit (a CUDA or HIP
// graph), so that no host launch gap lies between its kernels. The
// constructor calls `record` with every operation this thread issues without
// naming a stream captured instead of run; replay() runs the captured work on
// the default stream, in order with the work around it. `record` may only
// launch kernels and issue fills and device-to-device copies (no
// synchronisation).
inline constexpr bool has_graphs = true;
class Graph {
 public:
  template <class F>
  explicit Graph(F&& record) {
    Stream s(true);  // the legacy default stream cannot be captured
    detail::check(vendor::begin_capture(s.native()), vendor::call("StreamBeginCapture"));
    detail::capture_stream() = s.native();
    vendor::graph_t g = nullptr;
    try {
      record();
    } catch (...) {
      detail::capture_stream() = nullptr;
      (void)vendor::end_capture(s.native(), &g);
      if (g) (void)vendor::graph_destroy(g);
      throw;
    }
    detail::capture_stream() = nullptr;
    detail::check(vendor::end_capture(s.native(), &g), vendor::call("StreamEndCapture"));
    const auto e = vendor::graph_instantiate(&exec_, g);
    (void)vendor::graph_destroy(g);
    detail::check(e, vendor::call("GraphInstantiate"));
  }
  ~Graph() {
    if (exec_) (void)vendor::graph_exec_destroy(exec_);
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void replay() { detail::check(vendor::graph_launch(exec_), vendor::call("GraphLaunch")); }

 private:
  vendor::graph_exec_t exec_ = nullptr;
};

// Copies and fills (section 9) on a stream: asynchronous on a stream,
// synchronous on the default one (asynchronous while a Graph captures).
namespace detail {
inline void copy(void* dst, const void* src, std::size_t bytes, vendor::copy_kind kind, const char* dir, Stream* s) {
  if (s || capture_stream())
    check(vendor::memcpy_async(dst, src, bytes, kind, native(s)), vendor::call("MemcpyAsync(") + dir + ")");
  else
    check(vendor::memcpy_sync(dst, src, bytes, kind), vendor::call("Memcpy(") + dir + ")");
}
}  // namespace detail
inline void copy_h2d(void* dst, const void* src, std::size_t bytes, Stream* s) {
  detail::copy(dst, src, bytes, vendor::copy_kind::h2d, "h2d", s);
}
inline void copy_d2h(void* dst, const void* src, std::size_t bytes, Stream* s = nullptr) {
  detail::copy(dst, src, bytes, vendor::copy_kind::d2h, "d2h", s);
}
inline void copy_d2d(void* dst, const void* src, std::size_t bytes, Stream* s = nullptr) {
  detail::copy(dst, src, bytes, vendor::copy_kind::d2d, "d2d", s);
}
inline void device_memset(void* dst, int byte, std::size_t bytes, Stream* s = nullptr) {
  if (s || detail::capture_stream())
    detail::check(vendor::memset_async(dst, byte, bytes, detail::native(s)), vendor::call("MemsetAsync"));
  else
    detail::check(vendor::memset_sync(dst, byte, bytes), vendor::call("Memset"));
}

}  // namespace kgate::rt
