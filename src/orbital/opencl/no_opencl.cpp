// Orbitals on OpenCL in a build without OpenCL headers.
#include "molaccel/opencl.hpp"

namespace molaccel::orbital {

std::vector<float> evaluate_orbitals_opencl(int, const Wavefunction&, const GridSpec&,
                                            const std::vector<OrbitalRef>&, const EvaluateOptions&,
                                            EvaluationInfo*) {
  MOLACCEL_THROW(NotCompiled,
                 "orbitals on OpenCL (this build has no OpenCL support: install opencl-headers)");
}

}  // namespace molaccel::orbital
