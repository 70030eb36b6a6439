//! The hardware catalogue. Every number is from shared/calibration/public-figures.toml; the
//! comment on each says where that file found it.

use serde::{Deserialize, Serialize};

use super::precision::Precision;
use super::RackError;

/// One GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    pub name: &'static str,
    pub sms: u32,
    /// HBM the model may use, GB.
    pub hbm_gb: f64,
    pub hbm_tb_s: f64,
    /// Dense tensor-core rates, TFLOP/s.
    pub bf16_tflops: f64,
    pub fp8_tflops: f64,
    /// None where the GPU has no FP4 tensor cores (Hopper): FP4 weights then run at the FP8 rate.
    pub fp4_tflops: Option<f64>,
}

impl Gpu {
    /// Dense tensor-core rate in FLOP/s for GEMMs in `precision`.
    pub fn flops(&self, precision: Precision) -> f64 {
        1e12 * match precision {
            Precision::Bf16 => self.bf16_tflops,
            Precision::Fp8 => self.fp8_tflops,
            Precision::Fp4 => self.fp4_tflops.unwrap_or(self.fp8_tflops),
        }
    }

    pub fn hbm_bytes_s(&self) -> f64 {
        self.hbm_tb_s * 1e12
    }
}

/// A system: GPUs, the NVLink domain that joins them and the network beyond it.
#[derive(Debug, Clone, PartialEq)]
pub struct System {
    pub id: &'static str,
    pub name: &'static str,
    pub gpu: Gpu,
    /// GPUs in one box or rack (what "users per rack" counts).
    pub gpus: u32,
    /// GPUs that reach each other over NVLink.
    pub nvlink_domain: u32,
    /// NVLink bandwidth per GPU, one direction, GB/s.
    pub nvlink_gb_s: f64,
    /// Scale-out (InfiniBand / ConnectX-7) per GPU, one direction, GB/s.
    pub scale_out_gb_s: f64,
}

impl System {
    pub const NAMES: &'static str = "gb200-nvl72, dgx-b200, hgx-h800, hgx-h200, hgx-h100";

    pub fn by_id(id: &str) -> Result<System, RackError> {
        SYSTEMS
            .iter()
            .map(|make| make())
            .find(|s| s.id == id)
            .ok_or_else(|| RackError::unknown("system", id, Self::NAMES))
    }
}

/// A scenario's what-if changes to its system's datasheet: any field left out keeps the
/// catalogue's value. `rack eval` echoes the fields that were set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_domain: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_gb_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_out_gb_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sms: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hbm_gb: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hbm_tb_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bf16_tflops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_tflops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp4_tflops: Option<f64>,
}

impl HardwareOverrides {
    /// Applies the overrides, each checked against a range wide enough for any what-if (ten
    /// times today's largest figure) and narrow enough to keep the model's arithmetic finite.
    pub fn apply(&self, system: &mut System) -> Result<(), RackError> {
        fn count(
            field: &'static str,
            v: Option<u32>,
            max: u32,
            into: &mut u32,
        ) -> Result<(), RackError> {
            if let Some(v) = v {
                if v == 0 || v > max {
                    return Err(RackError::Invalid {
                        field,
                        message: format!("must be between 1 and {max}, got {v}"),
                    });
                }
                *into = v;
            }
            Ok(())
        }
        fn rate(
            field: &'static str,
            v: Option<f64>,
            max: f64,
            into: &mut f64,
        ) -> Result<(), RackError> {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0 && v <= max) {
                    return Err(RackError::Invalid {
                        field,
                        message: format!("must be a positive number at most {max}, got {v}"),
                    });
                }
                *into = v;
            }
            Ok(())
        }
        count("hardware.gpus", self.gpus, 100_000, &mut system.gpus)?;
        count(
            "hardware.nvlink_domain",
            self.nvlink_domain,
            100_000,
            &mut system.nvlink_domain,
        )?;
        rate(
            "hardware.nvlink_gb_s",
            self.nvlink_gb_s,
            20_000.0,
            &mut system.nvlink_gb_s,
        )?;
        rate(
            "hardware.scale_out_gb_s",
            self.scale_out_gb_s,
            20_000.0,
            &mut system.scale_out_gb_s,
        )?;
        let gpu = &mut system.gpu;
        count("hardware.sms", self.sms, 10_000, &mut gpu.sms)?;
        rate("hardware.hbm_gb", self.hbm_gb, 10_000.0, &mut gpu.hbm_gb)?;
        rate("hardware.hbm_tb_s", self.hbm_tb_s, 100.0, &mut gpu.hbm_tb_s)?;
        rate(
            "hardware.bf16_tflops",
            self.bf16_tflops,
            100_000.0,
            &mut gpu.bf16_tflops,
        )?;
        rate(
            "hardware.fp8_tflops",
            self.fp8_tflops,
            200_000.0,
            &mut gpu.fp8_tflops,
        )?;
        let mut fp4 = gpu.fp4_tflops.unwrap_or(gpu.fp8_tflops);
        rate("hardware.fp4_tflops", self.fp4_tflops, 400_000.0, &mut fp4)?;
        if self.fp4_tflops.is_some() {
            gpu.fp4_tflops = Some(fp4);
        }
        Ok(())
    }

    /// The overridden fields and their values, for the output.
    pub fn echo(&self) -> std::collections::BTreeMap<&'static str, f64> {
        let counts = [
            ("gpus", self.gpus),
            ("nvlink_domain", self.nvlink_domain),
            ("sms", self.sms),
        ];
        let rates = [
            ("nvlink_gb_s", self.nvlink_gb_s),
            ("scale_out_gb_s", self.scale_out_gb_s),
            ("hbm_gb", self.hbm_gb),
            ("hbm_tb_s", self.hbm_tb_s),
            ("bf16_tflops", self.bf16_tflops),
            ("fp8_tflops", self.fp8_tflops),
            ("fp4_tflops", self.fp4_tflops),
        ];
        counts
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v as f64)))
            .chain(rates.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))))
            .collect()
    }
}

type Maker = fn() -> System;
const SYSTEMS: [Maker; 5] = [gb200_nvl72, dgx_b200, hgx_h800, hgx_h200, hgx_h100];

fn hopper(name: &'static str, hbm_gb: f64, hbm_tb_s: f64) -> Gpu {
    // H100/H200/H800 share the tensor rate: 989.4 BF16, 1978.9 FP8 dense (datasheets); 132 SMs.
    Gpu {
        name,
        sms: 132,
        hbm_gb,
        hbm_tb_s,
        bf16_tflops: 989.4,
        fp8_tflops: 1978.9,
        fp4_tflops: None,
    }
}

/// 72 GB200 GPUs in one NVLink domain: 10/5/2.5 PF dense FP4/FP8/BF16 per GPU (NVIDIA NVFP4
/// blog), 186 GB usable HBM (MLPerf system JSON) at 8 TB/s, NVLink 5 at 900 GB/s per direction,
/// a 400 Gbit/s ConnectX-7 (50 GB/s) per GPU. 148 SMs is unverified (code comments only).
fn gb200_nvl72() -> System {
    System {
        id: "gb200-nvl72",
        name: "GB200 NVL72",
        gpu: Gpu {
            name: "GB200",
            sms: 148,
            hbm_gb: 186.0,
            hbm_tb_s: 8.0,
            bf16_tflops: 2500.0,
            fp8_tflops: 5000.0,
            fp4_tflops: Some(10000.0),
        },
        gpus: 72,
        nvlink_domain: 72,
        nvlink_gb_s: 900.0,
        scale_out_gb_s: 50.0,
    }
}

/// 8 B200 (1000 W): 9/4.5/2.25 PF dense FP4/FP8/BF16, 180 GB at 8 TB/s (glennklockwood.com,
/// NVFP4 blog, MLPerf system JSON), NVLink 5 at 1.8 TB/s bidirectional.
fn dgx_b200() -> System {
    System {
        id: "dgx-b200",
        name: "DGX B200",
        gpu: Gpu {
            name: "B200",
            sms: 148,
            hbm_gb: 180.0,
            hbm_tb_s: 8.0,
            bf16_tflops: 2250.0,
            fp8_tflops: 4500.0,
            fp4_tflops: Some(9000.0),
        },
        gpus: 8,
        nvlink_domain: 8,
        nvlink_gb_s: 900.0,
        scale_out_gb_s: 50.0,
    }
}

/// H800: H100's compute and HBM with NVLink cut to 400 GB/s bidirectional; DeepSeek measures
/// 160 GB/s achieved (V3 TR s3.2.2) and 50 GB/s per GPU over IB.
fn hgx_h800() -> System {
    System {
        id: "hgx-h800",
        name: "HGX H800",
        gpu: hopper("H800", 80.0, 3.35),
        gpus: 8,
        nvlink_domain: 8,
        nvlink_gb_s: 200.0,
        scale_out_gb_s: 50.0,
    }
}

/// H200: 141 GB at 4.8 TB/s, NVLink 4 at 900 GB/s bidirectional (MLPerf v4.1 system JSON).
fn hgx_h200() -> System {
    System {
        id: "hgx-h200",
        name: "HGX H200",
        gpu: hopper("H200", 141.0, 4.8),
        gpus: 8,
        nvlink_domain: 8,
        nvlink_gb_s: 450.0,
        scale_out_gb_s: 50.0,
    }
}

/// H100 SXM: 80 GB at 3.35 TB/s, NVLink 4 at 900 GB/s bidirectional (datasheet).
fn hgx_h100() -> System {
    System {
        id: "hgx-h100",
        name: "HGX H100",
        gpu: hopper("H100", 80.0, 3.35),
        gpus: 8,
        nvlink_domain: 8,
        nvlink_gb_s: 450.0,
        scale_out_gb_s: 50.0,
    }
}

/// How collectives move bytes (NCCL issue #281, src/graph/tuning.cc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Data stores, a memory fence, then a flag store: full bandwidth, the highest latency.
    Simple,
    /// 8-byte stores carrying 4 data bytes and a 4-byte flag: half the bandwidth, lowest latency.
    Ll,
    /// 128-byte lines carrying 120 data bytes and an 8-byte flag.
    Ll128,
}

impl Protocol {
    /// Bytes on the wire per payload byte.
    pub fn wire_factor(self) -> f64 {
        match self {
            Protocol::Simple => 1.0,
            Protocol::Ll => 2.0,
            Protocol::Ll128 => 128.0 / 120.0,
        }
    }

    /// Hardware latency of one step over NVLink, µs (NCCL tuning.cc hwLat, NVLink ring:
    /// LL 0.6, LL128 1.9, Simple 3.4).
    pub fn nvlink_latency_us(self) -> f64 {
        match self {
            Protocol::Simple => 3.4,
            Protocol::Ll => 0.6,
            Protocol::Ll128 => 1.9,
        }
    }

    /// Hardware latency of one step over the network, µs (tuning.cc hwLat, net ring:
    /// LL 2.7, LL128 4.0, Simple 14.0).
    pub fn network_latency_us(self) -> f64 {
        match self {
            Protocol::Simple => 14.0,
            Protocol::Ll => 2.7,
            Protocol::Ll128 => 4.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_system_is_found_by_its_id() {
        for id in System::NAMES.split(", ") {
            assert_eq!(System::by_id(id).map(|s| s.id), Ok(id));
        }
        let err = System::by_id("tpu-v5").map(|s| s.id);
        assert!(matches!(err, Err(RackError::Unknown { .. })));
    }

    #[test]
    fn hopper_runs_fp4_at_the_fp8_rate() {
        let h = hgx_h100().gpu;
        assert_eq!(h.flops(Precision::Fp4), h.flops(Precision::Fp8));
        assert_eq!(gb200_nvl72().gpu.flops(Precision::Fp4), 1e16);
    }

    #[test]
    fn ll128_spends_8_of_every_128_bytes_on_flags() {
        assert!((Protocol::Ll128.wire_factor() * 120.0 - 128.0).abs() < 1e-12);
    }
}
