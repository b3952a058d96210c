// A build without OpenCL headers (MOLACCEL_OPENCL=OFF, or AUTO without CL/cl.h): no devices.
#include "molaccel/opencl.hpp"
#include "molaccel/runtime.hpp"

namespace molaccel {

std::vector<OpenClDeviceInfo> opencl_devices() {
  return {};
}

std::string opencl_absence_reason() {
  return "this build of molaccel has no OpenCL support (rebuild with the OpenCL headers, opencl-headers)";
}

}  // namespace molaccel
