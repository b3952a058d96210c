// C++ errors -> the exception classes of molaccel/_errors.py (InputError derives from ValueError
// and carries the input's path and line; every class carries the molaccel source file and line).
#include <exception>
#include <string>

#include <nanobind/stl/string.h>

#include "common.hpp"

namespace molaccel::python {
namespace {

std::string source_of(const Error& e) {
  const std::string file = e.source_file() ? e.source_file() : "";
  return file.empty() ? std::string() : file + ":" + std::to_string(e.source_line());
}

// Raises molaccel._errors.<name>(message, **attributes); the GIL is held in translators.
void raise(const char* name, const Error& e, nb::dict attributes) {
  nb::object cls = nb::module_::import_("molaccel._errors").attr(name);
  attributes["source"] = source_of(e);
  nb::object args = nb::make_tuple(std::string(e.what()));
  nb::object instance = nb::steal(PyObject_Call(cls.ptr(), args.ptr(), attributes.ptr()));
  if (!instance.is_valid()) return;  // constructing it raised: that exception stands
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
}

}  // namespace

void register_errors(nb::module_&) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const InputError& e) {
      nb::dict a;
      a["path"] = e.path();
      a["line"] = e.line();
      a["detail"] = e.detail();
      raise("InputError", e, a);
    } catch (const NvrtcError& e) {
      nb::dict a;
      a["log"] = e.log();
      a["offending_line"] = e.offending_line();
      raise("NvrtcError", e, a);
    } catch (const CudaError& e) {
      nb::dict a;
      a["code"] = e.code();
      a["out_of_memory"] = e.is_out_of_memory();
      raise("CudaError", e, a);
    } catch (const NotCompiled& e) {
      raise("NotCompiled", e, nb::dict());
    } catch (const DeviceUnavailable& e) {
      raise("DeviceUnavailable", e, nb::dict());
    } catch (const Cancelled& e) {
      raise("Cancelled", e, nb::dict());
    } catch (const Error& e) {
      raise("Error", e, nb::dict());
    }
  });
}

}  // namespace molaccel::python
