"""The one table of hardware targets. Every figure carries its source; nothing else hard-codes one.

TPU figures are per chip. Where jax's own table (``pltpu.get_tpu_info_for_chip``, offline since
0.10) gives a figure we take it from there: it reports per TensorCore, so chip = per-core x cores
(tests/test_chips.py checks the two agree). Scoped VMEM defaults are not in jax: they were measured
by compiling kernels of growing size with libtpu 0.0.42.1 (an f32 add kernel with double-buffered
(bm, 1024) blocks: v4, v5e and v5p fit 12 MiB and refuse 24 MiB; v6e and TPU7x fit 24 MiB and
refuse 48 MiB).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from .errors import UsageError

KiB, MiB, GiB = 1024, 1024**2, 1024**3

TPU_INFO = "jax tpu_info (pltpu.get_tpu_info_for_chip), per core x cores"
MEASURED = "measured: libtpu 0.0.42.1 deviceless compiles of kernels of growing VMEM use (fits at the limit, fails past it)"
CLOUD_TPU = "Cloud TPU system architecture pages"
PROBED_TOPOLOGIES = ("probed: jax.experimental.topologies.get_topology_desc accepts each name with libtpu 0.0.42.1 "
                     "(tests/test_pods.py checks each); v5e refuses 1x1, 1x2 and 2x1")
MEASURED_HBM = ("measured: libtpu 0.0.42.1 refuses a deviceless compile past it: 'the total memory required ... exceeds "
                "available HBM (15.75G)' on v5e (per jax device: a TensorCore on v4 and TPU7x)")
SCALING_BOOK_ICI = "the scaling book (jax-ml.github.io/scaling-book/tpus), ICI bandwidth per link, one way"
# The clock is nowhere in jax's table: it is the bf16 peak over the MXU work of one cycle
# (TensorCores x MXUs x width^2 x 2 flops), and libtpu's own simulation of a 4096^3 bf16 dot
# (LIBTPU_INIT_ARGS=--xla_jf_dump_static_llo_profile_to, libtpu 0.0.42.1) confirms the rate per cycle.
_DOT = "libtpu's simulated 4096^3 bf16 dot runs at {pct}% of that rate"
_2D = ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_3D = ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16")


@dataclasses.dataclass(frozen=True)
class Chip:
    """A piece of hardware a target is compiled for or measured against: its figures (per chip
    unless said), each with the source it came from in ``sources``, and how to compile for it."""

    name: str
    kind: str  # "tpu", "gpu" (XLA:GPU deviceless where the row has a target_config, else budgets and roofline only) or "local" (jax's own backend)
    description: str
    aliases: tuple[str, ...] = ()
    tensor_cores: int | None = None
    vmem_bytes: int | None = None  # per TensorCore
    sparse_core_vmem_bytes: int | None = None  # per SparseCore vector subcore; None: the chip has no SparseCore
    scoped_vmem_bytes: int | None = None  # default scoped limit per kernel
    smem_bytes: int | None = None
    shared_mem_per_block: int | None = None  # GPU opt-in maximum
    # GPU rows with an XLA target config (inspector/families/gpu/specs/) compile deviceless; each of
    # these comes from that file (the field's source names it; tests/test_gpu_family.py checks)
    target_config: str | None = None  # the spec file's name
    compute_capability: str | None = None  # "9.0a": what ptxas calls sm_90a
    sms: int | None = None  # streaming multiprocessors
    shared_mem_per_sm: int | None = None
    registers_per_sm: int | None = None  # 32-bit registers
    threads_per_sm: int | None = None
    # what bounds how many blocks (CTAs) an SM holds at once, beside the fields above: the
    # compute-capability tables (GPU_OCCUPANCY below; kernels/occupancy.py uses them)
    max_ctas_per_sm: int | None = None  # resident blocks per SM
    max_warps_per_sm: int | None = None  # resident warps per SM
    register_alloc_unit: int | None = None  # a warp's registers are allocated in multiples of this
    sm_subpartitions: int | None = None  # the register file is split over these (one warp scheduler each)
    shared_mem_alloc_unit: int | None = None  # a block's shared memory is allocated in multiples of this
    reserved_shared_mem_per_block: int | None = None  # shared memory the system takes per block (sm80+: 1 KiB)
    # GPU peaks beside bf16_flops (dense tensor core): tf32 on the tensor cores, f32 on the CUDA
    # cores (no tensor core), and the SFU's transcendentals (exp2, log2, rcp, rsqrt, sin, cos) a clock per SM
    tf32_flops: float | None = None
    f32_flops: float | None = None
    f16_flops: float | None = None  # 16-bit float arithmetic on the CUDA cores (packed pairs)
    sfu_ops_per_clock_per_sm: int | None = None
    l2_bytes: int | None = None
    hbm_bytes: int | None = None
    hbm_bytes_per_s: float | None = None
    bf16_flops: float | None = None
    int8_ops: float | None = None
    mxu: int | None = None
    sublanes: int | None = None
    lanes: int | None = None
    topology: str | None = None  # libtpu topology name for deviceless compiles
    topologies: tuple[str, ...] = ()  # slice shapes a target may name (tpu-v5e:16x16), each a deviceless compile
    devices: int = 1  # devices the program spans: 1 (one chip of a host-sized topology) or the whole topology's
    devices_per_chip: int = 1  # jax devices per chip in a deviceless topology (a TensorCore each on v4 and TPU7x)
    hbm_device_bytes: int | None = None  # HBM a program may use per jax device (what the compiler refuses past)
    ici_bytes_per_s: float | None = None  # ICI bandwidth of one link, one direction
    ici_links: int | None = None  # ICI ports per chip
    clock_hz: float | None = None  # TensorCore clock: what turns libtpu's cycle estimates into seconds
    # vector instructions a TensorCore issues a cycle, each on one (sublanes x lanes) 32-bit register:
    # VALU (elementwise arithmetic, the VPU) and EUP (transcendentals); None where no source gives it
    valu_slots: int | None = None
    eup_slots: int | None = None
    # XLUs (cross-lane units: a reduction across the lanes, a broadcast of one lane to all) a
    # TensorCore has, and the cycles one instruction on one register holds one; None where unknown
    xlu_units: int | None = None
    xlu_cycles: float | None = None
    # the VALU has 16-bit float ops (vmul.bf16): else 16-bit arithmetic runs in f32, one instruction a half
    valu_bf16: bool | None = None
    device_kind: str | None = None  # what jax reports for the device
    pci_device_id: str | None = None  # the chip's PCI device id (vendor 0x1ae0, Google): which TPU is attached
    jax_chip_version: str | None = None  # pltpu ChipVersion value
    # TensorCores one jax device splits a "parallel" grid axis over: each core pipelines its own
    # share of the steps (so a share of one step is single-buffered)
    parallel_grid_cores: int = 1
    # a jax device drives two TensorCores on this chip's TPU VM (a megacore: v4, v5p), which a
    # "parallel" grid axis is split over there; libtpu's deviceless v4 topology compiles a device
    # per TensorCore (cores_per_device 1), so that compile shows no split
    megacore: bool = False
    # libtpu's static simulation times programs for this chip (what `--time` and `tune` rank by)
    libtpu_times: bool = True
    sources: dict = dataclasses.field(default_factory=dict)

    @property
    def is_tpu(self) -> bool:
        return self.kind == "tpu"

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    @property
    def sfu_ops_per_s(self) -> float | None:
        """Transcendentals a second over a GPU's SMs (the SFUs' peak)."""
        if not (self.sfu_ops_per_clock_per_sm and self.sms and self.clock_hz):
            return None
        return self.sfu_ops_per_clock_per_sm * self.sms * self.clock_hz

    @property
    def vpu_ops_per_s(self) -> float | None:
        """32-bit elementwise ops a second over the chip's TensorCores (the VPU's peak)."""
        return self._vector_rate(self.valu_slots)

    @property
    def eup_ops_per_s(self) -> float | None:
        """Transcendentals (exp, log, tanh ...) a second over the chip's TensorCores (the EUP's peak)."""
        return self._vector_rate(self.eup_slots)

    @property
    def xlu_ops_per_s(self) -> float | None:
        """Cross-lane instructions (each on one register) a second over the chip's TensorCores."""
        if not (self.xlu_units and self.xlu_cycles and self.clock_hz):
            return None
        return self.xlu_units / self.xlu_cycles * self.clock_hz * (self.tensor_cores or 1)

    def _vector_rate(self, slots: int | None) -> float | None:
        if not (slots and self.clock_hz and self.sublanes and self.lanes):
            return None
        return slots * self.sublanes * self.lanes * self.clock_hz * (self.tensor_cores or 1)

    @property
    def cores_per_device(self) -> int:
        """TensorCores one jax device drives (what libtpu's deviceless topology reports as a device's
        ``num_cores``: 2 on v5p, 1 on v4 and TPU7x, whose cores are a device each)."""
        return max(1, (self.tensor_cores or 1) // (self.devices_per_chip or 1))

    @property
    def megacore_cores(self) -> int:
        """TensorCores a "parallel" grid axis is split over when the kernel runs on this chip's TPU VM:
        every core of a megacore chip, else the device's own (``cores_per_device``)."""
        return (self.tensor_cores or 1) if self.megacore else self.cores_per_device


# the linear attention kernel of tests/data/third_party_styles.py, bf16 (BH, 4096|16384, 128), one
# chunk per step, compiled deviceless with libtpu 0.0.42.1
MEASURED_SPLIT = ("measured: a grid (2, 1) with ('parallel', 'arbitrary') takes 4.06 MiB of scoped VMEM on v5p "
                  "(one buffer per block), (4, 1) and ('arbitrary', 'arbitrary') 8.06 MiB (two); v4 8.06 MiB for (2, 1) with either semantics")



MEGACORE = ("jax's pltpu.ChipVersion(...).supports_megacore (True for v4 and v5p); the Pallas core_map guide "
            "(docs.jax.dev/en/latest/pallas/tpu/core_map.html): 'For recent TPU chips (v4, v5p), every JAX device "
            "may contain 2 TensorCores (aka. a Megacore)'")
PCI_IDS = "jax/_src/hardware_utils.py (_TPU_PCI_DEVICE_IDS), what jax reads at start-up to find the TPU"
# why libtpu simulates no program for a chip with libtpu_times=False, in libtpu's own words
UNSIMULATED_WHY = "its static profile aborts: 'Dma latency model is currently only supported on VF/VL/GF/GL'"
LIBTPU_TIMES = ("measured, libtpu 0.0.42.1: its static profile of a v4 compile aborts ('Dma latency model is "
                "currently only supported on VF/VL/GF/GL'); v5e, v5p, v6e and TPU7x are simulated")


# VALU and EUP instructions a TensorCore issues per cycle, each on one 8 x 128 register of 32-bit values
SCALING_BOOK_VPU = ("the scaling book (jax-ml.github.io/scaling-book/tpus, {where}): the VPU is (8, 128) lanes; "
                    "each (lane, sublane) holds {n} ALUs on {gen}")
LIBTPU_SLOTS = ("measured: libtpu 0.0.42.1's bundle-utilization capacity row (LLO dump of a deviceless compile, "
                "`show --view bundles`): {what} {n} a bundle")
_VECTOR_SLOTS: dict[str, tuple[int | None, int | None, str, str]] = {  # name -> (VALU, EUP, their sources)
    "tpu-v4": (2, 1, SCALING_BOOK_VPU.format(n=2, gen="v4 (2048 in all)", where="its first text's Appendix C") + "; "
               + LIBTPU_SLOTS.format(what="VALU", n=2), LIBTPU_SLOTS.format(what="EUP", n=1)),
    "tpu-v5e": (4, 1, SCALING_BOOK_VPU.format(n=4, gen="v5", where="Appendix A") + "; " + LIBTPU_SLOTS.format(what="VALU", n=4),
                LIBTPU_SLOTS.format(what="EUP", n=1)),
    "tpu-v5p": (4, 1, SCALING_BOOK_VPU.format(n=4, gen="v5", where="Appendix A") + "; " + LIBTPU_SLOTS.format(what="VALU", n=4),
                LIBTPU_SLOTS.format(what="EUP", n=1)),
    "tpu-v6e": (4, 1, LIBTPU_SLOTS.format(what="VALU", n=4), LIBTPU_SLOTS.format(what="EUP", n=1)),
    "tpu-7x": (4, 1, LIBTPU_SLOTS.format(what="VALU", n=4), LIBTPU_SLOTS.format(what="EUP", n=1)),
}


# a TensorCore's XLUs (the capacity row), and the slots of one XLU each cross-lane instruction on
# one register holds, over the bundles of one-op kernels: 64 lane reductions (vmax.xlane) of a
# (512, 512) f32 block, 64 lane broadcasts (vperm) of its first column; the broadcast's, the
# fewer, is the figure (a lower bound for both)
LIBTPU_XLU = ("measured: libtpu 0.0.42.1's bundle-utilization dump (deviceless compile) of one-op kernels on a (512, 512) "
              "f32 block: {units} XLUs a bundle; 64 lane reductions hold {reduce} XLU slots, 64 lane broadcasts {bcast}")
_XLU: dict[str, tuple[int, float, str]] = {  # name -> (XLUs, cycles an instruction holds one, the source)
    "tpu-v4": (2, 434 / 64, LIBTPU_XLU.format(units=2, reduce=512, bcast=434)),
    "tpu-v5e": (3, 401 / 64, LIBTPU_XLU.format(units=3, reduce=462, bcast=401)),
    "tpu-v5p": (3, 401 / 64, LIBTPU_XLU.format(units=3, reduce=462, bcast=401)),
    "tpu-v6e": (2, 165 / 64, LIBTPU_XLU.format(units=2, reduce=222, bcast=165)),
    "tpu-7x": (2, 164 / 64, LIBTPU_XLU.format(units=2, reduce=222, bcast=164)),
}


# whether the VALU has 16-bit float ops: the bundles of bf16 y * y + y on a (512, 512) block
LIBTPU_BF16 = "measured: libtpu 0.0.42.1's bundles of bf16 y * y + y on a (512, 512) block: {what}"
BF16_OPS = LIBTPU_BF16.format(what="128 vmul.bf16 and 128 vadd.bf16")
F32_HALVES = LIBTPU_BF16.format(what="256 vmul.f32 and 256 vadd.f32 between vunpack and vpack")
_VALU_BF16 = {"tpu-v4": (False, F32_HALVES), "tpu-v5e": (False, F32_HALVES), "tpu-v5p": (False, F32_HALVES),
              "tpu-v6e": (True, BF16_OPS), "tpu-7x": (True, BF16_OPS)}


def _tpu(name, description, *, aliases=(), cores, vmem, scoped, hbm, bw, bf16, int8, mxu, topology,
         device_kind, pci, version, topologies, hbm_device, ici, links, ici_source, clock, clock_source,
         devices_per_chip=1, parallel_grid_cores=1, megacore=False, sc_vmem=None, libtpu_times=True, sources=None) -> Chip:
    base = {
        "tensor_cores": CLOUD_TPU, "vmem_bytes": TPU_INFO, "smem_bytes": TPU_INFO, "hbm_bytes": TPU_INFO,
        "hbm_bytes_per_s": TPU_INFO, "bf16_flops": TPU_INFO, "int8_ops": TPU_INFO, "mxu": TPU_INFO,
        "sublanes": TPU_INFO, "lanes": TPU_INFO, "scoped_vmem_bytes": MEASURED,
        "topology": "topology names libtpu 0.0.42.1 accepts for a deviceless compile",
        "topologies": PROBED_TOPOLOGIES, "hbm_device_bytes": MEASURED_HBM,
        "ici_bytes_per_s": ici_source, "ici_links": ici_source,
        "devices_per_chip": "probed: get_topology_desc('v4:2x2x1') and ('tpu7x:2x2x1') list 8 devices for 4 chips",
        "clock_hz": clock_source, "parallel_grid_cores": MEASURED_SPLIT,
        "libtpu_times": LIBTPU_TIMES,
        "sparse_core_vmem_bytes": TPU_INFO + " (SparseCoreInfo.vmem_capacity_bytes; no SparseCore on v4 and v5e)",
        "pci_device_id": PCI_IDS, "megacore": MEGACORE,
    }
    valu, eup, base["valu_slots"], base["eup_slots"] = _VECTOR_SLOTS[name]
    xlus, xlu_cycles, base["xlu_units"] = _XLU[name]
    base["xlu_cycles"] = base["xlu_units"]
    valu_bf16, base["valu_bf16"] = _VALU_BF16[name]
    base.update(sources or {})
    return Chip(name, "tpu", description, aliases, tensor_cores=cores, vmem_bytes=vmem, scoped_vmem_bytes=scoped,
                smem_bytes=1 * MiB, hbm_bytes=hbm, hbm_bytes_per_s=bw, bf16_flops=bf16, int8_ops=int8, mxu=mxu,
                sublanes=8, lanes=128, topology=topology, device_kind=device_kind, pci_device_id=pci, jax_chip_version=version,
                topologies=topologies, hbm_device_bytes=hbm_device, ici_bytes_per_s=ici, ici_links=links,
                devices_per_chip=devices_per_chip, clock_hz=clock, parallel_grid_cores=parallel_grid_cores, megacore=megacore,
                sparse_core_vmem_bytes=sc_vmem, libtpu_times=libtpu_times, valu_slots=valu, eup_slots=eup,
                xlu_units=xlus, xlu_cycles=xlu_cycles, valu_bf16=valu_bf16,
                sources=base)


# a GPU row's field -> the target config's field it comes from
SPEC_FIELDS = {"compute_capability": "compute_capability", "sms": "core_count",
               "shared_mem_per_block": "shared_memory_per_block_optin", "shared_mem_per_sm": "shared_memory_per_core",
               "registers_per_sm": "registers_per_core_limit", "threads_per_sm": "threads_per_core_limit",
               "l2_bytes": "l2_cache_size", "clock_hz": "clock_rate_ghz", "hbm_bytes_per_s": "memory_bandwidth",
               "hbm_device_bytes": "device_memory_size", "device_kind": "device_description_str"}


# Occupancy facts of compute capability 8.0 and 9.0 (identical on both), each from the CUDA C++
# Programming Guide's tables ("Technical Specifications per Compute Capability"; "Compute
# Capability 8.x / 9.0": shared memory) and the occupancy calculator that ships with the toolkit
# (cuda_occupancy.h: how registers and shared memory are allocated)
CUDA_GUIDE_SPECS = "CUDA C++ Programming Guide, Technical Specifications per Compute Capability (8.0, 9.0)"
CUDA_OCCUPANCY = "the CUDA toolkit's occupancy calculator (cuda_occupancy.h, {what}) for compute capability 8.0 and 9.0"
GPU_OCCUPANCY = {
    "max_ctas_per_sm": (32, CUDA_GUIDE_SPECS + ": maximum number of resident blocks per SM, 32"),
    "max_warps_per_sm": (64, CUDA_GUIDE_SPECS + ": maximum number of resident warps per SM, 64"),
    "register_alloc_unit": (256, CUDA_OCCUPANCY.format(what="regAllocUnitSize: registers are given a warp in units of 256")),
    "sm_subpartitions": (4, CUDA_OCCUPANCY.format(what="cudaOccSubPartitionsPerMultiprocessor: 4; the register file is "
                                                       "split between them")),
    "shared_mem_alloc_unit": (128, CUDA_OCCUPANCY.format(what="cudaOccSMemAllocationGranularity: 128 bytes")),
    "reserved_shared_mem_per_block": (1024, "CUDA C++ Programming Guide, Compute Capability 8.x and 9.0 (shared memory): "
                                            "1 KB of shared memory is reserved for system use per thread block"),
    "sfu_ops_per_clock_per_sm": (16, "CUDA C++ Programming Guide, Arithmetic Instructions throughput table: 16 results a "
                                     "clock per SM for 32-bit reciprocal, rsqrt, log2, exp2, sin, cos on 8.0 and 9.0"),
}


# 16-bit float add/multiply/fma results a clock per SM on the CUDA cores (compute capability 8.0 and 9.0)
F16_PER_SM = 256
F16_SOURCE = ("derived: CUDA C++ Programming Guide, Arithmetic Instructions throughput table: 256 16-bit float "
              "add/multiply/fma results a clock per SM on 8.0 and 9.0, x 2 flops x SMs x clock")


GPU_NODE_SIZES = (2, 4, 8)  # GPUs of one NVLink node a GPU target may span (h100:8): XLA:GPU's topology 1x1xN
GPU_NODE_SOURCE = "XLA:GPU's deviceless cuda topology 1x1xN: the GPUs of one NVLink node (jax_internals/cuda_topology.py)"


def _gpu(name, description, *, bw, bf16, smem, hbm, source, spec: str | None = None, tf32=None, f32=None,
         peak_source=None, **from_spec) -> Chip:
    """A GPU row. With ``spec`` (a file of inspector/families/gpu/specs/), the ``from_spec`` fields
    (SPEC_FIELDS) are that file's figures, and XLA:GPU compiles for the chip deviceless, its
    kernels' occupancy reckoned from GPU_OCCUPANCY; ``tf32``, ``f32``: the tensor core's tf32 and
    the CUDA cores' f32 peaks (``peak_source``)."""
    fields = ("hbm_bytes_per_s", "bf16_flops", "shared_mem_per_block", "hbm_bytes")
    sources = {f: source for f in fields}
    occupancy: dict[str, Any] = {}
    f16 = None
    if spec:
        sources.update({f: f"XLA's target config {spec} ({SPEC_FIELDS[f]})" for f in ("shared_mem_per_block", *from_spec)})
        sources["hbm_bytes_per_s"] = f"XLA's target config {spec} (memory_bandwidth, rounded)"
        occupancy = {f: value for f, (value, _) in GPU_OCCUPANCY.items()}
        sources.update({f: why for f, (_, why) in GPU_OCCUPANCY.items()})
        f16 = F16_PER_SM * 2 * from_spec["sms"] * from_spec["clock_hz"]
        sources["f16_flops"] = F16_SOURCE
        sources["topologies"] = GPU_NODE_SOURCE
    if tf32 is not None:
        sources.update(tf32_flops=peak_source, f32_flops=peak_source)
    return Chip(name, "gpu", description, hbm_bytes=hbm, hbm_bytes_per_s=bw, bf16_flops=bf16,
                shared_mem_per_block=smem, target_config=spec, sources=sources, tf32_flops=tf32, f32_flops=f32,
                f16_flops=f16, topologies=tuple(str(n) for n in GPU_NODE_SIZES) if spec else (), **occupancy, **from_spec)


CHIPS: tuple[Chip, ...] = (
    Chip("cpu", "local", "this machine's CPU through jax's CPU backend (Pallas kernels interpreted)"),
    Chip("gpu", "local", "the local GPU through jax's CUDA backend, when jax sees one"),
    _tpu("tpu-v4", "TPU v4 (megacore: 2 TensorCores act as one device)", aliases=("v4",), cores=2,
         vmem=16 * MiB, scoped=16 * MiB, hbm=34_400_000_000, bw=1.23e12, bf16=275e12, int8=None, mxu=128,
         topology="v4:2x2x1", device_kind="TPU v4", pci="0x005e", version="v4", topologies=_3D + ("16x16x16",),
         hbm_device=round(15.25 * GiB), ici=4.5e10, links=6, devices_per_chip=2, libtpu_times=False, megacore=True,
         ici_source=SCALING_BOOK_ICI + "; 6 links (3D torus)",
         clock=1.05e9, clock_source="derived: 275e12 / (2 TensorCores x 4 MXUs x 128^2 x 2 flops) = 1.05 GHz, the 1050 MHz of the TPU v4 paper (ISCA 2023); libtpu cannot simulate v4 (its DMA latency model refuses the chip)",
         sources={"int8_ops": "not given by jax tpu_info"}),
    _tpu("tpu-v5e", "TPU v5e (v5 lite)", aliases=("v5e", "v5litepod"), cores=1,
         vmem=128 * MiB, scoped=16 * MiB, hbm=17_200_000_000, bw=0.82e12, bf16=197e12, int8=394e12, mxu=128,
         topology="v5e:2x2", device_kind="TPU v5 lite", pci="0x0063", version="v5e", topologies=_2D,
         hbm_device=round(15.75 * GiB), ici=4.5e10, links=4, ici_source=SCALING_BOOK_ICI + "; 4 ports (Cloud TPU v5e page: 2D torus)",
         clock=1.5e9, clock_source="derived: 197e12 / (4 MXUs x 128^2 x 2 flops) = 1.50 GHz; " + _DOT.format(pct=97)),
    _tpu("tpu-v5p", "TPU v5p (megacore)", aliases=("v5p",), cores=2,
         vmem=64 * MiB, scoped=16 * MiB, hbm=103_000_000_000, bw=2.46e12, bf16=459e12, int8=918e12, mxu=128,
         topology="v5p:2x2x1", device_kind="TPU v5", pci="0x0062", version="v5p", topologies=_3D + ("16x16x16", "16x16x24"),
         parallel_grid_cores=2, megacore=True,
         hbm_device=round(95.74 * GiB), sc_vmem=512 * 1024, ici=9e10, links=6, ici_source=SCALING_BOOK_ICI + "; 6 links (3D torus)",
         clock=1.75e9, clock_source="derived: 459e12 / (2 TensorCores x 4 MXUs x 128^2 x 2 flops) = 1.75 GHz; " + _DOT.format(pct=97),
         sources={"hbm_bytes_per_s": TPU_INFO + "; the Cloud TPU page says 2765 GB/s"}),
    _tpu("tpu-v6e", "TPU v6e (Trillium)", aliases=("v6e", "trillium"), cores=1,
         vmem=128 * MiB, scoped=32 * MiB, hbm=34_400_000_000, bw=1.64e12, bf16=920e12, int8=1840e12, mxu=256,
         topology="v6e:2x2", device_kind="TPU v6 lite", pci="0x006f", version="v6e", topologies=_2D,
         hbm_device=round(31.25 * GiB), sc_vmem=256 * 1024, ici=9e10, links=4, ici_source=SCALING_BOOK_ICI + "; 4 ports (Cloud TPU v6e page)",
         clock=1.75e9, clock_source="derived: 920e12 / (4 x 256^2 x 2 flops) = 1.75 GHz; " + _DOT.format(pct=94) + " (492,700 flops a cycle: more than the 2 MXUs jax's table lists could give at 256^2, so the 4 of the Cloud TPU page)"),
    _tpu("tpu-7x", "TPU7x (Ironwood, 2 TensorCores)", aliases=("ironwood", "tpu7x", "v7x"), cores=2,
         vmem=64 * MiB, scoped=32 * MiB, hbm=206_000_000_000, bw=7.4e12, bf16=2310e12, int8=None, mxu=256,
         topology="tpu7x:2x2x1", device_kind="TPU7x", pci="0x0076", version="7x", topologies=_3D,
         hbm_device=round(94.75 * GiB), ici=1e11, links=6, devices_per_chip=2,
         sc_vmem=512 * 1024,
         ici_source="Google's Ironwood announcement: 1.2 TBps bidirectional ICI per chip; over 6 links (3D torus, an assumption) = 100 GB/s one way",
         clock=2.2e9, clock_source="derived: 2310e12 / (2 TensorCores x 4 x 256^2 x 2 flops) = 2.2 GHz, as on v6e; "
         + _DOT.format(pct=93) + " on one TensorCore",
         sources={"int8_ops": "not given by jax tpu_info (no int8 MXU mode)"}),
    _gpu("a100", "NVIDIA A100 80GB SXM (XLA:GPU deviceless)", bw=2.039e12, bf16=312e12, smem=166_912, hbm=80 * GiB,
         source="NVIDIA A100 datasheet; CUDA C guide (163 KiB opt-in shared memory)",
         spec="a100_sxm_80.txtpb", compute_capability="8.0", sms=108, shared_mem_per_sm=167_936, registers_per_sm=65536,
         threads_per_sm=2048, l2_bytes=40 * MiB, clock_hz=1.41e9, hbm_device_bytes=85_100_068_864,
         device_kind="NVIDIA A100-SXM4-80GB", tf32=156e12, f32=19.5e12,
         peak_source="NVIDIA A100 datasheet: TF32 tensor core 156 TFLOPS (dense), FP32 19.5 TFLOPS"),
    _gpu("h100", "NVIDIA H100 SXM (XLA:GPU deviceless)", bw=3.35e12, bf16=989e12, smem=232_448, hbm=80 * GiB,
         source="NVIDIA H100 datasheet (dense bf16); CUDA C guide (227 KiB opt-in shared memory)",
         spec="h100_sxm.txtpb", compute_capability="9.0a", sms=132, shared_mem_per_sm=233_472, registers_per_sm=65536,
         threads_per_sm=2048, l2_bytes=50 * MiB, clock_hz=1.98e9, hbm_device_bytes=84_942_979_072,
         device_kind="NVIDIA H100 80GB HBM3", tf32=494.7e12, f32=66.9e12,
         peak_source="NVIDIA H100 datasheet (SXM): TF32 tensor core 989 TFLOPS with sparsity (494.7 dense), FP32 67 TFLOPS"),
    _gpu("h200", "NVIDIA H200 SXM (XLA:GPU deviceless)", bw=4.8e12, bf16=989e12, smem=232_448, hbm=141 * GiB,
         source="NVIDIA H200 datasheet (dense bf16); CUDA C guide (227 KiB opt-in shared memory)",
         spec="h200.txtpb", compute_capability="9.0a", sms=132, shared_mem_per_sm=233_472, registers_per_sm=65536,
         threads_per_sm=2048, l2_bytes=50 * MiB, clock_hz=1.98e9, hbm_device_bytes=151_397_597_184,
         device_kind="NVIDIA H200 141GB HBM3e", tf32=494.7e12, f32=66.9e12,
         peak_source="NVIDIA H200 datasheet (SXM): TF32 tensor core 989 TFLOPS with sparsity (494.7 dense), FP32 67 TFLOPS"),
    _gpu("b200", "NVIDIA B200 (spec only)", bw=8.0e12, bf16=2250e12, smem=232_448, hbm=180 * GiB,
         source="NVIDIA Blackwell datasheet (dense bf16); CUDA C guide (227 KiB opt-in shared memory)"),
)

_BY_NAME = {alias: chip for chip in CHIPS for alias in (chip.name, *chip.aliases)}


DEFAULT_TPU = "tpu-v5e"  # the chip a TPU-only verb (check, diff's interpreter, the UI on a Pallas file) takes unless told
SPARSE_CORE_CHIP = "tpu-7x"  # simulated on the CPU for a program that asks its chip for SparseCores (v5e has none)
SIMULATED_CHIP = DEFAULT_TPU  # whose figures a TPU kernel's own chip lookups get on the CPU (interpret mode)
INTERPRET_EXAMPLE = "tpu-v5p"  # the TPU the messages of diff (interpret mode) name as an example

# Chip facts beside the table's fields (kept out of `inspector chips --json`, which shows the fields),
# keyed by chip name.
# MXUs per TensorCore at full rate, as the clock's derivation counts them: the Cloud TPU pages (4 on every
# generation); jax's table says 2 for v6e and TPU7x, but libtpu's simulated dot runs faster than 2 MXUs of
# 256^2 could (tpu-v6e's clock source)
MXUS = {"tpu-v4": 4, "tpu-v5e": 4, "tpu-v5p": 4, "tpu-v6e": 4, "tpu-7x": 4}
# chips whose MXU takes 8-bit float operands as they are; elsewhere Mosaic converts them to bf16 first
# (measured: libtpu 0.0.42.1's compiles of fp8 matmuls, pallas/vmem_rule_evidence.json's fp8_as_bf16);
# int8 operands likewise where the chip has no int8 ops (Chip.int8_ops)
MXU_TAKES_FP8 = frozenset({"tpu-7x"})
# The bf16 MXU passes an f32 matmul takes, by XLA's operand_precision (every TPU generation's MXU
# multiplies bf16): HIGH splits each operand in two bf16 parts and takes 3 of their products (bf16_3x),
# HIGHEST in three and takes 6 (bf16_6x). Measured: libtpu 0.0.42.1's simulated f32 2048^3 dot on
# tpu-v5e, 93.5 us at default precision, 270 us HIGH (2.9x), 560 us HIGHEST (6.0x).
F32_MXU_PASSES = {"default": 1, "high": 3, "highest": 6}
# the chips of more than one TensorCore, as messages name them (tests/test_chips.py: every such chip)
MULTI_CORE_CHIPS = "v4 and v5p (megacore) and TPU7x"
# chips on whose TPU VM jax does not warn about transparent hugepages (it warns from v5e on)
NO_HUGEPAGES_WARNING = frozenset({"tpu-v4"})


def get_chip(name: str) -> Chip:
    """A chip by name or alias; ``tpu-v5e:16x16`` is that chip over a whole slice (a topology)."""
    base, sep, shape = name.strip().lower().partition(":")
    chip = _BY_NAME.get(base.strip())
    if chip is None:
        raise UsageError(f"unknown target {name!r}: use one of {', '.join(c.name for c in CHIPS)} (see `inspector chips`)")
    return _on_topology(chip.name, shape.strip()) if sep else chip


@functools.cache  # one object per name, like the plain chips
def _on_topology(chip_name: str, shape: str) -> Chip:
    chip = _BY_NAME[chip_name]
    if chip.target_config:  # a GPU XLA:GPU compiles for: its node's GPUs (h100:8)
        return _gpu_node(chip, shape)
    if not chip.is_tpu:
        raise UsageError(f"{chip.name}:{shape}: only TPU targets and {', '.join(c.name for c in CHIPS if c.target_config)} "
                         "take a topology (e.g. tpu-v5e:4x4, h100:8)")
    if shape not in chip.topologies:
        raise UsageError(f"{chip.name} has no topology {shape!r}: use one of {', '.join(chip.topologies)} "
                         f"(e.g. --target {chip.name}:{chip.topologies[2]}; see `inspector chips`)")
    chips = math.prod(int(d) for d in shape.split("x"))
    assert chip.topology is not None  # every TPU has one (_tpu)
    generation = chip.topology.split(":")[0]
    return dataclasses.replace(chip, name=f"{chip.name}:{shape}", aliases=(), topology=f"{generation}:{shape}",
                               devices=chips * chip.devices_per_chip,
                               description=f"{chip.description}, a {shape} slice: {chips} chips"
                               + (f", {chips * chip.devices_per_chip} devices" if chip.devices_per_chip > 1 else ""))


def _gpu_node(chip: Chip, shape: str) -> Chip:
    """``chip`` over ``shape`` GPUs of one node, each a device of the deviceless cuda topology."""
    if shape not in chip.topologies:  # the row's node sizes, as `inspector chips` lists them
        raise UsageError(f"{chip.name} has no topology {shape!r}: a GPU target spans the GPUs of one node, "
                         f"use one of {', '.join(f'{chip.name}:{n}' for n in chip.topologies)}")
    gpus = int(shape)
    return dataclasses.replace(chip, name=f"{chip.name}:{gpus}", aliases=(), devices=gpus,
                               description=f"{chip.description}, {gpus} GPUs of one node")


def parse_targets(text: str) -> list[Chip]:
    """``tpu-v5e,tpu-v6e`` -> chips, in the order given, without repeats."""
    chips: list[Chip] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        chip = get_chip(part)
        if chip not in chips:
            chips.append(chip)
    if not chips:
        raise UsageError("--target is empty: give a chip such as tpu-v5e (see `inspector chips`)")
    return chips
