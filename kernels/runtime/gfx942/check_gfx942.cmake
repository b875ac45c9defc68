# The gfx942 compile gate for one source file (run by CTest, label gfx942).
#   1. device: clang -x hip --offload-arch=gfx942 --cuda-device-only -S, with
#      -Rpass-analysis=kernel-resource-usage; the ISA listing is kept in
#      OUT_DIR/NAME.gfx942.s and assembled to an object with llvm-mc when found;
#   2. host: the host half (launch stubs, HIP API calls) compiled to an object;
#   3. the resource report of every kernel is printed as a table and checked:
#      no scratch, no spills, no dynamic stack, static LDS <= 64 KiB.
#   4. with EXPECT_ISA (a ;-separated list), every listed instruction must
#      appear in the ISA listing (e.g. the v_mfma_* an MMA atom compiles to).
# Inputs (-D): CLANG, LLVM_MC, BITCODE_DIR, SOURCE, NAME, ROOT, OUT_DIR,
# optional EXPECT_ISA.
cmake_minimum_required(VERSION 3.25)
file(MAKE_DIRECTORY ${OUT_DIR})
set(common -x hip --offload-arch=gfx942 -std=c++20 -O3 -ffp-contract=off -fno-fast-math
    -Wall -Wextra -Werror -I${ROOT} --rocm-device-lib-path=${BITCODE_DIR})

execute_process(
  COMMAND ${CLANG} ${common} --cuda-device-only -S ${SOURCE} -o ${OUT_DIR}/${NAME}.gfx942.s
          -Rpass-analysis=kernel-resource-usage
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gfx942 device compile of ${SOURCE} failed:\n${out}${err}")
endif()

if(LLVM_MC)
  execute_process(
    COMMAND ${LLVM_MC} -triple=amdgcn-amd-amdhsa -mcpu=gfx942 -filetype=obj ${OUT_DIR}/${NAME}.gfx942.s
            -o ${OUT_DIR}/${NAME}.gfx942.o
    RESULT_VARIABLE rc ERROR_VARIABLE mcerr)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "llvm-mc could not assemble the gfx942 ISA of ${SOURCE}:\n${mcerr}")
  endif()
endif()

execute_process(
  COMMAND ${CLANG} ${common} --cuda-host-only -c ${SOURCE} -o ${OUT_DIR}/${NAME}.host.o
  RESULT_VARIABLE rc OUTPUT_VARIABLE hout ERROR_VARIABLE herr)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "HIP host-side compile of ${SOURCE} failed:\n${hout}${herr}")
endif()

# Parse the remarks: "...: remark: Function Name: <mangled> [...]" then
# "...: remark:     <Key>: <value> [...]" lines for that kernel.
string(REPLACE "\n" ";" lines "${err}")
set(kernels "")
set(cur "")
foreach(line IN LISTS lines)
  if(line MATCHES "remark: Function Name: ([^ ]+) \\[")
    set(cur "${CMAKE_MATCH_1}")
    list(APPEND kernels "${cur}")
  elseif(cur AND line MATCHES "remark: +([^:]+): ([A-Za-z0-9]+) \\[-Rpass")
    set(key "${CMAKE_MATCH_1}")
    set(value "${CMAKE_MATCH_2}")
    string(REGEX REPLACE " \\[.*\\]$" "" key "${key}")
    string(REPLACE " " "_" key "${key}")
    set("${cur}.${key}" "${value}")
  endif()
endforeach()
list(LENGTH kernels nk)
if(nk EQUAL 0)
  message(FATAL_ERROR "no kernel resource remarks for ${SOURCE}:\n${err}")
endif()

find_program(CXXFILT NAMES llvm-cxxfilt-19 llvm-cxxfilt c++filt)
set(failures "")
set(table "gfx942 resources for ${NAME} (${SOURCE}):\n")
string(APPEND table "  VGPR  AGPR  SGPR  scratch  spills(v/s)  LDS[B]  occupancy  kernel\n")
foreach(k IN LISTS kernels)
  set(pretty "${k}")
  if(CXXFILT)
    execute_process(COMMAND ${CXXFILT} ${k} OUTPUT_VARIABLE pretty OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  foreach(f VGPRs AGPRs SGPRs ScratchSize VGPRs_Spill SGPRs_Spill LDS_Size Occupancy Dynamic_Stack)
    if(NOT DEFINED "${k}.${f}")
      message(FATAL_ERROR "resource report of ${pretty} lacks ${f}:\n${err}")
    endif()
    set(${f} "${${k}.${f}}")
  endforeach()
  string(APPEND table "  ${VGPRs}\t${AGPRs}\t${SGPRs}\t${ScratchSize}\t ${VGPRs_Spill}/${SGPRs_Spill}\t\t${LDS_Size}\t${Occupancy}\t   ${pretty}\n")
  if(NOT ScratchSize EQUAL 0)
    list(APPEND failures "${pretty}: uses ${ScratchSize} bytes of scratch per lane")
  endif()
  if(NOT VGPRs_Spill EQUAL 0 OR NOT SGPRs_Spill EQUAL 0)
    list(APPEND failures "${pretty}: spills (VGPR ${VGPRs_Spill}, SGPR ${SGPRs_Spill})")
  endif()
  if(NOT Dynamic_Stack STREQUAL "False")
    list(APPEND failures "${pretty}: dynamic stack")
  endif()
  if(LDS_Size GREATER 65536)
    list(APPEND failures "${pretty}: static LDS ${LDS_Size} bytes > 65536")
  endif()
endforeach()
message("${table}")
if(EXPECT_ISA)
  file(READ ${OUT_DIR}/${NAME}.gfx942.s isa)
  foreach(instr IN LISTS EXPECT_ISA)
    string(REGEX MATCHALL "[ \t]${instr}[ \t]" hits "${isa}")
    list(LENGTH hits n)
    if(n EQUAL 0)
      list(APPEND failures "the ISA has no ${instr}")
    else()
      message("gfx942: ${instr} x ${n}")
    endif()
  endforeach()
endif()
if(failures)
  string(REPLACE ";" "\n  " failures "${failures}")
  message(FATAL_ERROR "gfx942 resource check failed:\n  ${failures}")
endif()
message("gfx942: ${nk} kernel(s) of ${NAME} compiled; ISA in ${OUT_DIR}/${NAME}.gfx942.s")
