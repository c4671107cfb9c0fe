//! What an online predictor can reach on the `pagoda` workload: every variable's
//! record count is drawn at random (16–48) and nothing in the stream announces it, so
//! a predictor that follows each variable perfectly still prefetches past its end.
//! For prefetching `d` records ahead, and for a predictor that stops after the `t`-th
//! record of a variable (betting on the shortest variables seen), this prints the
//! byte accuracy and coverage an online predictor cannot exceed on this stream.
//!
//! ```text
//! cargo run --release -p patio-prefetch --example pagoda_bound [REQUESTS] [SEED]   # default: 1000 and the seed of `patio bench prefetch`
//! ```

use patio_prefetch::workloads;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let n = args.first().copied().unwrap_or(1000) as usize;
    // The seed of `patio bench prefetch`.
    let seed = args.get(1).copied().unwrap_or(0x7061_7469_6f5f_6265);
    let w = workloads::generate("pagoda", n, seed).expect("pagoda");
    // Variables: runs of one record length.
    let mut vars: Vec<(u64, u64)> = Vec::new(); // (records, record length)
    for &(_, len) in &w.requests {
        match vars.last_mut() {
            Some((count, l)) if *l == len => *count += 1,
            _ => vars.push((1, len)),
        }
    }
    let read: u64 = w.requests.iter().map(|r| r.1).sum();
    let counts: Vec<u64> = vars.iter().map(|v| v.0).collect();
    println!(
        "pagoda, {n} requests, seed {seed}: {} variables, records per variable {counts:?}",
        vars.len()
    );
    println!("(the last variable is cut off by the end of the run)");
    println!("| policy | accuracy ≤ | coverage ≤ |");
    println!("|---|---|---|");
    // The first record of each variable cannot be predicted (new record length, new
    // region); every later one can. Prefetching d ahead wastes min(d, …) records per
    // variable end that the run reaches.
    for d in [1u64, 2, 3, 4] {
        let used: u64 = vars.iter().map(|&(c, l)| (c - 1) * l).sum();
        let wasted: u64 = vars[..vars.len() - 1].iter().map(|&(_, l)| d * l).sum();
        println!(
            "| {d} ahead to each variable's unknown end | {:.1} % | {:.1} % |",
            100.0 * used as f64 / (used + wasted) as f64,
            100.0 * used as f64 / read as f64
        );
    }
    // Stop after the t-th record of a variable: records 2..=t are prefetched (1 ahead),
    // the prefetch of record t+1 is issued only if t+1 <= t, i.e. never past t.
    for t in [16u64, 18, 20, 22, 24, 32, 48] {
        let (mut used, mut wasted) = (0u64, 0u64);
        for (i, &(c, l)) in vars.iter().enumerate() {
            let last = i + 1 == vars.len();
            used += (c.min(t) - 1) * l;
            if c < t && !last {
                wasted += l;
            }
        }
        println!(
            "| 1 ahead, never past record {t} of a variable | {:.1} % | {:.1} % |",
            100.0 * used as f64 / (used + wasted) as f64,
            100.0 * used as f64 / read as f64
        );
    }
}
