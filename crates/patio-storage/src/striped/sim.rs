//! The deterministic discrete-event simulator of a [`Striping`]: clients issue
//! requests one after another, their RPCs queue FIFO at the targets, and the report
//! says how long it all took in modelled seconds. Pure: no sleeping, no files.
//!
//! Semantics: every client issues its first request at time 0 and its next one when
//! the previous one completed. A request's extents become RPCs
//! ([`Striping::request_rpcs_into`]) that enter their targets' queues at the issue
//! time. A target serves one RPC at a time in arrival order (ties by client index),
//! for [`Striping::rpc_cost`] of the distance from the end of its previous RPC. A
//! request completes when its last RPC does, plus `request_latency`.
//!
//! Because a target's queue is FIFO and its service time depends only on the RPCs
//! before it, each RPC's completion is known when it arrives: the simulation pops
//! request issues from a binary heap in `(time, client)` order and books their RPCs
//! on the targets' clocks.

use super::{Piece, SeekClass, Striping, StripingError};
use crate::rng::Rng;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Number of RPCs per latency class.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeekCounts {
    pub seq: u64,
    pub near: u64,
    pub mid: u64,
    pub far: u64,
}

impl SeekCounts {
    fn add(&mut self, class: SeekClass) {
        match class {
            SeekClass::Seq => self.seq += 1,
            SeekClass::Near => self.near += 1,
            SeekClass::Mid => self.mid += 1,
            SeekClass::Far => self.far += 1,
        }
    }
}

/// What [`Striping::simulate`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimReport {
    /// Makespan: the completion of the last request of any client.
    pub seconds: f64,
    /// Completion of each client's last request (0 for a client without requests).
    pub client_seconds: Vec<f64>,
    /// RPCs served.
    pub rpcs: u64,
    /// Bytes transferred, after page or whole-RPC rounding.
    pub bytes: u64,
    /// Seconds each target spent serving RPCs.
    pub target_busy_seconds: Vec<f64>,
    /// RPCs each target served.
    pub target_rpcs: Vec<u64>,
    /// RPCs per latency class.
    pub seeks: SeekCounts,
}

/// A client's next request becomes due.
#[derive(Clone, Copy, Debug)]
struct Issue {
    time: f64,
    client: usize,
}

impl PartialEq for Issue {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Issue {}

impl PartialOrd for Issue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Issue {
    fn cmp(&self, other: &Self) -> Ordering {
        self.time
            .total_cmp(&other.time)
            .then(self.client.cmp(&other.client))
    }
}

/// A target's clock: when it is free again and where its head is.
#[derive(Clone, Copy, Default)]
struct Target {
    free_at: f64,
    head: u64,
}

impl Striping {
    /// Simulates `clients`, each an ordered list of requests, each request a list of
    /// file extents `(offset, len)` issued together. Refuses an invalid striping,
    /// extents ending past 2^64 and inputs of more than [`super::MAX_PIECES`] pieces.
    pub fn simulate<C, R>(&self, clients: &[C]) -> Result<SimReport, StripingError>
    where
        C: AsRef<[R]>,
        R: AsRef<[(u64, u64)]>,
    {
        self.validate()?;
        self.check_extents(
            clients
                .iter()
                .flat_map(|c| c.as_ref().iter().flat_map(|r| r.as_ref().iter())),
        )?;
        let mut report = SimReport {
            client_seconds: vec![0.0; clients.len()],
            target_busy_seconds: vec![0.0; self.targets],
            target_rpcs: vec![0; self.targets],
            ..SimReport::default()
        };
        let mut targets = vec![Target::default(); self.targets];
        let mut next = vec![0usize; clients.len()];
        let mut rng = Rng::new(self.seed);
        let mut rpcs: Vec<Piece> = Vec::new();
        let mut heap: BinaryHeap<Reverse<Issue>> = (0..clients.len())
            .filter(|&c| !clients[c].as_ref().is_empty())
            .map(|client| Reverse(Issue { time: 0.0, client }))
            .collect();
        while let Some(Reverse(Issue { time, client })) = heap.pop() {
            let requests = clients[client].as_ref();
            self.request_rpcs_into(requests[next[client]].as_ref(), &mut rpcs);
            next[client] += 1;
            let mut done = time;
            for rpc in &rpcs {
                let t = &mut targets[rpc.target];
                let distance = rpc.object_offset.abs_diff(t.head);
                let cost = self.rpc_cost(distance, rpc.len, &mut rng);
                t.free_at = t.free_at.max(time) + cost;
                t.head = rpc.end();
                done = done.max(t.free_at);
                report.target_busy_seconds[rpc.target] += cost;
                report.target_rpcs[rpc.target] += 1;
                report.seeks.add(self.seek_class(distance));
                report.rpcs += 1;
                report.bytes += rpc.len;
            }
            let done = done + self.request_latency;
            report.client_seconds[client] = done;
            report.seconds = report.seconds.max(done);
            if next[client] < requests.len() {
                heap.push(Reverse(Issue { time: done, client }));
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 target, 64 KiB stripes and RPCs, L = 0.5/1/2/4 s, and 65536 B/s so that one
    /// full RPC transfers in exactly 1 s.
    fn round() -> Striping {
        Striping {
            targets: 1,
            stripe_size: 65536,
            rpc_size: 65536,
            page_size: 4096,
            latency_seq: 0.5,
            latency_near: 1.0,
            latency_mid: 2.0,
            latency_far: 4.0,
            bandwidth: 65536.0,
            request_latency: 0.0,
            jitter: 0.0,
            seed: 1,
            whole_rpc: false,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn sequential_reads_cost_seq_latency_plus_transfer_per_rpc() {
        let s = round();
        // One client, three sequential requests of one RPC each, then one request of
        // two RPCs: 5 × (0.5 + 1).
        let client = vec![
            vec![(0u64, 65536u64)],
            vec![(65536, 65536)],
            vec![(131072, 65536)],
            vec![(196608, 131072)],
        ];
        let r = s.simulate(&[client]).unwrap();
        assert!(close(r.seconds, 7.5), "{r:?}");
        assert_eq!((r.rpcs, r.bytes), (5, 5 * 65536));
        assert_eq!(r.seeks.seq, 5);
        assert_eq!(r.target_rpcs, vec![5]);
        assert!(close(r.target_busy_seconds[0], 7.5));
        // Request latency is added once per request.
        let lat = Striping {
            request_latency: 0.25,
            ..round()
        };
        let r = lat
            .simulate(&[vec![vec![(0u64, 131072u64)], vec![]]])
            .unwrap();
        assert!(close(r.seconds, 3.0 + 0.5), "{r:?}");
    }

    #[test]
    fn two_clients_on_one_target_queue() {
        let s = round();
        // Client 0 reads [0, 64K), client 1 reads [64K, 128K), both at time 0: client 0
        // first (tie by index), seq; client 1 waits, then seq too.
        let clients = vec![vec![vec![(0u64, 65536u64)]], vec![vec![(65536, 65536)]]];
        let r = s.simulate(&clients).unwrap();
        assert!(close(r.client_seconds[0], 1.5));
        assert!(close(r.client_seconds[1], 3.0));
        assert!(close(r.seconds, 3.0));
        // Two targets: no queueing.
        let two = Striping {
            targets: 2,
            ..round()
        };
        let r = two.simulate(&clients).unwrap();
        // Client 1's RPC is at object offset 0 of target 1: seq.
        assert!(close(r.client_seconds[0], 1.5) && close(r.client_seconds[1], 1.5));
        assert_eq!(r.target_rpcs, vec![1, 1]);
    }

    #[test]
    fn far_and_near_seeks() {
        let s = round();
        // 4 KiB pages: each read is one page (4096 B, 1/16 s).
        let t = 4096.0 / 65536.0;
        let client = vec![
            vec![(0u64, 4096u64)],       // seq from head 0
            vec![(8192, 4096)],          // gap 4096: near
            vec![(8192 + 200_000, 100)], // gap > 64K, <= 640K: mid
            vec![(4096 * 2442, 4096)],   // far
            vec![(0, 1)],                // backwards, far
        ];
        let r = s.simulate(&[client]).unwrap();
        assert_eq!(
            r.seeks,
            SeekCounts {
                seq: 1,
                near: 1,
                mid: 1,
                far: 2
            }
        );
        assert!(
            close(r.seconds, 0.5 + 1.0 + 2.0 + 4.0 + 4.0 + 5.0 * t),
            "{r:?}"
        );
        assert_eq!(r.bytes, 5 * 4096);
    }

    #[test]
    fn whole_rpc_rounding_fetches_full_rpcs() {
        let s = Striping {
            whole_rpc: true,
            ..round()
        };
        let r = s
            .simulate(&[vec![vec![(10u64, 10u64), (70_000, 10)]]])
            .unwrap();
        // Two whole RPCs: [0, 64K) seq and [64K, 128K) seq.
        assert_eq!((r.rpcs, r.bytes), (2, 131072));
        assert!(close(r.seconds, 3.0));
        let pages = round()
            .simulate(&[vec![vec![(10u64, 10u64), (70_000, 10)]]])
            .unwrap();
        assert_eq!((pages.rpcs, pages.bytes), (2, 8192));
    }

    #[test]
    fn jitter_is_seeded_and_bounded() {
        let s = Striping {
            jitter: 0.2,
            ..round()
        };
        let clients = vec![vec![vec![(0u64, 65536u64)]; 20]; 3];
        let a = s.simulate(&clients).unwrap();
        assert_eq!(a, s.simulate(&clients).unwrap());
        let plain = round().simulate(&clients).unwrap();
        assert!(a.seconds >= 0.8 * plain.seconds && a.seconds <= 1.2 * plain.seconds);
        assert_ne!(a.seconds, plain.seconds);
    }

    #[test]
    fn refuses_bad_input() {
        let s = round();
        assert!(s.simulate(&[vec![vec![(u64::MAX, 2u64)]]]).is_err());
        assert!(s.simulate(&[vec![vec![(0u64, 1u64 << 60)]]]).is_err());
        let broken = Striping {
            targets: 0,
            ..round()
        };
        assert!(broken.simulate(&[vec![vec![(0u64, 1u64)]]]).is_err());
        let empty: Vec<Vec<Vec<(u64, u64)>>> = vec![vec![], vec![]];
        assert_eq!(s.simulate(&empty).unwrap().client_seconds, vec![0.0, 0.0]);
    }

    #[test]
    fn many_clients_and_extents_are_fast() {
        let s = Striping::lustre();
        // 64 clients × 100 requests × 160 strided extents ≈ 10^6 extents.
        let clients: Vec<Vec<Vec<(u64, u64)>>> = (0..64u64)
            .map(|c| {
                (0..100u64)
                    .map(|r| {
                        (0..160u64)
                            .map(|i| ((c * 100 + r) * 160 * 8192 + i * 8192, 4096))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let start = std::time::Instant::now();
        let r = s.simulate(&clients).unwrap();
        assert!(start.elapsed().as_secs_f64() < 3.0, "{:?}", start.elapsed());
        assert_eq!(r.bytes, 64 * 100 * 160 * 4096);
        assert_eq!(r.target_rpcs.iter().sum::<u64>(), r.rpcs);
    }
}
