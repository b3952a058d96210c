// `--device opencl[:N]` on the commands with an OpenCL path (linalg solve, orbital grid): the
// common --device check (auto, cpu, gpu[:N]) is replaced by one that also takes opencl[:N].
// The choice is read back with parse_opencl_device(); Resources are never made for it.
#pragma once

#include <CLI/CLI.hpp>

#include "molaccel/opencl.hpp"

namespace molaccel::cli {

inline void allow_opencl_device(CLI::App& app) {
  CLI::Option* option = app.get_option("--device");
  option->get_validator(0)->active(false);
  option->description(option->get_description() +
                      ", or opencl / opencl:N (an OpenCL device; see `molaccel info`)");
  option->check([](const std::string& v) -> std::string {
    try {
      if (!parse_opencl_device(v)) DeviceSpec::parse(v);
      return {};
    } catch (const InputError& e) {
      return e.detail();
    }
  });
}

}  // namespace molaccel::cli
