"""Canned CUDA-style logs and generated code of TokenModel with an out-of-range id (600 of 500).

Modelled on what torch 2.11+cu130 printed on the H100 test machine (fixtures' TokenModel as
`aoti_cuda.pt2`, see tests/data/torch211) and on the printer's format: the first error blames
cuBLAS in `aoti_torch_cuda_mm_out`, while the embedding kernel asserted earlier.
"""

from __future__ import annotations

KERNEL = "triton_poi_fused_embedding_mul_unsqueeze_0"
NEXT = "triton_poi_fused_1"

TRITON_SOURCE = f"""\
    @triton_heuristics.pointwise(
        size_hints={{'y': 32, 'x': 8}}, tile_hint=TileHint.DEFAULT,
        filename=__file__,
        triton_meta={{'signature': {{'in_ptr0': '*i64', 'in_ptr1': '*fp32', 'in_ptr2': '*fp32', 'out_ptr0': '*fp32', 'ynumel': 'i32', 'xnumel': 'i32', 'YBLOCK': 'constexpr', 'XBLOCK': 'constexpr'}}}},
        min_elem_per_thread=0
    )
    @triton.jit
    def {KERNEL}(in_ptr0, in_ptr1, in_ptr2, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
        xnumel = 8
        yoffset = tl.program_id(1) * YBLOCK
        yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
        ymask = yindex < ynumel
        xoffset = tl.program_id(0) * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
        xmask = xindex < xnumel
        y0 = yindex
        x1 = xindex
        tmp0 = tl.load(in_ptr0 + (y0), ymask, eviction_policy='evict_last')
        tmp7 = tl.load(in_ptr2 + (y0), ymask, eviction_policy='evict_last')
        tmp1 = tl.full([1, 1], 500, tl.int32)
        tmp2 = tmp0 + tmp1
        tmp3 = tmp0 < 0
        tmp4 = tl.where(tmp3, tmp2, tmp0)
        tl.device_assert(((0 <= tmp4) & (tmp4 < 500)) | ~(ymask), "index out of bounds: 0 <= tmp4 < 500")
        tmp6 = tl.load(in_ptr1 + (x1 + 8*tmp4), xmask & ymask)
        tmp8 = tmp6 * tmp7
        tl.store(out_ptr0 + (x1 + 8*y0), tmp8, xmask & ymask)
"""

WRAPPER_CPP = f"""\
// Triton kernels are embedded as comments in /tmp/torchinductor_root/cf/model.wrapper.cpp
AOTInductorModel::AOTInductorModel(...)
    : AOTInductorModelBase(2, 1, 2, device_str, std::move(cubin_dir), true) {{
    inputs_info_[0].name = "arg3_1";
    inputs_info_[1].name = "arg4_1";
    outputs_info_[0].name = "output0";
}}

template <typename in_ptr0_type_, typename in_ptr1_type_, typename in_ptr2_type_, typename out_ptr0_type_, typename kernels_type_>
static inline void call_{KERNEL}(
    const in_ptr0_type_& in_ptr0,
    const in_ptr1_type_& in_ptr1,
    const in_ptr2_type_& in_ptr2,
    const out_ptr0_type_& out_ptr0,
    int64_t ynumel,
    int64_t xnumel,
    int32_t device_idx_,
    cudaStream_t stream_,
    kernels_type_& kernels_,
    const std::optional<std::string>& cubin_dir_ = std::nullopt
){{
    /*
    async_compile.triton('{KERNEL}', '''
    import triton
    import triton.language as tl

{TRITON_SOURCE}    ''', device_str='cuda')
    */
    launchKernel(kernels_.{KERNEL}, grid_0, grid_1, grid_2, 4, 0, kernel_args_, stream_);
}}

void AOTInductorModel::run_impl(
    AtenTensorHandle*
        input_handles,
    AtenTensorHandle*
        output_handles,
    DeviceStreamType stream,
    AOTIProxyExecutorHandle proxy_executor
) {{
    // Topologically Sorted Source Nodes: [embedding, unsqueeze, mul], Original ATen: [aten.embedding, aten.unsqueeze, aten.mul]
    int64_t {KERNEL}_ynumel = s43*s53;
    call_{KERNEL}(arg3_1, embed_weight, arg4_1, buf0, {KERNEL}_ynumel, 8L, this->device_idx_, stream, kernels, this->cubin_dir_);
    // Unsorted Source Nodes: [], Original ATen: []
    call_{NEXT}(buf1, 4L, this->device_idx_, stream, kernels, this->cubin_dir_);
    // Topologically Sorted Source Nodes: [embedding, unsqueeze, mul, linear], Original ATen: [aten.embedding, aten.unsqueeze, aten.mul, aten.view, aten.t, aten.mm]
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cuda_mm_out(buf2, buf0, proj_weight));
}} // AOTInductorModel::run_impl
"""

_ASSERT = (
    "/tmp/torchinductor_root/cf/cqbzbl2vfut3v3boyxnubn.py:24: unknown: block: [0,0,0], "
    "thread: [{t},0,0] Assertion `index out of bounds: 0 <= tmp4 < 500` failed."
)
ASSERTS = "".join(_ASSERT.format(t=t) + "\n" for t in (96, 97, 98))

GENERIC = (
    "run_func_(container_handle_, input_handles.data(), input_handles.size(), "
    "output_handles.data(), output_handles.size(), reinterpret_cast<AOTInductorStreamHandle>("
    "stream_handle), proxy_executor_handle_) API call failed at "
    "/pytorch/torch/csrc/inductor/aoti_runner/model_container_runner.cpp, line 147"
)

PLAIN_LOG = (
    ASSERTS
    + "Error: CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasCreate(handle)`\n"
    "Exception raised from createCublasHandle at "
    "/pytorch/aten/src/ATen/cuda/CublasHandlePool.cpp:135 (most recent call first):\n"
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f10 in "
    "/opt/torch/lib/libc10.so)\n"
    "frame #3: at::cuda::getCurrentCUDABlasHandle() + 0x6c5 (0x7f11 in "
    "/opt/torch/lib/libtorch_cuda.so)\n"
    "frame #7: at::_ops::mm_out::call(at::Tensor const&, at::Tensor const&, at::Tensor&) + "
    "0x1d2 (0x7f12 in /opt/torch/lib/libtorch_cpu.so)\n"
    "frame #8: aoti_torch_cuda_mm_out + 0x55 (0x7f13 in /opt/torch/lib/libtorch_cuda.so)\n"
    "frame #9: torch::aot_inductor::AOTInductorModel::run_impl(AtenTensorOpaque**, "
    "AtenTensorOpaque**, CUstream_st*, AOTIProxyExecutorOpaque*) + 0x1c3a (0x7f14 in "
    "/tmp/x/model.wrapper.so)\n"
)

SYNC_LOG = (
    ASSERTS + "Error: CUDA driver error: device-side assert triggered\n"
    "Exception raised from launchKernel at /tmp/x/model.wrapper.cpp:560 (most recent call "
    "first):\n"
)

PRINTER3_STDOUT = f"[ before_launch: {KERNEL} ]\n"

_IDS = " 345  139  124  368  263\n 313  491  341  600  432\n"
_MASK = " 1  1  1  1  1\n 1  1  1  1  1\n"
# the value-only format of older printers (no statistics lines): stats come from the values
PRINTER2_STDOUT = (
    f"[  aoti_model_inputs - arg3_1  ]:\n{_IDS}[ CUDALongType{{2,5}} ]\n"
    f"[  aoti_model_inputs - arg4_1  ]:\n{_MASK}[ CUDAFloatType{{2,5}} ]\n"
    f"[  before_launch - {KERNEL} - arg3_1  ]:\n{_IDS}[ CUDALongType{{2,5}} ]\n"
    f"[  before_launch - {KERNEL} - arg4_1  ]:\n{_MASK}[ CUDAFloatType{{2,5}} ]\n"
    f"[  before_launch - {KERNEL} - buf0  ]:\n(1,.,.) = \n  0.5  nan\n[ CUDAFloatType{{1,1,2}} ]\n"
    f"[  before_launch - {KERNEL} - {KERNEL}_ynumel: 10  ]\n"
)
