#include <torch/csrc/inductor/aoti_include/cpu.h>
// [aotipre test fixture: interface.cpp and compile commands trimmed]

extern "C"  void  cpp_fused_add_mul_0(const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       const float* in_ptr5,
                       const float* in_ptr6,
                       const float* in_ptr7,
                       const float* in_ptr8,
                       const float* in_ptr9,
                       const float* in_ptr10,
                       const float* in_ptr11,
                       float* out_ptr0,
                       float* out_ptr1);
CACHE_TORCH_DTYPE(float32);
CACHE_TORCH_DEVICE(cpu);
namespace torch::aot_inductor {
namespace {
class AOTInductorModelKernels : public AOTInductorModelKernelsBase {
  public:
    void* cpp_fused_add_mul_0{nullptr};
};
}  // namespace



AOTInductorModel::AOTInductorModel(std::shared_ptr<ConstantMap> constants_map,
                                   std::shared_ptr<std::vector<ConstantHandle>> constants_array,
                                   const std::string& device_str,
                                   std::optional<std::string> cubin_dir)
    : AOTInductorModelBase(12,
                           2,
                           0,
                           device_str,
                           std::move(cubin_dir),
                           true) {
    inputs_info_[0].name = "arg0_1";
    inputs_info_[1].name = "arg1_1";
    inputs_info_[2].name = "arg2_1";
    inputs_info_[3].name = "arg3_1";
    inputs_info_[4].name = "arg4_1";
    inputs_info_[5].name = "arg5_1";
    inputs_info_[6].name = "arg6_1";
    inputs_info_[7].name = "arg7_1";
    inputs_info_[8].name = "arg8_1";
    inputs_info_[9].name = "arg9_1";
    inputs_info_[10].name = "arg10_1";
    inputs_info_[11].name = "arg11_1";
    update_constants_map(std::move(constants_map));
    update_constants_array(std::move(constants_array));
    in_spec_ = R"([1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}]}, {"type": "builtins.dict", "context": "[]", "children_spec": []}]}])";
    out_spec_ = R"([1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}]}])";
    outputs_info_[0].name = "output0";
    outputs_info_[1].name = "output1";
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
    ConstantHandle arg0_1 = ConstantHandle(input_handles[0]);
    int32_t arg0_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg0_1, &arg0_1_dtype));

    int32_t arg0_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg0_1_expected_dtype != arg0_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched dtype, "
           << "expected: " << arg0_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg0_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg0_1_size = arg0_1.sizes();

    if (3 != arg0_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg0_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg0_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg0_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg0_1_stride = arg0_1.strides();

    if (5 != arg0_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg0_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg0_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg0_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg0_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg0_1, &arg0_1_device_type));

    int32_t arg0_1_expected_device_type = 0;
    if (arg0_1_expected_device_type != arg0_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[0]: unmatched device type, "
        << "expected: " << arg0_1_expected_device_type << "0(cpu), "
        << "but got: " << arg0_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_1(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg1_1 = ConstantHandle(input_handles[1]);
    int32_t arg1_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg1_1, &arg1_1_dtype));

    int32_t arg1_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg1_1_expected_dtype != arg1_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched dtype, "
           << "expected: " << arg1_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg1_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg1_1_size = arg1_1.sizes();

    if (3 != arg1_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg1_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg1_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg1_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg1_1_stride = arg1_1.strides();

    if (5 != arg1_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg1_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg1_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg1_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg1_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg1_1, &arg1_1_device_type));

    int32_t arg1_1_expected_device_type = 0;
    if (arg1_1_expected_device_type != arg1_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[1]: unmatched device type, "
        << "expected: " << arg1_1_expected_device_type << "0(cpu), "
        << "but got: " << arg1_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_2(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg2_1 = ConstantHandle(input_handles[2]);
    int32_t arg2_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg2_1, &arg2_1_dtype));

    int32_t arg2_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg2_1_expected_dtype != arg2_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched dtype, "
           << "expected: " << arg2_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg2_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg2_1_size = arg2_1.sizes();

    if (3 != arg2_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg2_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg2_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg2_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg2_1_stride = arg2_1.strides();

    if (5 != arg2_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg2_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg2_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg2_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg2_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg2_1, &arg2_1_device_type));

    int32_t arg2_1_expected_device_type = 0;
    if (arg2_1_expected_device_type != arg2_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[2]: unmatched device type, "
        << "expected: " << arg2_1_expected_device_type << "0(cpu), "
        << "but got: " << arg2_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_3(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg3_1 = ConstantHandle(input_handles[3]);
    int32_t arg3_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg3_1, &arg3_1_dtype));

    int32_t arg3_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg3_1_expected_dtype != arg3_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[3]: unmatched dtype, "
           << "expected: " << arg3_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg3_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg3_1_size = arg3_1.sizes();

    if (3 != arg3_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[3]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg3_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg3_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[3]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg3_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg3_1_stride = arg3_1.strides();

    if (5 != arg3_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[3]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg3_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg3_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[3]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg3_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg3_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg3_1, &arg3_1_device_type));

    int32_t arg3_1_expected_device_type = 0;
    if (arg3_1_expected_device_type != arg3_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[3]: unmatched device type, "
        << "expected: " << arg3_1_expected_device_type << "0(cpu), "
        << "but got: " << arg3_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_4(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg4_1 = ConstantHandle(input_handles[4]);
    int32_t arg4_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg4_1, &arg4_1_dtype));

    int32_t arg4_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg4_1_expected_dtype != arg4_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[4]: unmatched dtype, "
           << "expected: " << arg4_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg4_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg4_1_size = arg4_1.sizes();

    if (3 != arg4_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[4]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg4_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg4_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[4]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg4_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg4_1_stride = arg4_1.strides();

    if (5 != arg4_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[4]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg4_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg4_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[4]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg4_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg4_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg4_1, &arg4_1_device_type));

    int32_t arg4_1_expected_device_type = 0;
    if (arg4_1_expected_device_type != arg4_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[4]: unmatched device type, "
        << "expected: " << arg4_1_expected_device_type << "0(cpu), "
        << "but got: " << arg4_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_5(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg5_1 = ConstantHandle(input_handles[5]);
    int32_t arg5_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg5_1, &arg5_1_dtype));

    int32_t arg5_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg5_1_expected_dtype != arg5_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[5]: unmatched dtype, "
           << "expected: " << arg5_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg5_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg5_1_size = arg5_1.sizes();

    if (3 != arg5_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[5]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg5_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg5_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[5]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg5_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg5_1_stride = arg5_1.strides();

    if (5 != arg5_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[5]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg5_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg5_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[5]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg5_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg5_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg5_1, &arg5_1_device_type));

    int32_t arg5_1_expected_device_type = 0;
    if (arg5_1_expected_device_type != arg5_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[5]: unmatched device type, "
        << "expected: " << arg5_1_expected_device_type << "0(cpu), "
        << "but got: " << arg5_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_6(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg6_1 = ConstantHandle(input_handles[6]);
    int32_t arg6_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg6_1, &arg6_1_dtype));

    int32_t arg6_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg6_1_expected_dtype != arg6_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[6]: unmatched dtype, "
           << "expected: " << arg6_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg6_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg6_1_size = arg6_1.sizes();

    if (3 != arg6_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[6]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg6_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg6_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[6]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg6_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg6_1_stride = arg6_1.strides();

    if (5 != arg6_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[6]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg6_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg6_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[6]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg6_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg6_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg6_1, &arg6_1_device_type));

    int32_t arg6_1_expected_device_type = 0;
    if (arg6_1_expected_device_type != arg6_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[6]: unmatched device type, "
        << "expected: " << arg6_1_expected_device_type << "0(cpu), "
        << "but got: " << arg6_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_7(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg7_1 = ConstantHandle(input_handles[7]);
    int32_t arg7_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg7_1, &arg7_1_dtype));

    int32_t arg7_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg7_1_expected_dtype != arg7_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[7]: unmatched dtype, "
           << "expected: " << arg7_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg7_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg7_1_size = arg7_1.sizes();

    if (3 != arg7_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[7]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg7_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg7_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[7]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg7_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg7_1_stride = arg7_1.strides();

    if (5 != arg7_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[7]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg7_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg7_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[7]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg7_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg7_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg7_1, &arg7_1_device_type));

    int32_t arg7_1_expected_device_type = 0;
    if (arg7_1_expected_device_type != arg7_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[7]: unmatched device type, "
        << "expected: " << arg7_1_expected_device_type << "0(cpu), "
        << "but got: " << arg7_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_8(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg8_1 = ConstantHandle(input_handles[8]);
    int32_t arg8_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg8_1, &arg8_1_dtype));

    int32_t arg8_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg8_1_expected_dtype != arg8_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[8]: unmatched dtype, "
           << "expected: " << arg8_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg8_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg8_1_size = arg8_1.sizes();

    if (3 != arg8_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[8]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg8_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg8_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[8]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg8_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg8_1_stride = arg8_1.strides();

    if (5 != arg8_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[8]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg8_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg8_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[8]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg8_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg8_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg8_1, &arg8_1_device_type));

    int32_t arg8_1_expected_device_type = 0;
    if (arg8_1_expected_device_type != arg8_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[8]: unmatched device type, "
        << "expected: " << arg8_1_expected_device_type << "0(cpu), "
        << "but got: " << arg8_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_9(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg9_1 = ConstantHandle(input_handles[9]);
    int32_t arg9_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg9_1, &arg9_1_dtype));

    int32_t arg9_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg9_1_expected_dtype != arg9_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[9]: unmatched dtype, "
           << "expected: " << arg9_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg9_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg9_1_size = arg9_1.sizes();

    if (3 != arg9_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[9]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg9_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg9_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[9]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg9_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg9_1_stride = arg9_1.strides();

    if (5 != arg9_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[9]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg9_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg9_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[9]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg9_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg9_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg9_1, &arg9_1_device_type));

    int32_t arg9_1_expected_device_type = 0;
    if (arg9_1_expected_device_type != arg9_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[9]: unmatched device type, "
        << "expected: " << arg9_1_expected_device_type << "0(cpu), "
        << "but got: " << arg9_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_10(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg10_1 = ConstantHandle(input_handles[10]);
    int32_t arg10_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg10_1, &arg10_1_dtype));

    int32_t arg10_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg10_1_expected_dtype != arg10_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[10]: unmatched dtype, "
           << "expected: " << arg10_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg10_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg10_1_size = arg10_1.sizes();

    if (3 != arg10_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[10]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg10_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg10_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[10]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg10_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg10_1_stride = arg10_1.strides();

    if (5 != arg10_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[10]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg10_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg10_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[10]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg10_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg10_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg10_1, &arg10_1_device_type));

    int32_t arg10_1_expected_device_type = 0;
    if (arg10_1_expected_device_type != arg10_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[10]: unmatched device type, "
        << "expected: " << arg10_1_expected_device_type << "0(cpu), "
        << "but got: " << arg10_1_device_type << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
}

AOTI_NOINLINE static void check_input_11(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg11_1 = ConstantHandle(input_handles[11]);
    int32_t arg11_1_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(arg11_1, &arg11_1_dtype));

    int32_t arg11_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg11_1_expected_dtype != arg11_1_dtype) {
        std::stringstream ss;
        ss << "input_handles[11]: unmatched dtype, "
           << "expected: " << arg11_1_expected_dtype << "(at::kFloat), "
           << "but got: " << arg11_1_dtype << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg11_1_size = arg11_1.sizes();

    if (3 != arg11_1_size[0]) {
        std::stringstream ss;
        ss << "input_handles[11]: unmatched dim value at 0, "
           << "expected: 3, " << "but got: " << arg11_1_size[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (5 != arg11_1_size[1]) {
        std::stringstream ss;
        ss << "input_handles[11]: unmatched dim value at 1, "
           << "expected: 5, " << "but got: " << arg11_1_size[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    auto arg11_1_stride = arg11_1.strides();

    if (5 != arg11_1_stride[0]) {
        std::stringstream ss;
        ss << "input_handles[11]: unmatched stride value at 0, "
           << "expected: 5, " << "but got: " << arg11_1_stride[0]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }

    if (1 != arg11_1_stride[1]) {
        std::stringstream ss;
        ss << "input_handles[11]: unmatched stride value at 1, "
           << "expected: 1, " << "but got: " << arg11_1_stride[1]
           << "\n";
        throw std::runtime_error(std::move(ss).str());
    }
    int32_t arg11_1_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(arg11_1, &arg11_1_device_type));

    int32_t arg11_1_expected_device_type = 0;
    if (arg11_1_expected_device_type != arg11_1_device_type) {
        std::stringstream ss;
        ss << "input_handles[11]: unmatched device type, "
        << "expected: " << arg11_1_expected_device_type << "0(cpu), "
        << "but got: " << arg11_1_device_type << "\n";
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
    check_input_2(input_handles);
    check_input_3(input_handles);
    check_input_4(input_handles);
    check_input_5(input_handles);
    check_input_6(input_handles);
    check_input_7(input_handles);
    check_input_8(input_handles);
    check_input_9(input_handles);
    check_input_10(input_handles);
    check_input_11(input_handles);
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
    auto inputs = steal_from_raw_handles_to_raii_handles(input_handles, 12);
    auto arg0_1 = std::move(inputs[0]);
    auto arg1_1 = std::move(inputs[1]);
    auto arg2_1 = std::move(inputs[2]);
    auto arg3_1 = std::move(inputs[3]);
    auto arg4_1 = std::move(inputs[4]);
    auto arg5_1 = std::move(inputs[5]);
    auto arg6_1 = std::move(inputs[6]);
    auto arg7_1 = std::move(inputs[7]);
    auto arg8_1 = std::move(inputs[8]);
    auto arg9_1 = std::move(inputs[9]);
    auto arg10_1 = std::move(inputs[10]);
    auto arg11_1 = std::move(inputs[11]);
    inputs.clear();
    [[maybe_unused]] auto& kernels = static_cast<AOTInductorModelKernels&>(*this->kernels_.get());
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg0_1, {3L, 5L}, {5L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg1_1, {3L, 5L}, {5L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg2_1, {3L, 5L}, {5L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg3_1, {3L, 5L}, {5L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg4_1, {3L, 5L}, {5L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg5_1, {3L, 5L}, {5L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg6_1, {3L, 5L}, {5L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg7_1, {3L, 5L}, {5L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg8_1, {3L, 5L}, {5L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg9_1, {3L, 5L}, {5L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg10_1, {3L, 5L}, {5L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg11_1, {3L, 5L}, {5L, 1L}, "input"); }
    static constexpr int64_t int_array_0[] = {3L, 5L};
    static constexpr int64_t int_array_1[] = {5L, 1L};
    AtenTensorHandle buf0_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf0_handle));
    RAIIAtenTensorHandle buf0(buf0_handle);
    AtenTensorHandle buf1_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf1_handle));
    RAIIAtenTensorHandle buf1(buf1_handle);
    cpp_fused_add_mul_0((const float*)(arg0_1.data_ptr()), (const float*)(arg1_1.data_ptr()), (const float*)(arg2_1.data_ptr()), (const float*)(arg3_1.data_ptr()), (const float*)(arg4_1.data_ptr()), (const float*)(arg5_1.data_ptr()), (const float*)(arg6_1.data_ptr()), (const float*)(arg7_1.data_ptr()), (const float*)(arg8_1.data_ptr()), (const float*)(arg9_1.data_ptr()), (const float*)(arg10_1.data_ptr()), (const float*)(arg11_1.data_ptr()), (float*)(buf0.data_ptr()), (float*)(buf1.data_ptr()));
    arg0_1.reset();
    arg10_1.reset();
    arg11_1.reset();
    arg1_1.reset();
    arg2_1.reset();
    arg3_1.reset();
    arg4_1.reset();
    arg5_1.reset();
    arg6_1.reset();
    arg7_1.reset();
    arg8_1.reset();
    arg9_1.reset();
    output_handles[0] = buf0.release();
    output_handles[1] = buf1.release();
} // AOTInductorModel::run_impl
} // namespace torch::aot_inductor
