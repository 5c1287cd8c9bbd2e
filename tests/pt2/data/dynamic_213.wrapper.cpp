#include <torch/csrc/inductor/aoti_include/cpu.h>
// [aotipre test fixture: interface.cpp and compile commands trimmed]

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
namespace torch::aot_inductor {
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
    : AOTInductorModelBase(2,
                           1,
                           2,
                           device_str,
                           std::move(cubin_dir),
                           true) {
    inputs_info_[0].name = "arg3_1";
    inputs_info_[1].name = "arg4_1";
    constants_info_[0].name = "emb_weight";
    constants_info_[0].dtype = cached_torch_dtype_float32;
    constants_info_[0].device_type = cached_torch_device_type_cpu;
    constants_info_[0].offset = 0;
    constants_info_[0].data_size = 6400;
    constants_info_[0].from_folded = false;
    constants_info_[0].type = static_cast<int32_t>(torch::aot_inductor::ConstantType::Parameter);
    constants_info_[0].shape = {100, 16};
    constants_info_[0].stride = {16, 1};
    constants_info_[0].layout = static_cast<int32_t>(cached_torch_layout_strided);
    constants_info_[0].original_fqn = "emb.weight";
    constants_info_[1].name = "lin_weight";
    constants_info_[1].dtype = cached_torch_dtype_float32;
    constants_info_[1].device_type = cached_torch_device_type_cpu;
    constants_info_[1].offset = 0;
    constants_info_[1].data_size = 512;
    constants_info_[1].from_folded = false;
    constants_info_[1].type = static_cast<int32_t>(torch::aot_inductor::ConstantType::Parameter);
    constants_info_[1].shape = {8, 16};
    constants_info_[1].stride = {16, 1};
    constants_info_[1].layout = static_cast<int32_t>(cached_torch_layout_strided);
    constants_info_[1].original_fqn = "lin.weight";
    update_constants_map(std::move(constants_map));
    update_constants_array(std::move(constants_array));
    in_spec_ = R"([1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}]}, {"type": "builtins.dict", "context": "[]", "children_spec": []}]}])";
    out_spec_ = R"([1, {"type": null, "context": null, "children_spec": []}])";
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
} // namespace torch::aot_inductor
using namespace torch::aot_inductor;
namespace torch::aot_inductor {

void AOTInductorModel::_const_run_impl(
    std::vector<AtenTensorHandle>& output_handles,
    DeviceStreamType stream,
    AOTIProxyExecutorHandle proxy_executor
) {}

AOTI_NOINLINE static void check_input_0(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg3_1 = ConstantHandle(input_handles[0]);
    int32_t arg3_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg3_1, &arg3_1_dtype));

    int32_t arg3_1_expected_dtype = aoti_torch_dtype_int64();
    if (arg3_1_expected_dtype != arg3_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched dtype, "
           << "expected: " << arg3_1_expected_dtype << "(at::kLong), "
           << "but got: " << arg3_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg3_1_size = arg3_1.sizes();

    if (arg3_1_size[0] < 2) {
        std::stringstream ss;
        ss << "input_handles[0]: dim value is too small at 0, "
           << "expected it to be >= 2, " << "but got: "
           << arg3_1_size[0] << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (arg3_1_size[0] > 64) {
        std::stringstream ss;
        ss << "input_handles[0]: dim value is too large at 0, "
           << "expected to be <= 64, " << "but got: "
           << arg3_1_size[0] << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (arg3_1_size[1] < 2) {
        std::stringstream ss;
        ss << "input_handles[0]: dim value is too small at 1, "
           << "expected it to be >= 2, " << "but got: "
           << arg3_1_size[1] << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (arg3_1_size[1] > 128) {
        std::stringstream ss;
        ss << "input_handles[0]: dim value is too large at 1, "
           << "expected to be <= 128, " << "but got: "
           << arg3_1_size[1] << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg3_1_stride = arg3_1.strides();

    if (1 != arg3_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg3_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg3_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg3_1, &arg3_1_device_type));

    int32_t arg3_1_expected_device_type = 0;
    if (arg3_1_expected_device_type != arg3_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched device type, "
        << "expected: " << arg3_1_expected_device_type << "0(cpu), "
        << "but got: " << arg3_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_1(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg4_1 = ConstantHandle(input_handles[1]);
    int32_t arg4_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg4_1, &arg4_1_dtype));

    int32_t arg4_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg4_1_expected_dtype != arg4_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched dtype, "
           << "expected: " << arg4_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg4_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg4_1_size = arg4_1.sizes();

    if (arg4_1_size[0] < 2) {
        std::stringstream ss;
        ss << "input_handles[1]: dim value is too small at 0, "
           << "expected it to be >= 2, " << "but got: "
           << arg4_1_size[0] << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (arg4_1_size[0] > 64) {
        std::stringstream ss;
        ss << "input_handles[1]: dim value is too large at 0, "
           << "expected to be <= 64, " << "but got: "
           << arg4_1_size[0] << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (arg4_1_size[1] < 2) {
        std::stringstream ss;
        ss << "input_handles[1]: dim value is too small at 1, "
           << "expected it to be >= 2, " << "but got: "
           << arg4_1_size[1] << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (arg4_1_size[1] > 128) {
        std::stringstream ss;
        ss << "input_handles[1]: dim value is too large at 1, "
           << "expected to be <= 128, " << "but got: "
           << arg4_1_size[1] << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg4_1_stride = arg4_1.strides();

    if (1 != arg4_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg4_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg4_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg4_1, &arg4_1_device_type));

    int32_t arg4_1_expected_device_type = 0;
    if (arg4_1_expected_device_type != arg4_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched device type, "
        << "expected: " << arg4_1_expected_device_type << "0(cpu), "
        << "but got: " << arg4_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

static bool _check_aoti_runtime_check_inputs_env() {
    const static char* env_var_value = getenv("AOTI_RUNTIME_CHECK_INPUTS");
    const static bool result = env_var_value != nullptr && env_var_value[0] != '0';
    return result;
}

AOTI_NOINLINE static void __check_inputs_outputs(
    AtenTensorHandle* input_handles,
    AtenTensorHandle* output_handles) {
    if (!_check_aoti_runtime_check_inputs_env()){
        return;
    }
    check_input_0(input_handles);
    check_input_1(input_handles);
}

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
    __check_inputs_outputs(input_handles, output_handles);
    auto inputs = steal_from_raw_handles_to_raii_handles(input_handles, 2);
    auto arg3_1 = std::move(inputs[0]);
    auto arg4_1 = std::move(inputs[1]);
    [[maybe_unused]] auto& emb_weight = constants_->at(0);
    [[maybe_unused]] auto& lin_weight = constants_->at(1);
    auto arg3_1_size = arg3_1.sizes();
    int64_t s31 = arg3_1_size[0];
    int64_t s95 = s31;
    int64_t s64 = arg3_1_size[1];
    int64_t s75 = s64;
    inputs.clear();
    [[maybe_unused]] auto& kernels = static_cast<AOTInductorModelKernels&>(*this->kernels_.get());
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg3_1, {s31, s64}, {s64, 1L}, "input"); }
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
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg4_1, {s31, s64}, {s64, 1L}, "input"); }
    const int64_t int_array_10[] = {s31, 8L};
    AtenTensorHandle buf3_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_10, int_array_5, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf3_handle));
    RAIIAtenTensorHandle buf3(buf3_handle);
    cpp_fused_mul_sum_unsqueeze_view_1((const float*)(buf2.data_ptr()), (const float*)(arg4_1.data_ptr()), (float*)(buf3.data_ptr()), s31, s64);
    arg4_1.reset();
    output_handles[0] = buf3.release();
} // AOTInductorModel::run_impl
} // namespace torch::aot_inductor
