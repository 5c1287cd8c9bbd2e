// Excerpt of a real AOTI wrapper.cpp: torch 2.11.0+cu130 on an NVIDIA H200, compiled with
// aot_inductor.debug_intermediate_value_printer="1" and trace.provenance_tracking_level=1 (model:
// linear(64, 64) -> softmax(y * 2) + relu(x), fp32, x of 8x64): the Triton call helper and run_impl's launches.
template <typename in_out_ptr0_type_, typename in_ptr0_type_, typename in_ptr1_type_, typename kernels_type_>
static inline void call_triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0(
    const in_out_ptr0_type_& in_out_ptr0,
    const in_ptr0_type_& in_ptr0,
    const in_ptr1_type_& in_ptr1,
    int64_t xnumel,
    int64_t r0_numel,
    int32_t device_idx_,
    cudaStream_t stream_,
    kernels_type_& kernels_,
    const std::optional<std::string>& cubin_dir_ = std::nullopt
){
    /*
    async_compile.triton('triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0', '''
    import triton
    import triton.language as tl

    from torch._inductor.runtime import triton_helpers, triton_heuristics
    from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
    from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
    triton_helpers.set_driver_to_gpu()

    @triton_heuristics.persistent_reduction(
        size_hints={'x': 8, 'r0_': 64},
        reduction_hint=ReductionHint.INNER,
        filename=__file__,
        triton_meta={'signature': {'in_out_ptr0': '*fp32', 'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]]}]},
        inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 3, 'num_store': 1, 'num_reduction': 2, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': True, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 0, 'r0_': 8448}}
    )
    @triton.jit
    def triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0(in_out_ptr0, in_ptr0, in_ptr1, xnumel, r0_numel, XBLOCK : tl.constexpr):
        xnumel = 8
        r0_numel = 64
        R0_BLOCK: tl.constexpr = 64
        rnumel = r0_numel
        RBLOCK: tl.constexpr = R0_BLOCK
        xoffset = tl.program_id(0) * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
        xmask = xindex < xnumel
        r0_index = tl.arange(0, R0_BLOCK)[None, :]
        r0_offset = 0
        r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        x0 = xindex
        tmp0 = tl.load(in_ptr0 + (r0_1), None, eviction_policy='evict_last')
        tmp1 = tl.load(in_out_ptr0 + (r0_1 + 64*x0), xmask, other=0.0)
        tmp18 = tl.load(in_ptr1 + (r0_1 + 64*x0), xmask, other=0.0)
        tmp2 = tmp0 + tmp1
        tmp3 = tl.full([1, 1], 1.0, tl.float32)
        tmp4 = tmp2 * tmp3
        tmp5 = tl.broadcast_to(tmp4, [XBLOCK, R0_BLOCK])
        tmp7 = tl.where(xmask, tmp5, float("-inf"))
        tmp8 = triton_helpers.max2(tmp7, 1)[:, None].to(tl.float32)
        tmp9 = tmp4 - tmp8
        tmp10 = tl.full([1, 1], 2.0, tl.float32)
        tmp11 = tmp9 * tmp10
        tmp12 = libdevice.exp(tmp11)
        tmp13 = tl.broadcast_to(tmp12, [XBLOCK, R0_BLOCK])
        tmp15 = tl.where(xmask, tmp13, 0)
        tmp16 = tl.sum(tmp15, 1)[:, None].to(tl.float32)
        tmp17 = (tmp12 / tmp16)
        tmp19 = tl.full([1, 1], 0, tl.int32)
        tmp20 = triton_helpers.maximum(tmp19, tmp18)
        tmp21 = tmp17 + tmp20
        tl.store(in_out_ptr0 + (r0_1 + 64*x0), tmp21, xmask)
    ''', device_str='cuda')
    */
    uint32_t grid_0 = ((xnumel + (8 - 1)) / (8));
    uint32_t grid_1 = 1;
    uint32_t grid_2 = 1;
    if (grid_0 == 0 || grid_1 == 0 || grid_2 == 0) return;
    if (kernels_.triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0 == nullptr) {
        kernels_.triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0 = loadKernel("/tmp/torchinductor_root/cxm7c4psjn5v2mx6hrdx2egqpsweg6w2e5e4bscuaa6mypz3kh6i/cjcmtdmj2uprpi7odqekquieogc2ivnr6omlxgjm4nd3wtbwawqh.cubin", "triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0", 256, cubin_dir_); 
    }
    CUdeviceptr var_0 = reinterpret_cast<CUdeviceptr>(in_out_ptr0.data_ptr());
    CUdeviceptr var_1 = reinterpret_cast<CUdeviceptr>(in_ptr0.data_ptr());
    CUdeviceptr var_2 = reinterpret_cast<CUdeviceptr>(in_ptr1.data_ptr());
    int32_t var_3 = xnumel;
    int32_t var_4 = r0_numel;
    CUdeviceptr global_scratch_scratch_5 = 0;
    CUdeviceptr profile_scratch_scratch_6 = 0;
    void* kernel_args_[] = {&var_0, &var_1, &var_2, &var_3, &var_4, &global_scratch_scratch_5, &profile_scratch_scratch_6};
    launchKernel(kernels_.triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0, grid_0, grid_1, grid_2, 2, 256, kernel_args_, stream_);
}

    // ... (run_impl: input checks and buffer allocation omitted)
    AtenTensorHandle buf0_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, cached_torch_dtype_float32, cached_torch_device_type_cuda, this->device_idx_, &buf0_handle));
    RAIIAtenTensorHandle buf0(buf0_handle);
    // Topologically Sorted Source Nodes: [linear, ], Original ATen: [aten.t, aten.addmm]
    // [Provenance debug handles] aoti_torch_cuda_mm_out:1
    static constexpr int64_t int_array_2[] = {64L, 64L};
    static constexpr int64_t int_array_3[] = {1L, 64L};
    aoti_torch_save_tensor_handle(buf0, "buf0", "before_launch", "aoti_torch_cuda_mm_out");
    aoti_torch_save_tensor_handle(arg2_1, "arg2_1", "before_launch", "aoti_torch_cuda_mm_out");
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cuda_mm_out(buf0, arg2_1, wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(lin_weight, 2, int_array_2, int_array_3, 0L))));
    aoti_torch_save_tensor_handle(buf0, "buf0", "after_launch", "aoti_torch_cuda_mm_out");
    aoti_torch_save_tensor_handle(arg2_1, "arg2_1", "after_launch", "aoti_torch_cuda_mm_out");
    auto buf3 = std::move(buf0);  // reuse
    // Topologically Sorted Source Nodes: [, softmax, relu, add], Original ATen: [aten.addmm, aten.mul, aten.amax, aten.sub, aten._softmax, aten.relu, aten.add]
    // [Provenance debug handles] triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0:2
    aoti_torch_save_tensor_handle(buf3, "buf3", "before_launch", "triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0");
    aoti_torch_save_tensor_handle(lin_bias, "lin_bias", "before_launch", "triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0");
    aoti_torch_save_tensor_handle(arg2_1, "arg2_1", "before_launch", "triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0");
    call_triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0(buf3, lin_bias, arg2_1, 8L, 64L, this->device_idx_, stream, kernels, this->cubin_dir_);
    aoti_torch_save_tensor_handle(buf3, "buf3", "after_launch", "triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0");
    aoti_torch_save_tensor_handle(lin_bias, "lin_bias", "after_launch", "triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0");
    aoti_torch_save_tensor_handle(arg2_1, "arg2_1", "after_launch", "triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0");
    arg2_1.reset();
    output_handles[0] = buf3.release();
