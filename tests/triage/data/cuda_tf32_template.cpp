// Excerpt of a real AOTI wrapper.cpp: torch 2.11.0+cu130 on an NVIDIA H200, a Triton mm template
// compiled under torch.set_float32_matmul_precision("high") with max_autotune (Linear(1024, 1024) * 0.5).
template <typename arg_A_type_, typename arg_B_type_, typename out_ptr1_type_, typename kernels_type_>
static inline void call_triton_tem_fused_mm_mul_t_0(
    const arg_A_type_& arg_A,
    const arg_B_type_& arg_B,
    const out_ptr1_type_& out_ptr1,
    int64_t _grid_0,
    int64_t _grid_1,
    int64_t _grid_2,
    int32_t device_idx_,
    cudaStream_t stream_,
    kernels_type_& kernels_,
    const std::optional<std::string>& cubin_dir_ = std::nullopt
){
    /*
    async_compile.triton('triton_tem_fused_mm_mul_t_0', '''
    import triton
    import triton.language as tl

    from torch._inductor.runtime import triton_helpers, triton_heuristics
    from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
    from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties

    @triton_heuristics.template(

    num_stages=4,
    num_warps=8,
    triton_meta={'signature': {'arg_A': '*fp32', 'arg_B': '*fp32', 'out_ptr1': '*fp32'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'kernel_name': 'triton_tem_fused_mm_mul_t_0', 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': True, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': True, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'grid_type': 'FixedGrid', 'fixed_grid': ['_grid_0', '_grid_1', '_grid_2'], 'extra_launcher_args': ['_grid_0', '_grid_1', '_grid_2'], 'config_args': {'EVEN_K': True, 'USE_FAST_ACCUM': False, 'ACC_TYPE': 'tl.float32', 'BLOCK_M': 64, 'BLOCK_N': 64, 'BLOCK_K': 32, 'GROUP_M': 8, 'ALLOW_TF32': True}},

    )
    @triton.jit
    def triton_tem_fused_mm_mul_t_0(arg_A, arg_B, out_ptr1):
        EVEN_K : tl.constexpr = True
        USE_FAST_ACCUM : tl.constexpr = False
        ACC_TYPE : tl.constexpr = tl.float32
        BLOCK_M : tl.constexpr = 64
        BLOCK_N : tl.constexpr = 64
        BLOCK_K : tl.constexpr = 32
        GROUP_M : tl.constexpr = 8
        ALLOW_TF32 : tl.constexpr = True
        INDEX_DTYPE : tl.constexpr = tl.int32
        A = arg_A
    ...
    call_triton_tem_fused_mm_mul_t_0(arg1_1, lin_weight, buf1, 16L, 1, 1, this->device_idx_, stream, kernels, this->cubin_dir_);
