#include <torch/csrc/inductor/aoti_include/cpu.h>
// [aotipre SYNTHETIC fixture: dynamic_211 rewritten the way torch <= 2.6 wrote it without
// aot_inductor.debug_compile: no input checks, old constructor, escaped in_spec_ literal]

extern "C"  void  cpp_fused_embedding_0(const int64_t* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0,
                       float* out_ptr1,
                       const int64_t ks0,
                       const int64_t ks1);
extern "C"  void  cpp_fused_mul_sum_unsqueeze_view_1(const float* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0,
                       const int64_t ks0,
                       const int64_t ks1);
CACHE_TORCH_DTYPE(float32);
CACHE_TORCH_DEVICE(cpu);
CACHE_TORCH_LAYOUT(strided);
namespace torch {
namespace aot_inductor {
namespace {
class AOTInductorModelKernels : public AOTInductorModelKernelsBase {
  public:
    void* cpp_fused_embedding_0{nullptr};
    void* cpp_fused_mul_sum_unsqueeze_view_1{nullptr};
};
}  // namespace



AOTInductorModel::AOTInductorModel(std::shared_ptr<ConstantMap> constants_map,
                                   std::shared_ptr<std::vector<ConstantHandle>> constants_array,
                                   const std::string& device_str,
                                   std::optional<std::string> cubin_dir)
    : AOTInductorModelBase(2, 1, 2, device_str, cubin_dir) {
    inputs_info_[0].name = "arg3_1";
    inputs_info_[1].name = "arg4_1";
    constants_info_[0].name = "emb_weight";
    constants_info_[0].dtype = static_cast<int32_t>(cached_torch_dtype_float32);
    constants_info_[0].offset = 0;
    constants_info_[0].data_size = 6400;
    constants_info_[0].from_folded = false;
    constants_info_[0].shape = {100, 16};
    constants_info_[0].stride = {16, 1};
    constants_info_[0].layout = static_cast<int32_t>(cached_torch_layout_strided);
    constants_info_[0].original_fqn = "emb.weight";
    constants_info_[1].name = "lin_weight";
    constants_info_[1].dtype = static_cast<int32_t>(cached_torch_dtype_float32);
    constants_info_[1].offset = 0;
    constants_info_[1].data_size = 512;
    constants_info_[1].from_folded = false;
    constants_info_[1].shape = {8, 16};
    constants_info_[1].stride = {16, 1};
    constants_info_[1].layout = static_cast<int32_t>(cached_torch_layout_strided);
    constants_info_[1].original_fqn = "lin.weight";
    update_constants_map(std::move(constants_map));
    update_constants_array(std::move(constants_array));
    in_spec_ = "[1, {\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [{\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [{\"type\": null, \"context\": null, \"children_spec\": []}, {\"type\": null, \"context\": null, \"children_spec\": []}]}, {\"type\": \"builtins.dict\", \"context\": \"[]\", \"children_spec\": []}]}]";
    out_spec_ = "[1, {\"type\": null, \"context\": null, \"children_spec\": []}]";
    outputs_info_[0].name = "output0";
    this->kernels_ = std::make_unique<AOTInductorModelKernels>();
}

std::unordered_map<std::string, AtenTensorHandle> AOTInductorModel::const_run_impl(
    DeviceStreamType stream,
    AOTIProxyExecutorHandle proxy_executor,
    bool initialization
) {

    if (!initialization) {
        std::cerr << "[WARNING] Calling constant_folding in model, but compiled with config: "
                  << "aot_inductor.use_runtime_constant_folding=False\n";
    }
    return {};
}
} // namespace aot_inductor
} // namespace torch
namespace torch {
namespace aot_inductor {

void AOTInductorModel::_const_run_impl(
    std::vector<AtenTensorHandle>& output_handles,
    DeviceStreamType stream,
    AOTIProxyExecutorHandle proxy_executor
) {}

void AOTInductorModel::run_impl(
    AtenTensorHandle*
        input_handles, // array of input AtenTensorHandle; handles
                        // are stolen; the array itself is borrowed
    AtenTensorHandle*
        output_handles, // array for writing output AtenTensorHandle; handles
                        // will be stolen by the caller; the array itself is
                        // borrowed
    DeviceStreamType stream,
    AOTIProxyExecutorHandle proxy_executor
) {
    auto inputs = steal_from_raw_handles_to_raii_handles(input_handles, 2);
    auto arg3_1 = std::move(inputs[0]);
    auto arg4_1 = std::move(inputs[1]);
    [[maybe_unused]] auto& emb_weight = constants_->at(0);
    [[maybe_unused]] auto& lin_weight = constants_->at(1);
    auto arg3_1_size = arg3_1.sizes();
    int64_t s31 = arg3_1_size[0];
    int64_t s64 = arg3_1_size[1];
    inputs.clear();
    [[maybe_unused]] auto& kernels = static_cast<AOTInductorModelKernels&>(*this->kernels_.get());
    const int64_t int_array_0[] = {s31, s64, 16L};
    const int64_t int_array_1[] = {16L*s64, 16L, 1L};
    AtenTensorHandle buf0_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(3, int_array_0, int_array_1, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf0_handle));
    RAIIAtenTensorHandle buf0(buf0_handle);
    static constexpr int64_t int_array_2[] = {8L, };
    static constexpr int64_t int_array_3[] = {1L, };
    AtenTensorHandle buf1_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(1, int_array_2, int_array_3, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf1_handle));
    RAIIAtenTensorHandle buf1(buf1_handle);
    cpp_fused_embedding_0((const int64_t*)(arg3_1.data_ptr()), (const float*)(emb_weight.data_ptr()), (float*)(buf0.data_ptr()), (float*)(buf1.data_ptr()), s31, s64);
    arg3_1.reset();
    const int64_t int_array_4[] = {s31*s64, 8L};
    static constexpr int64_t int_array_5[] = {8L, 1L};
    AtenTensorHandle buf2_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_4, int_array_5, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf2_handle));
    RAIIAtenTensorHandle buf2(buf2_handle);
    // Topologically Sorted Source Nodes: [embedding, linear], Original ATen: [aten.embedding, aten.view, aten.t, aten.addmm]
    const int64_t int_array_6[] = {s31*s64, 16L};
    static constexpr int64_t int_array_7[] = {16L, 1L};
    static constexpr int64_t int_array_8[] = {16L, 8L};
    static constexpr int64_t int_array_9[] = {1L, 16L};
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_addmm_out(buf2, buf1, wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(buf0, 2, int_array_6, int_array_7, 0L)), wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(lin_weight, 2, int_array_8, int_array_9, 0L)), 1L, 1L));
    buf0.reset();
    buf1.reset();
    const int64_t int_array_10[] = {s31, 8L};
    static constexpr int64_t int_array_11[] = {8L, 1L};
    AtenTensorHandle buf3_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_10, int_array_11, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf3_handle));
    RAIIAtenTensorHandle buf3(buf3_handle);
    cpp_fused_mul_sum_unsqueeze_view_1((const float*)(buf2.data_ptr()), (const float*)(arg4_1.data_ptr()), (float*)(buf3.data_ptr()), s31, s64);
    arg4_1.reset();
    output_handles[0] = buf3.release();
} // AOTInductorModel::run_impl
} // namespace aot_inductor
} // namespace torch
