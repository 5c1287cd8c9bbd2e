#include <torch/csrc/inductor/aoti_include/cpu.h>
// [aotipre test fixture: interface.cpp and compile commands trimmed]

extern "C"  void  cpp_fused__to_copy_add_mul_unsqueeze_0(const at::BFloat16* in_ptr0,
                       const float* in_ptr1,
                       const int64_t* in_ptr2,
                       float* out_ptr0);
CACHE_TORCH_DTYPE(bfloat16);
CACHE_TORCH_DTYPE(float32);
CACHE_TORCH_DEVICE(cpu);
CACHE_TORCH_LAYOUT(strided);
namespace torch::aot_inductor {
namespace {
class AOTInductorModelKernels : public AOTInductorModelKernelsBase {
  public:
    void* cpp_fused__to_copy_add_mul_unsqueeze_0{nullptr};
};
}  // namespace



AOTInductorModel::AOTInductorModel(std::shared_ptr<ConstantMap> constants_map,
                                   std::shared_ptr<std::vector<ConstantHandle>> constants_array,
                                   const std::string& device_str,
                                   std::optional<std::string> cubin_dir)
    : AOTInductorModelBase(3,
                           1,
                           1,
                           device_str,
                           std::move(cubin_dir),
                           true) {
    inputs_info_[0].name = "arg1_1";
    inputs_info_[1].name = "arg2_1";
    inputs_info_[2].name = "arg3_1";
    constants_info_[0].name = "w";
    constants_info_[0].dtype = cached_torch_dtype_bfloat16;
    constants_info_[0].device_type = cached_torch_device_type_cpu;
    constants_info_[0].offset = 0;
    constants_info_[0].data_size = 64;
    constants_info_[0].from_folded = false;
    constants_info_[0].type = static_cast<int32_t>(torch::aot_inductor::ConstantType::Parameter);
    constants_info_[0].shape = {8, 4};
    constants_info_[0].stride = {4, 1};
    constants_info_[0].layout = static_cast<int32_t>(cached_torch_layout_strided);
    constants_info_[0].original_fqn = "w";
    update_constants_map(std::move(constants_map));
    update_constants_array(std::move(constants_array));
    in_spec_ = R"([1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}]}, {"type": "builtins.dict", "context": "[\"scale\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}]}]}])";
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
    ConstantHandle arg1_1 = ConstantHandle(input_handles[0]);
    int32_t arg1_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg1_1, &arg1_1_dtype));

    int32_t arg1_1_expected_dtype = aoti_torch_dtype_bfloat16();
    if (arg1_1_expected_dtype != arg1_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched dtype, "
           << "expected: " << arg1_1_expected_dtype << "(at::kBFloat16), "
           << "but got: " << arg1_1_dtype << "\n";
        throw std::runtime_error(ss.str());
    }
    auto arg1_1_size = arg1_1.sizes();

    if (2 != arg1_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched dim value at 0, "
           << "expected: 2, " << "but got: " << arg1_1_size[0]
           << "\n";
        throw std::runtime_error(ss.str());
    }

    if (8 != arg1_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched dim value at 1, "
           << "expected: 8, " << "but got: " << arg1_1_size[1]
           << "\n";
        throw std::runtime_error(ss.str());
    }
    auto arg1_1_stride = arg1_1.strides();

    if (8 != arg1_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched stride value at 0, "
           << "expected: 8, " << "but got: " << arg1_1_stride[0]
           << "\n";
        throw std::runtime_error(ss.str());
    }

    if (1 != arg1_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg1_1_stride[1]
           << "\n";
        throw std::runtime_error(ss.str());
    }
    int32_t arg1_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg1_1, &arg1_1_device_type));

    int32_t arg1_1_expected_device_type = 0;
    if (arg1_1_expected_device_type != arg1_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched device type, "
        << "expected: " << arg1_1_expected_device_type << "0(cpu), "
        << "but got: " << arg1_1_device_type << "\n";
        throw std::runtime_error(ss.str());
    }
}

AOTI_NOINLINE static void check_input_1(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg2_1 = ConstantHandle(input_handles[1]);
    int32_t arg2_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg2_1, &arg2_1_dtype));

    int32_t arg2_1_expected_dtype = aoti_torch_dtype_int64();
    if (arg2_1_expected_dtype != arg2_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched dtype, "
           << "expected: " << arg2_1_expected_dtype << "(at::kLong), "
           << "but got: " << arg2_1_dtype << "\n";
        throw std::runtime_error(ss.str());
    }
    auto arg2_1_size = arg2_1.sizes();

    if (2 != arg2_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched dim value at 0, "
           << "expected: 2, " << "but got: " << arg2_1_size[0]
           << "\n";
        throw std::runtime_error(ss.str());
    }
    auto arg2_1_stride = arg2_1.strides();

    if (1 != arg2_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched stride value at 0, "
           << "expected: 1, " << "but got: " << arg2_1_stride[0]
           << "\n";
        throw std::runtime_error(ss.str());
    }
    int32_t arg2_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg2_1, &arg2_1_device_type));

    int32_t arg2_1_expected_device_type = 0;
    if (arg2_1_expected_device_type != arg2_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched device type, "
        << "expected: " << arg2_1_expected_device_type << "0(cpu), "
        << "but got: " << arg2_1_device_type << "\n";
        throw std::runtime_error(ss.str());
    }
}

AOTI_NOINLINE static void check_input_2(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg3_1 = ConstantHandle(input_handles[2]);
    int32_t arg3_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg3_1, &arg3_1_dtype));

    int32_t arg3_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg3_1_expected_dtype != arg3_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched dtype, "
           << "expected: " << arg3_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg3_1_dtype << "\n";
        throw std::runtime_error(ss.str());
    }
    auto arg3_1_size = arg3_1.sizes();

    if (2 != arg3_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched dim value at 0, "
           << "expected: 2, " << "but got: " << arg3_1_size[0]
           << "\n";
        throw std::runtime_error(ss.str());
    }

    if (4 != arg3_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched dim value at 1, "
           << "expected: 4, " << "but got: " << arg3_1_size[1]
           << "\n";
        throw std::runtime_error(ss.str());
    }
    auto arg3_1_stride = arg3_1.strides();

    if (4 != arg3_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched stride value at 0, "
           << "expected: 4, " << "but got: " << arg3_1_stride[0]
           << "\n";
        throw std::runtime_error(ss.str());
    }

    if (1 != arg3_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg3_1_stride[1]
           << "\n";
        throw std::runtime_error(ss.str());
    }
    int32_t arg3_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg3_1, &arg3_1_device_type));

    int32_t arg3_1_expected_device_type = 0;
    if (arg3_1_expected_device_type != arg3_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched device type, "
        << "expected: " << arg3_1_expected_device_type << "0(cpu), "
        << "but got: " << arg3_1_device_type << "\n";
        throw std::runtime_error(ss.str());
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
    check_input_2(input_handles);
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

    auto inputs = steal_from_raw_handles_to_raii_handles(input_handles, 3);
    auto arg1_1 = std::move(inputs[0]);
    auto arg2_1 = std::move(inputs[1]);
    auto arg3_1 = std::move(inputs[2]);
    [[maybe_unused]] auto& w = constants_->at(0);
    inputs.clear();
    [[maybe_unused]] auto& kernels = static_cast<AOTInductorModelKernels&>(*this->kernels_.get());
    static constexpr int64_t int_array_0[] = {2L, 4L};
    static constexpr int64_t int_array_1[] = {4L, 1L};
    AtenTensorHandle buf0_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, cached_torch_dtype_bfloat16, cached_torch_device_type_cpu, this->device_idx_, &buf0_handle));
    RAIIAtenTensorHandle buf0(buf0_handle);
    // Topologically Sorted Source Nodes: [matmul], Original ATen: [aten.mm]
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_mm_out(buf0, arg1_1, w));
    arg1_1.reset();
    static constexpr int64_t int_array_2[] = {2L, 4L};
    static constexpr int64_t int_array_3[] = {4L, 1L};
    AtenTensorHandle buf1_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_2, int_array_3, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf1_handle));
    RAIIAtenTensorHandle buf1(buf1_handle);
    cpp_fused__to_copy_add_mul_unsqueeze_0((const at::BFloat16*)(buf0.data_ptr()), (const float*)(arg3_1.data_ptr()), (const int64_t*)(arg2_1.data_ptr()), (float*)(buf1.data_ptr()));
    arg2_1.reset();
    arg3_1.reset();
    output_handles[0] = buf1.release();
} // AOTInductorModel::run_impl
} // namespace torch::aot_inductor
