# cmake -DMESSAGE=... -P fail.cmake: prints MESSAGE and exits non-zero (a
# CTest that must fail with a reason, e.g. a missing dependency).
message(FATAL_ERROR "${MESSAGE}")
