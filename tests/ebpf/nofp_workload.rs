// nofp_workload.rs — the Rust workload of the unwinding tests, built by the test with
// rustc -C opt-level=2 -C force-frame-pointers=no:
//   main -> chain_a -> chain_b -> hot_leaf (burns CPU)
//
//   nofp_workload_rs SECONDS   (prints "ready", then "iterations N")
use std::hint::black_box;
use std::time::{Duration, Instant};

#[inline(never)]
fn hot_leaf(mut x: u64) -> u64 {
    for _ in 0..300_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) ^ (x >> 7);
    }
    black_box(x)
}

#[inline(never)]
fn chain_b(x: u64) -> u64 {
    let r = hot_leaf(black_box(x ^ 2));
    black_box(r).wrapping_add(2)
}

#[inline(never)]
fn chain_a(x: u64) -> u64 {
    let r = chain_b(black_box(x ^ 1));
    black_box(r).wrapping_add(1)
}

fn main() {
    let secs: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    println!("ready");
    let end = Instant::now() + Duration::from_secs(secs);
    let mut it: u64 = 0;
    let mut sink: u64 = 0;
    // the clock is read once per 64 rounds: its samples are few
    while it % 64 != 0 || Instant::now() < end {
        sink = sink.wrapping_add(chain_a(it));
        it += 1;
    }
    println!("iterations {} {}", it, sink & 1);
}
