"""Device facts for Step 5, from the CUDA driver (ctypes on ``libcuda``) and NVML when present.

torch's device properties carry no async engine count, so condition 1 of the chapter (a free
copy engine) is read from the driver: ``cuDeviceGetAttribute``. NVML (``nvidia-ml-py``, imported
only if installed) adds clocks and the PCIe link, for the device in use, matched by its PCI bus
id (not nvidia-smi's first GPU). Call ``nvml_facts`` after the copies: an idle link trains down.

Only the standard library is needed here; nothing runs at import.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# CUdevice_attribute values (cuda.h)
ATTRIBUTES = {
    "clock_rate_khz": 13,
    "sm_count": 16,
    "concurrent_kernels": 31,
    "pci_bus": 33,
    "pci_device": 34,
    "async_engine_count": 40,
    "pci_domain": 50,
    "cc_major": 75,
    "cc_minor": 76,
}
# PCIe per-lane throughput after encoding (GB/s) by generation, for the nominal link figure.
PCIE_GBYTES_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


class DriverError(RuntimeError):
    pass


def _libcuda():
    for name in ("libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda"), "nvcuda.dll"):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise DriverError("libcuda not found: no NVIDIA driver on this machine")


def driver_facts(ordinal: int = 0) -> dict:
    """Attributes of CUDA device ``ordinal`` as the driver reports them (raises DriverError)."""
    cuda = _libcuda()

    def call(fn, *args):
        code = getattr(cuda, fn)(*args)
        if code != 0:
            raise DriverError(f"{fn} failed with CUresult {code}")

    call("cuInit", 0)
    device = ctypes.c_int()
    call("cuDeviceGet", ctypes.byref(device), ordinal)
    values = {}
    for key, attribute in ATTRIBUTES.items():
        out = ctypes.c_int()
        call("cuDeviceGetAttribute", ctypes.byref(out), attribute, device)
        values[key] = out.value
    version = ctypes.c_int()
    call("cuDriverGetVersion", ctypes.byref(version))
    return {
        "async_engine_count": values["async_engine_count"],
        "concurrent_kernels": bool(values["concurrent_kernels"]),
        "compute_capability": f"{values['cc_major']}.{values['cc_minor']}",
        "sm_count": values["sm_count"],
        "clock_rate_khz": values["clock_rate_khz"],
        "pci_bus_id": pci_bus_id(values["pci_domain"], values["pci_bus"], values["pci_device"]),
        "cuda_driver_version": f"{version.value // 1000}.{version.value % 1000 // 10}",
    }


def pci_bus_id(domain: int, bus: int, device: int) -> str:
    """NVML's spelling of a PCI bus id: ``00000000:3B:00.0``."""
    return f"{domain:08X}:{bus:02X}:{device:02X}.0"


def nominal_gbytes_per_s(generation: int, width: int) -> float:
    return round(PCIE_GBYTES_PER_LANE.get(generation, 0.0) * width, 1)


def nvml_facts(bus_id: str) -> dict | None:
    """Clocks and PCIe link of the device at ``bus_id`` from NVML; None when NVML is absent."""
    try:
        import pynvml  # provided by nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, or NVML cannot start: the facts are simply missing
        return None
    try:
        try:  # nvidia-ml-py takes a str in recent releases, bytes in older ones
            handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        except (TypeError, AttributeError):
            handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode())
        facts: dict = {"driver_version": _text(pynvml.nvmlSystemGetDriverVersion())}
        readers = {
            "pcie_gen_current": lambda: pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
            "pcie_gen_max": lambda: pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
            "pcie_width_current": lambda: pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle),
            "pcie_width_max": lambda: pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle),
            "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "sm_clock_max_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(
                handle, pynvml.NVML_CLOCK_SM
            ),
        }
        for key, read in readers.items():
            try:
                facts[key] = int(read())
            except Exception:
                facts[key] = None
        if facts.get("pcie_gen_max") and facts.get("pcie_width_max"):
            facts["pcie_nominal_gbytes_per_s"] = nominal_gbytes_per_s(
                facts["pcie_gen_max"], facts["pcie_width_max"]
            )
        return facts
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
