"""Results left in GPU memory (``device_output=True``) and how other frameworks take them."""

from __future__ import annotations

from . import _core

#: An engine's result in GPU memory (``lingo.matrix(..., device_output=True)``,
#: ``orbital.grid(..., device_output=True)``, ``orbital.density(...)``). Attributes: ``shape``,
#: ``dtype`` (a NumPy dtype name), ``device`` (the CUDA device), ``nbytes``, ``pointer``;
#: ``to_numpy()`` copies it to the host. It implements DLPack (``__dlpack__``,
#: ``__dlpack_device__``) and ``__cuda_array_interface__`` (v3), so ``cupy.asarray(a)``,
#: ``cupy.from_dlpack(a)`` and ``torch.from_dlpack(a)`` use its memory without a copy; the memory
#: is freed when the last of them (and ``a``) goes.
#:
#: Streams: molaccel has finished writing the memory when the call returns (it waits for its own
#: stream), so a consumer may use it at once on any stream, its own included. DLPack's
#: ``stream`` argument is checked (None, -1, 1, 2 or a stream handle; 0 is refused, as the
#: protocol says) and there is nothing to wait for; ``__cuda_array_interface__["stream"]`` is
#: None. linalg containers hand out their memory the same way.
DeviceArray = _core.DeviceArray


def check_device_output(device_output: bool) -> bool:
    if not isinstance(device_output, bool):
        raise TypeError(f"device_output must be True or False (got {device_output!r})")
    return device_output
