//! The equations, one per mechanism, each free of any particular model or scenario. `step`
//! assembles them layer by layer; the tests here check each against a hand computation.

use super::hardware::Protocol;

/// Time of one kernel on the roofline: the larger of its compute time and its memory time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Roofline {
    pub compute_us: f64,
    pub memory_us: f64,
}

impl Roofline {
    /// `flops` at `flops_s` achieved FLOP/s; `bytes` through HBM at `bytes_s` achieved bytes/s.
    pub fn new(flops: f64, flops_s: f64, bytes: f64, bytes_s: f64) -> Roofline {
        Roofline {
            compute_us: 1e6 * flops / flops_s,
            memory_us: 1e6 * bytes / bytes_s,
        }
    }

    pub fn time_us(&self) -> f64 {
        self.compute_us.max(self.memory_us)
    }

    pub fn compute_bound(&self) -> bool {
        self.compute_us >= self.memory_us
    }
}

/// Fraction of the GPU a kernel of `ctas` independent blocks can keep busy: one block per SM at
/// most (a decode-attention kernel with fewer blocks than SMs leaves bandwidth unused; split-K
/// raises the block count).
pub fn occupancy(ctas: f64, sms: u32) -> f64 {
    (ctas / sms as f64).clamp(1.0 / sms as f64, 1.0)
}

/// All-reduce of `bytes` over `ranks` of one NVLink domain: the cheaper of a ring (NCCL's model,
/// tuning.cc: 2(n-1) steps, each moving bytes/n, one hop latency per step, in the best of the
/// three protocols) and a one-shot all-reduce (every rank writes its whole buffer to every peer
/// with LL-style flags and reduces locally: one hop, (n-1) x bytes on the wire), which is what
/// small decode messages use (TensorRT-LLM's custom all-reduce, NCCL's NVLS).
pub fn allreduce_us(bytes: f64, ranks: u32, link_bytes_s: f64, base_us: f64) -> f64 {
    if ranks <= 1 {
        return 0.0;
    }
    let n = ranks as f64;
    let steps = 2.0 * (n - 1.0);
    let ring = [Protocol::Simple, Protocol::Ll, Protocol::Ll128]
        .iter()
        .map(|p| {
            base_us
                + steps * p.nvlink_latency_us()
                + 1e6 * steps / n * bytes * p.wire_factor() / link_bytes_s
        })
        .fold(f64::INFINITY, f64::min);
    let one_shot = base_us
        + Protocol::Ll.nvlink_latency_us()
        + 1e6 * (n - 1.0) * bytes * Protocol::Ll.wire_factor() / link_bytes_s;
    ring.min(one_shot)
}

/// Where an AllToAll's bytes go: the share of peers inside the NVLink domain and beyond it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peers {
    pub nvlink_share: f64,
    pub network_share: f64,
}

impl Peers {
    /// `ep` ranks of which `domain` share an NVLink domain; bytes to oneself stay local.
    pub fn new(ep: u32, domain: u32) -> Peers {
        let n = ep as f64;
        let inside = (ep.min(domain) as f64 - 1.0).max(0.0);
        let outside = (ep as f64 - ep.min(domain) as f64).max(0.0);
        Peers {
            nvlink_share: inside / n,
            network_share: outside / n,
        }
    }
}

/// One AllToAll phase (dispatch or combine): every rank sends `payload` bytes spread over its
/// peers. NVLink and the network run in parallel; the phase costs a fixed start plus the
/// protocol's hop latency plus the slower link's wire time.
pub fn alltoall_us(
    payload: f64,
    peers: Peers,
    protocol: Protocol,
    nvlink_bytes_s: f64,
    network_bytes_s: f64,
    base_us: f64,
) -> f64 {
    if peers.nvlink_share + peers.network_share == 0.0 {
        return 0.0;
    }
    let wire = payload * protocol.wire_factor();
    let nvlink = 1e6 * wire * peers.nvlink_share / nvlink_bytes_s;
    let network = 1e6 * wire * peers.network_share / network_bytes_s;
    let latency = if peers.network_share > 0.0 {
        protocol.network_latency_us()
    } else {
        protocol.nvlink_latency_us()
    };
    base_us + latency + nvlink.max(network)
}

/// A point-to-point send of `bytes` (a pipeline stage handing its activations to the next):
/// a fixed start, one hop and the wire time.
pub fn p2p_us(bytes: f64, link_bytes_s: f64, latency_us: f64, base_us: f64) -> f64 {
    base_us + latency_us + 1e6 * bytes / link_bytes_s
}

/// The `q`-quantile of the wait in an M/D/1 queue (Poisson arrivals, a fixed service time of
/// `service_us`, utilization `rho` < 1), µs: the first-token wait in front of a prefill pool.
/// No wait with probability 1 - rho; past that, the Cramer-Lundberg tail of the M/G/1 wait,
/// P(W > t) ~ C e^(-theta t), where x = theta D solves rho (e^x - 1) = x and
/// C = (1 - rho) / (rho e^x - 1) (Asmussen, Applied Probability and Queues, XIII.5). The tail
/// form is exact as t grows and within a few percent of the exact distribution at the median.
pub fn md1_wait_quantile_us(rho: f64, service_us: f64, q: f64) -> f64 {
    if rho <= 0.0 || q <= 1.0 - rho {
        return 0.0;
    }
    let rho = rho.min(0.999);
    // rho (e^x - 1) - x is negative just above 0 and grows without bound: bisect for its root.
    let (mut lo, mut hi) = (1e-12f64, 1.0f64);
    while rho * (hi.exp() - 1.0) - hi < 0.0 {
        hi *= 2.0;
    }
    // 64 halvings of an interval of at most a few units: below f64's resolution.
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if rho * (mid.exp() - 1.0) - mid < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let x = 0.5 * (lo + hi);
    let c = (1.0 - rho) / (rho * x.exp() - 1.0);
    let theta = x / service_us;
    ((c / (1.0 - q)).ln() / theta).max(0.0)
}

/// Expected load of the busiest of `ranks` ranks when each receives on average `mean`
/// token-expert pairs at random (Poisson): mean + sqrt(2 ln(ranks) mean). Balanced routing
/// (EPLB) is what makes random a fair stand-in; real skew would only add to this.
pub fn busiest_rank_load(mean: f64, ranks: u32) -> f64 {
    if ranks <= 1 || mean <= 0.0 {
        return mean;
    }
    mean + (2.0 * (ranks as f64).ln() * mean).sqrt()
}

/// Experts of `experts` that receive at least one of `pairs` token-expert pairs spread at
/// random: only those read their weights.
pub fn experts_touched(experts: f64, pairs: f64) -> f64 {
    if experts <= 0.0 {
        return 0.0;
    }
    experts * (1.0 - (-pairs / experts).exp())
}

/// Launch cost of `kernels` dependent kernels. Replayed from a CUDA graph, the GPU idles `gap`
/// between kernels; launched one by one from the CPU, the step also cannot finish before the CPU
/// has issued every kernel. Returns the time the GPU spends not running kernels.
pub fn launch_us(kernels: f64, gap_us: f64, cpu_launch_us: Option<f64>, busy_us: f64) -> f64 {
    let gaps = kernels * gap_us;
    match cpu_launch_us {
        None => gaps,
        Some(cpu) => gaps.max(kernels * cpu - busy_us),
    }
}

/// Accepted tokens per step of a draft chain of `draft` tokens where each is accepted with
/// probability `accept` given the previous one was: 1 + a + ... + a^draft.
pub fn chain_acceptance(accept: f64, draft: u32) -> f64 {
    (0..=draft).map(|i| accept.powi(i as i32)).sum()
}

/// DeepSeek-R1's measured MTP acceptance lengths for 1..=5 draft tokens (TensorRT-LLM tech blog
/// 1, B200 min-latency table: 1.92, 2.58, 2.82, 2.99, 3.01); beyond 5 it stays at 3.01.
pub fn mtp_acceptance_deepseek(draft: u32) -> f64 {
    const AR: [f64; 6] = [1.0, 1.92, 2.58, 2.82, 2.99, 3.01];
    AR[(draft as usize).min(5)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    /// A 7168x7168 FP8 GEMV (one token) on 8 TB/s at 75%: 51.4 MB / 6 TB/s = 8.56 µs, memory bound.
    #[test]
    fn a_gemv_is_bandwidth_bound() {
        let bytes = 7168.0 * 7168.0;
        let r = Roofline::new(2.0 * bytes, 5e15 * 0.7, bytes, 8e12 * 0.75);
        assert!(!r.compute_bound());
        assert!(close(r.time_us(), 51.380224 / 6.0, 1e-9), "{}", r.time_us());
    }

    /// 4096 tokens through the same matrix: 421 GFLOP at 3.5 PF/s = 120 µs, compute bound.
    #[test]
    fn a_large_gemm_is_compute_bound() {
        let w = 7168.0 * 7168.0;
        let r = Roofline::new(2.0 * 4096.0 * w, 3.5e15, w + 2.0 * 4096.0 * 7168.0, 6e12);
        assert!(r.compute_bound());
        assert!(close(r.time_us(), 2.0 * 4096.0 * w / 3.5e9, 1e-12));
    }

    /// 1 MiB over LL128 to 7 NVLink peers of 8 at 900 GB/s: 7/8 of it leaves, times 128/120 on
    /// the wire: 1048576 * 0.875 * 1.0667 / 900e9 = 1.0874 µs, plus 1.9 µs hop and 5 µs start.
    #[test]
    fn an_alltoall_over_ll128_pays_8_flag_bytes_per_128() {
        let peers = Peers::new(8, 72);
        let t = alltoall_us(1048576.0, peers, Protocol::Ll128, 900e9, 50e9, 5.0);
        let wire = 1048576.0 * 0.875 * 128.0 / 120.0 / 900e9 * 1e6;
        assert!(close(t, 5.0 + 1.9 + wire, 1e-12), "{t}");
        // LL doubles the wire bytes but has the shortest hop; Simple the longest hop.
        let ll = alltoall_us(1048576.0, peers, Protocol::Ll, 900e9, 50e9, 5.0);
        let simple = alltoall_us(1048576.0, peers, Protocol::Simple, 900e9, 50e9, 5.0);
        assert!(close(
            ll,
            5.0 + 0.6 + 2.0 * 1048576.0 * 0.875 / 900e9 * 1e6,
            1e-12
        ));
        assert!(close(
            simple,
            5.0 + 3.4 + 1048576.0 * 0.875 / 900e9 * 1e6,
            1e-12
        ));
    }

    /// EP 32 on 8-GPU boxes: 7 peers over NVLink, 24 over the network; the network sets the time.
    #[test]
    fn an_alltoall_beyond_the_nvlink_domain_waits_for_the_network() {
        let peers = Peers::new(32, 8);
        assert!(close(peers.nvlink_share, 7.0 / 32.0, 1e-12));
        assert!(close(peers.network_share, 24.0 / 32.0, 1e-12));
        let t = alltoall_us(32e6, peers, Protocol::Simple, 160e9, 50e9, 0.0);
        assert!(close(t, 14.0 + 32e6 * 0.75 / 50e9 * 1e6, 1e-12));
        assert_eq!(
            alltoall_us(32e6, Peers::new(1, 8), Protocol::Simple, 1.0, 1.0, 9.0),
            0.0
        );
    }

    /// 1000 kernels: 3 µs gaps in a graph, 1 µs with PDL; launched from the CPU at 8 µs each
    /// with 2 ms of GPU work, the CPU is the bottleneck: 8 ms - 2 ms = 6 ms of idle GPU.
    #[test]
    fn launch_gaps_with_and_without_pdl_and_graphs() {
        assert_eq!(launch_us(1000.0, 3.0, None, 2000.0), 3000.0);
        assert_eq!(launch_us(1000.0, 1.0, None, 2000.0), 1000.0);
        assert_eq!(launch_us(1000.0, 3.0, Some(8.0), 2000.0), 6000.0);
        // With long kernels the CPU runs ahead and only the GPU gaps remain.
        assert_eq!(launch_us(1000.0, 3.0, Some(8.0), 20000.0), 3000.0);
    }

    #[test]
    fn ring_allreduce_of_a_large_message_moves_2_n_minus_1_over_n_bytes() {
        // 8 ranks, 1 GB, 100 GB/s: 14/8 GB on the wire -> 17.5 ms with Simple (the cheapest).
        let t = allreduce_us(1e9, 8, 100e9, 0.0);
        assert!(close(t, 14.0 * 3.4 + 17500.0, 1e-9), "{t}");
        // Small messages go one-shot: one LL hop, 7 copies of 2x the bytes.
        let small = allreduce_us(1024.0, 8, 100e9, 0.0);
        assert!(
            close(small, 0.6 + 1e6 * 7.0 * 2048.0 / 100e9, 1e-9),
            "{small}"
        );
        assert_eq!(allreduce_us(1e9, 1, 100e9, 5.0), 0.0);
    }

    #[test]
    fn expert_load_statistics() {
        assert_eq!(busiest_rank_load(100.0, 1), 100.0);
        let m = busiest_rank_load(100.0, 72);
        assert!(close(m, 100.0 + (2.0 * 72f64.ln() * 100.0).sqrt(), 1e-12));
        assert!(close(experts_touched(4.0, 1e6), 4.0, 1e-9));
        assert!(experts_touched(256.0, 1.0) < 1.0 + 1e-9);
    }

    /// The M/D/1 wait quantiles against a simulation of the queue (Lindley's recursion,
    /// W' = max(0, W + D - A), over 400,000 Poisson arrivals): p50 and p99 within 5% of
    /// the simulated ones, or within 1% of the service time where the wait is near 0.
    #[test]
    fn md1_wait_quantiles_match_a_simulated_queue() {
        use rand::{Rng, SeedableRng};
        let service = 100.0;
        for rho in [0.3, 0.6, 0.9] {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
            let mean_gap = service / rho;
            let (mut w, mut waits) = (0.0f64, Vec::with_capacity(400_000));
            for _ in 0..400_000 {
                waits.push(w);
                let gap = -mean_gap * (1.0 - rng.random::<f64>()).ln();
                w = (w + service - gap).max(0.0);
            }
            waits.sort_by(f64::total_cmp);
            for q in [0.5, 0.99] {
                let simulated = waits[(q * waits.len() as f64) as usize];
                let model = md1_wait_quantile_us(rho, service, q);
                assert!(
                    (model - simulated).abs() <= 0.05 * simulated + 0.01 * service,
                    "rho {rho}, q {q}: model {model:.1} vs simulated {simulated:.1}"
                );
            }
        }
        assert_eq!(md1_wait_quantile_us(0.0, service, 0.99), 0.0);
        assert_eq!(md1_wait_quantile_us(0.3, service, 0.5), 0.0);
    }

    #[test]
    fn draft_chains() {
        assert_eq!(chain_acceptance(0.5, 2), 1.75);
        assert_eq!(mtp_acceptance_deepseek(3), 2.82);
        assert_eq!(mtp_acceptance_deepseek(9), 3.01);
        assert_eq!(occupancy(74.0, 148), 0.5);
        assert_eq!(occupancy(1000.0, 148), 1.0);
    }
}
