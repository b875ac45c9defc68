// rt::regs<T, N>: a work-item's register array (accumulator tiles, staged
// operands): T[N]'s storage and layout on every backend. On the host backend
// every index is checked (check_register_index, host_backend.hpp): a write
// or read outside [0, N) is a kernel error naming the index, the bound, the
// kernel and the work-item, so a tile index defect fails on the emulator
// without AddressSanitizer. The device backends compile the check away.
// Nest for two dimensions: regs<regs<float, N>, M>.
#pragma once

namespace kgate::rt {

template <class T, int N>
struct regs {
  T v[N];
  KGATE_DEVICE T& operator[](int i) {
    check_register_index(i, N);
    return v[i];
  }
  KGATE_DEVICE const T& operator[](int i) const {
    check_register_index(i, N);
    return v[i];
  }
  static constexpr int size() { return N; }
};

}  // namespace kgate::rt
