#!/bin/sh
# A stand-in C++ compiler for doctor tests. `--version`; `-print-file-name=libstdc++.so.6` prints
# $FAKE_CXX_LIBSTDCXX (else the bare name, as a compiler that does not know it does); `-x c`
# (the backtrace helper) fails unless $FAKE_CXX_C=ok; any other build writes an empty `-o`
# file, or fails with a compiler-like error when $FAKE_CXX_FAIL is set.
out=""
prev=""
c_mode=""
for arg in "$@"; do
  case "$arg" in
    --version) echo "fake-g++ (Fake) 99.1"; exit 0 ;;
    -print-file-name=*) echo "${FAKE_CXX_LIBSTDCXX:-libstdc++.so.6}"; exit 0 ;;
  esac
  if [ "$prev" = "-o" ]; then out="$arg"; fi
  if [ "$prev" = "-x" ] && [ "$arg" = "c" ]; then c_mode=1; fi
  prev="$arg"
done
if [ -n "$c_mode" ] && [ "$FAKE_CXX_C" != "ok" ]; then
  echo "fake-g++: C is not supported" >&2
  exit 1
fi
if [ -n "$FAKE_CXX_FAIL" ]; then
  echo "aotipre_hello.cpp:1:10: fatal error: string: No such file or directory" >&2
  exit 1
fi
[ -n "$out" ] && : > "$out"
exit 0
