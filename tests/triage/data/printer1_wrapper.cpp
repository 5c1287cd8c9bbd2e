// excerpt of a torch 2.13 CPU wrapper.cpp compiled with aot_inductor.debug_intermediate_value_printer="1" and trace.provenance_tracking_level=1 (linear -> bf16 chain -> softmax)
extern "C"  void  cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0(const at::BFloat16* in_ptr0,
                       bool* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2,
                       float* out_ptr3,
                       at::BFloat16* out_ptr4);
    inputs.clear();
    [[maybe_unused]] auto& kernels = static_cast<AOTInductorModelKernels&>(*this->kernels_.get());
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg2_1, {4L, 16L}, {16L, 1L}, "input"); }
    static constexpr int64_t int_array_0[] = {4L, 16L};
    static constexpr int64_t int_array_1[] = {16L, 1L};
    AtenTensorHandle buf0_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, cached_torch_dtype_bfloat16, cached_torch_device_type_cpu, this->device_idx_, &buf0_handle));
    RAIIAtenTensorHandle buf0(buf0_handle);
    // Topologically Sorted Source Nodes: [linear], Original ATen: [aten.t, aten.addmm]
    // [Provenance debug handles] aoti_torch_cpu_addmm_out:1
    static constexpr int64_t int_array_2[] = {16L, 16L};
    static constexpr int64_t int_array_3[] = {1L, 16L};
    aoti_torch_save_tensor_handle(buf0, "buf0", "before_launch", "aoti_torch_cpu_addmm_out");
    aoti_torch_save_tensor_handle(arg2_1, "arg2_1", "before_launch", "aoti_torch_cpu_addmm_out");
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_addmm_out(buf0, lin_bias, arg2_1, wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(lin_weight, 2, int_array_2, int_array_3, 0L)), 1L, 1L));
    aoti_torch_save_tensor_handle(buf0, "buf0", "after_launch", "aoti_torch_cpu_addmm_out");
    aoti_torch_save_tensor_handle(arg2_1, "arg2_1", "after_launch", "aoti_torch_cpu_addmm_out");
    arg2_1.reset();
    static constexpr int64_t int_array_4[] = {4L, 1L};
    static constexpr int64_t int_array_5[] = {1L, 4L};
    AtenTensorHandle buf1_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_4, int_array_5, cached_torch_dtype_bool, cached_torch_device_type_cpu, this->device_idx_, &buf1_handle));
    RAIIAtenTensorHandle buf1(buf1_handle);
    AtenTensorHandle buf2_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_4, int_array_5, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf2_handle));
    RAIIAtenTensorHandle buf2(buf2_handle);
    AtenTensorHandle buf3_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_4, int_array_5, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf3_handle));
    RAIIAtenTensorHandle buf3(buf3_handle);
    AtenTensorHandle buf5_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_4, int_array_5, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf5_handle));
    RAIIAtenTensorHandle buf5(buf5_handle);
    AtenTensorHandle buf6_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, cached_torch_dtype_bfloat16, cached_torch_device_type_cpu, this->device_idx_, &buf6_handle));
    RAIIAtenTensorHandle buf6(buf6_handle);
    // [Provenance debug handles] cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0:2
    aoti_torch_save_tensor_handle(buf0, "buf0", "before_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    aoti_torch_save_tensor_handle(buf1, "buf1", "before_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    aoti_torch_save_tensor_handle(buf2, "buf2", "before_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    aoti_torch_save_tensor_handle(buf3, "buf3", "before_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    aoti_torch_save_tensor_handle(buf5, "buf5", "before_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    aoti_torch_save_tensor_handle(buf6, "buf6", "before_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0((const at::BFloat16*)(buf0.data_ptr()), (bool*)(buf1.data_ptr()), (float*)(buf2.data_ptr()), (float*)(buf3.data_ptr()), (float*)(buf5.data_ptr()), (at::BFloat16*)(buf6.data_ptr()));
    aoti_torch_save_tensor_handle(buf0, "buf0", "after_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    aoti_torch_save_tensor_handle(buf1, "buf1", "after_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    aoti_torch_save_tensor_handle(buf2, "buf2", "after_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    aoti_torch_save_tensor_handle(buf3, "buf3", "after_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    aoti_torch_save_tensor_handle(buf5, "buf5", "after_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    aoti_torch_save_tensor_handle(buf6, "buf6", "after_launch", "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0");
    output_handles[0] = buf6.release();
} // AOTInductorModel::run_impl
