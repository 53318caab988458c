"""The one table of hardware targets. Every figure carries its source; nothing else hard-codes one.

TPU figures are per chip. Where jax's own table (``pltpu.get_tpu_info_for_chip``, offline since
0.10) gives a figure we take it from there: it reports per TensorCore, so chip = per-core x cores
(tests/test_chips.py checks the two agree). Scoped VMEM defaults are not in jax: they were measured
by compiling kernels of growing size with libtpu 0.0.42.1 (../shared/facts.md section 1).
"""
from __future__ import annotations

import dataclasses

from .errors import UsageError

KiB, MiB, GiB = 1024, 1024**2, 1024**3

TPU_INFO = "jax tpu_info (pltpu.get_tpu_info_for_chip), per core x cores"
MEASURED = "measured: libtpu 0.0.42.1 deviceless compiles of kernels of growing VMEM use (fits at the limit, fails past it)"
CLOUD_TPU = "Cloud TPU system architecture pages"


@dataclasses.dataclass(frozen=True)
class Chip:
    """A piece of hardware a target is compiled for or measured against: its figures (per chip
    unless said), each with the source it came from in ``sources``, and how to compile for it."""

    name: str
    kind: str  # "tpu", "gpu" (spec only, for budgets and roofline) or "local" (jax's own backend)
    description: str
    aliases: tuple[str, ...] = ()
    tensor_cores: int | None = None
    vmem_bytes: int | None = None  # per TensorCore
    scoped_vmem_bytes: int | None = None  # default scoped limit per kernel
    smem_bytes: int | None = None
    shared_mem_per_block: int | None = None  # GPU opt-in maximum
    hbm_bytes: int | None = None
    hbm_bytes_per_s: float | None = None
    bf16_flops: float | None = None
    int8_ops: float | None = None
    mxu: int | None = None
    sublanes: int | None = None
    lanes: int | None = None
    topology: str | None = None  # libtpu topology name for deviceless compiles
    device_kind: str | None = None  # what jax reports for the device
    jax_chip_version: str | None = None  # pltpu ChipVersion value
    sources: dict = dataclasses.field(default_factory=dict)

    @property
    def is_tpu(self) -> bool:
        return self.kind == "tpu"

    @property
    def is_local(self) -> bool:
        return self.kind == "local"


def _tpu(name, description, *, aliases=(), cores, vmem, scoped, hbm, bw, bf16, int8, mxu, topology,
         device_kind, version, sources=None) -> Chip:
    base = {
        "tensor_cores": CLOUD_TPU, "vmem_bytes": TPU_INFO, "smem_bytes": TPU_INFO, "hbm_bytes": TPU_INFO,
        "hbm_bytes_per_s": TPU_INFO, "bf16_flops": TPU_INFO, "int8_ops": TPU_INFO, "mxu": TPU_INFO,
        "sublanes": TPU_INFO, "lanes": TPU_INFO, "scoped_vmem_bytes": MEASURED,
        "topology": "topology names libtpu 0.0.42.1 accepts for a deviceless compile",
    }
    base.update(sources or {})
    return Chip(name, "tpu", description, aliases, tensor_cores=cores, vmem_bytes=vmem, scoped_vmem_bytes=scoped,
                smem_bytes=1 * MiB, hbm_bytes=hbm, hbm_bytes_per_s=bw, bf16_flops=bf16, int8_ops=int8, mxu=mxu,
                sublanes=8, lanes=128, topology=topology, device_kind=device_kind, jax_chip_version=version,
                sources=base)


def _gpu(name, description, *, bw, bf16, smem, hbm, source) -> Chip:
    fields = ("hbm_bytes_per_s", "bf16_flops", "shared_mem_per_block", "hbm_bytes")
    return Chip(name, "gpu", description, hbm_bytes=hbm, hbm_bytes_per_s=bw, bf16_flops=bf16,
                shared_mem_per_block=smem, sources={f: source for f in fields})


CHIPS: tuple[Chip, ...] = (
    Chip("cpu", "local", "this machine's CPU through jax's CPU backend (Pallas kernels interpreted)"),
    Chip("gpu", "local", "the local GPU through jax's CUDA backend, when jax sees one"),
    _tpu("tpu-v4", "TPU v4 (megacore: 2 TensorCores act as one device)", aliases=("v4",), cores=2,
         vmem=16 * MiB, scoped=16 * MiB, hbm=34_400_000_000, bw=1.23e12, bf16=275e12, int8=None, mxu=128,
         topology="v4:2x2x1", device_kind="TPU v4", version="v4",
         sources={"int8_ops": "not given by jax tpu_info"}),
    _tpu("tpu-v5e", "TPU v5e (v5 lite)", aliases=("v5e", "v5litepod"), cores=1,
         vmem=128 * MiB, scoped=16 * MiB, hbm=17_200_000_000, bw=0.82e12, bf16=197e12, int8=394e12, mxu=128,
         topology="v5e:2x2", device_kind="TPU v5 lite", version="v5e"),
    _tpu("tpu-v5p", "TPU v5p (megacore)", aliases=("v5p",), cores=2,
         vmem=64 * MiB, scoped=16 * MiB, hbm=103_000_000_000, bw=2.46e12, bf16=459e12, int8=918e12, mxu=128,
         topology="v5p:2x2x1", device_kind="TPU v5", version="v5p",
         sources={"hbm_bytes_per_s": TPU_INFO + "; the Cloud TPU page says 2765 GB/s"}),
    _tpu("tpu-v6e", "TPU v6e (Trillium)", aliases=("v6e", "trillium"), cores=1,
         vmem=128 * MiB, scoped=32 * MiB, hbm=34_400_000_000, bw=1.64e12, bf16=920e12, int8=1840e12, mxu=256,
         topology="v6e:2x2", device_kind="TPU v6 lite", version="v6e"),
    _tpu("tpu-7x", "TPU7x (Ironwood, 2 TensorCores)", aliases=("ironwood", "tpu7x", "v7x"), cores=2,
         vmem=64 * MiB, scoped=32 * MiB, hbm=206_000_000_000, bw=7.4e12, bf16=2310e12, int8=None, mxu=256,
         topology="tpu7x:2x2x1", device_kind="TPU7x", version="7x",
         sources={"int8_ops": "not given by jax tpu_info (no int8 MXU mode)"}),
    _gpu("a100", "NVIDIA A100 80GB SXM (spec only)", bw=2.039e12, bf16=312e12, smem=166_912, hbm=80 * GiB,
         source="NVIDIA A100 datasheet; CUDA C guide (163 KiB opt-in shared memory)"),
    _gpu("h100", "NVIDIA H100 SXM (spec only)", bw=3.35e12, bf16=989e12, smem=232_448, hbm=80 * GiB,
         source="NVIDIA H100 datasheet (dense bf16); CUDA C guide (227 KiB opt-in shared memory)"),
    _gpu("h200", "NVIDIA H200 SXM (spec only)", bw=4.8e12, bf16=989e12, smem=232_448, hbm=141 * GiB,
         source="NVIDIA H200 datasheet (dense bf16); CUDA C guide (227 KiB opt-in shared memory)"),
    _gpu("b200", "NVIDIA B200 (spec only)", bw=8.0e12, bf16=2250e12, smem=232_448, hbm=180 * GiB,
         source="NVIDIA Blackwell datasheet (dense bf16); CUDA C guide (227 KiB opt-in shared memory)"),
)

_BY_NAME = {alias: chip for chip in CHIPS for alias in (chip.name, *chip.aliases)}


def get_chip(name: str) -> Chip:
    chip = _BY_NAME.get(name.strip().lower())
    if chip is None:
        raise UsageError(f"unknown target {name!r}: use one of {', '.join(c.name for c in CHIPS)} (see `inspector chips`)")
    return chip


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
