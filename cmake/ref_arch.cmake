# The instruction set of the host's compute: the fast fp64 references
# (kgate_ref_ops, bench_ref), the host backend (kgate_runtime_host), the
# kernels as it runs them (kgate_kernels_host; not its coverage twin, whose
# gcov branch counts the floors are measured on) and the device reference on
# it (kgate_devref_host). The
# level never changes a result: every build has -ffp-contract=off and no
# fast-math, so a vector or FMA instruction computes what the scalar code
# states (the digests of the bitwise corpus are the same at every level).
#
# KGATE_REF_ARCH:
#   native    (default) the building machine's x86-64 micro-architecture
#             level: the highest of x86-64-v4, -v3, -v2 whose features the
#             compiler finds with -march=native. A level, not -march=native
#             itself, so that compiler caches (ccache) never hand an object
#             built on one machine to a machine of another level; the vector
#             units Eigen's GEMM uses (AVX2+FMA, AVX-512) are all in the level.
#   portable  the compiler's default target (baseline x86-64 on Debian).
#   <level>   any -march value, e.g. x86-64-v3 for a binary carried to a
#             machine of that level or higher.
# The result is KGATE_REF_MARCH: the -march value, or empty for portable.
set(KGATE_REF_ARCH "native" CACHE STRING
    "ISA of the fast references: native (the building machine's x86-64 level), portable, or a -march value")

function(kgate_resolve_ref_arch out)
  set(arch "${KGATE_REF_ARCH}")
  if(arch STREQUAL "" OR arch STREQUAL "portable")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  if(arch STREQUAL "native")
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -march=native -dM -E -x c++ /dev/null
                    OUTPUT_VARIABLE macros ERROR_QUIET RESULT_VARIABLE rc)
    set(arch "")
    if(rc EQUAL 0 AND macros MATCHES "__x86_64__")
      # The psABI levels, highest first, each with every macro it defines
      # (a level includes the ones below it).
      set(v2 __SSE3__ __SSSE3__ __SSE4_1__ __SSE4_2__ __POPCNT__)
      set(v3 ${v2} __AVX__ __AVX2__ __BMI__ __BMI2__ __F16C__ __FMA__ __LZCNT__ __MOVBE__)
      set(v4 ${v3} __AVX512F__ __AVX512BW__ __AVX512CD__ __AVX512DQ__ __AVX512VL__)
      foreach(level v4 v3 v2)
        set(all TRUE)
        foreach(m IN LISTS ${level})
          if(NOT macros MATCHES "#define ${m} ")
            set(all FALSE)
          endif()
        endforeach()
        if(all)
          set(arch "x86-64-${level}")
          break()
        endif()
      endforeach()
    endif()
    if(arch STREQUAL "")
      message(STATUS "kgate: fast references: no x86-64 level found with -march=native; portable build")
      set(${out} "" PARENT_SCOPE)
      return()
    endif()
  endif()
  include(CheckCXXCompilerFlag)
  string(MAKE_C_IDENTIFIER "KGATE_MARCH_${arch}" var)
  check_cxx_compiler_flag("-march=${arch}" ${var})
  if(NOT ${var})
    message(FATAL_ERROR "KGATE_REF_ARCH=${KGATE_REF_ARCH}: the compiler does not accept -march=${arch}")
  endif()
  set(${out} "${arch}" PARENT_SCOPE)
endfunction()

kgate_resolve_ref_arch(KGATE_REF_MARCH)
if(KGATE_REF_MARCH)
  message(STATUS "kgate: fast references built with -march=${KGATE_REF_MARCH} (KGATE_REF_ARCH=${KGATE_REF_ARCH})")
else()
  message(STATUS "kgate: fast references built for the compiler's default target (KGATE_REF_ARCH=${KGATE_REF_ARCH})")
endif()

# kgate_ref_arch(TARGET): compile TARGET's own sources for KGATE_REF_MARCH.
function(kgate_ref_arch target)
  if(KGATE_REF_MARCH)
    target_compile_options(${target} PRIVATE -march=${KGATE_REF_MARCH})
    # GCC 12's own AVX-512 intrinsics (the _mm512_undefined_pd operands of
    # _mm512_unpacklo_pd and _mm512_extractf64x4_pd, inlined into Eigen's GEMM
    # packing) trip -W(maybe-)uninitialized: GCC bug 105593, fixed in GCC 13.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE -Wno-uninitialized -Wno-maybe-uninitialized)
    endif()
  endif()
endfunction()
