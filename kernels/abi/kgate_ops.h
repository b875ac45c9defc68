/* kgate's kernels behind a C interface (libkgate_ops_<backend>.so), over
 * caller-owned device memory: what PyTorch modules (tools/python/kgate/ops.py,
 * loaded with ctypes) and any other framework call.
 *
 * A problem is named by its kgate descriptor ("conv3d.fwd bf16 n1 c64 k64
 * d16 kd3 p1 bias", `kgate desc` parses it; docs: README "Descriptors").
 * Tensors are NDHWC (the weight [Cout][KD][KH][KW][Cin/g], conv_transpose3d
 * [Cin][KD][KH][KW][Cout/g]), dense (channels_last_3d-contiguous in
 * PyTorch terms), 16-byte aligned; anything else is declined, with the
 * reason, so the caller can fall back. Nothing here allocates: the caller
 * gives the workspace kgate_ops_query reports, and the stream (a
 * cudaStream_t on the CUDA backend; ignored on the host backend, whose
 * "device" memory is host memory). No C++ exception crosses this interface:
 * every function returns a status and writes a message into `msg`
 * (truncated to msg_size, always NUL-terminated when msg_size > 0).
 */
#ifndef KGATE_OPS_H
#define KGATE_OPS_H

#include <stddef.h>
#include <stdint.h>

#if defined(KGATE_OPS_EXPORT)
#define KGATE_OPS_API __attribute__((visibility("default")))
#else
#define KGATE_OPS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KGATE_OPS_ABI_VERSION 1

enum kgate_ops_status {
  KGATE_OPS_OK = 0,
  KGATE_OPS_DECLINED = 1,      /* not supported (the reason in msg): fall back */
  KGATE_OPS_BAD_INPUT = 2,     /* malformed descriptor, missing or mismatched tensor, short workspace */
  KGATE_OPS_LAUNCH_FAILED = 3  /* the launch failed (a runtime or device error) */
};

typedef struct kgate_ops_tensor {
  const char* role;   /* "x", "w", "b", "dy", "y", "dx", "dw", "db", "gamma", "beta", "mean", "rstd", "dgamma", "dbeta" */
  void* data;         /* device memory (host memory on the host backend) */
  const char* dtype;  /* "fp32", "bf16", "fp16" */
  int32_t ndim;
  int64_t dims[8];
  int64_t strides[8]; /* in elements */
} kgate_ops_tensor;

/* KGATE_OPS_ABI_VERSION of the library. */
KGATE_OPS_API int32_t kgate_ops_abi_version(void);
/* "host", "cuda" or "hip". */
KGATE_OPS_API const char* kgate_ops_backend(void);
/* Whether the library runs `descriptor` (*supported 1 or 0, the reason in
 * msg when 0) and the workspace bytes its run needs. */
KGATE_OPS_API int32_t kgate_ops_query(const char* descriptor, int32_t* supported, uint64_t* workspace_bytes, char* msg,
                        size_t msg_size);
/* Runs `descriptor` on `tensors` (every input and output role of the
 * problem, once each), asynchronously on `stream`. */
KGATE_OPS_API int32_t kgate_ops_run(const char* descriptor, const kgate_ops_tensor* tensors, int32_t n_tensors, void* workspace,
                      uint64_t workspace_bytes, void* stream, char* msg, size_t msg_size);

#ifdef __cplusplus
}
#endif

#endif
