#!/usr/bin/env bash
# Rebuild tests/binaries/data/*.cubin|*.fatbin (real GPU code members for the cubin/fatbin parser
# tests) from tests/binaries/data/kernel.cu. Needs nvcc and fatbinary (no GPU); the committed
# files were made with CUDA 13.0 (V13.0.88).
set -euo pipefail
cd "$(dirname "$0")/../tests/binaries/data"
nvcc -cubin -arch=sm_80 -o sm80.cubin kernel.cu
nvcc -cubin -arch=sm_90a -o sm90a.cubin kernel.cu
nvcc -cubin -arch=sm_100 -o sm100.cubin kernel.cu
# multi-arch: SASS sm_80 + sm_90 and PTX compute_80 (zstd-compressed by default)
nvcc -fatbin -gencode arch=compute_80,code=[sm_80,compute_80] -gencode arch=compute_90,code=sm_90 \
  -o multi.fatbin kernel.cu
# arch-specific (sm_90a, compute_90a) and family-specific (sm_100f, compute_100f) SASS and PTX
nvcc -fatbin -gencode arch=compute_90a,code=[sm_90a,compute_90a] \
  -gencode arch=compute_100f,code=[sm_100f,compute_100f] -o specific.fatbin kernel.cu
# PTX of ISA 8.4 only (the version rewritten in the text; the header records it)
nvcc -ptx -arch=compute_80 -o kernel.ptx kernel.cu
sed 's/^\.version [0-9.]*/.version 8.4/' kernel.ptx > ptx84.ptx
fatbinary --create=ptx84.fatbin -64 --compress=false --image3=kind=ptx,sm=80,file=ptx84.ptx
rm -f kernel.ptx ptx84.ptx
