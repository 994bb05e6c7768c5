//! The live table on a long run of allocations and frees in random order, with addresses
//! reused: every figure follows from the program's own random sequence, replayed here.

use super::*;
use cargo_wasmprof::profile::Allocs;

/// `churn` runs a phase of steps of a linear congruential generator: in each, with
/// probability `k` in 3, it allocates 1 to 16 bytes (`malloc`, a slab of 16-byte slots that
/// reuses freed ones, so addresses come back), else it frees a live block picked at random.
/// `_start` runs four phases: live blocks grow to about 100,000 (the live table, which
/// starts with room for 768, grows eight times), fall to a few thousand (long enough after the peak that
/// what the probes keep of it must do without what came since), grow past the first peak
/// (the table grows again), and fall again (long enough that the log of what came since the
/// last copy fills up, and the copy takes in what came before the peak).
const CHURN: &str = r#"
(module
  (memory (export "memory") 512)
  ;; The slab's next new slot, from 8 MiB; freed slots on a stack at 64 KiB.
  (global $bump (mut i32) (i32.const 8388608))
  (global $freed (mut i32) (i32.const 0))
  ;; The generator, and the live blocks' count (their addresses in an array at 4 MiB).
  (global $x (mut i32) (i32.const 1))
  (global $n (mut i32) (i32.const 0))

  (func $malloc (param $size i32) (result i32)
    (if (global.get $freed) (then
      (global.set $freed (i32.sub (global.get $freed) (i32.const 4)))
      (return (i32.load offset=65536 (global.get $freed)))))
    (global.set $bump (i32.add (global.get $bump) (i32.const 16)))
    (i32.sub (global.get $bump) (i32.const 16)))

  (func $free (param $p i32)
    (i32.store offset=65536 (global.get $freed) (local.get $p))
    (global.set $freed (i32.add (global.get $freed) (i32.const 4))))

  (func $churn (param $steps i32) (param $k i32) (local $r i32) (local $j i32)
    (loop $step
      (global.set $x (i32.add (i32.mul (global.get $x) (i32.const 1103515245)) (i32.const 12345)))
      (local.set $r (i32.shr_u (global.get $x) (i32.const 8)))
      (if (i32.or (i32.eqz (global.get $n))
                  (i32.lt_u (i32.rem_u (global.get $x) (i32.const 3)) (local.get $k)))
        (then
          (i32.store offset=4194304 (i32.shl (global.get $n) (i32.const 2))
            (call $malloc (i32.add (i32.rem_u (local.get $r) (i32.const 16)) (i32.const 1))))
          (global.set $n (i32.add (global.get $n) (i32.const 1))))
        (else
          (local.set $j (i32.rem_u (local.get $r) (global.get $n)))
          (call $free (i32.load offset=4194304 (i32.shl (local.get $j) (i32.const 2))))
          (global.set $n (i32.sub (global.get $n) (i32.const 1)))
          (i32.store offset=4194304 (i32.shl (local.get $j) (i32.const 2))
            (i32.load offset=4194304 (i32.shl (global.get $n) (i32.const 2))))))
      (local.set $steps (i32.sub (local.get $steps) (i32.const 1)))
      (br_if $step (local.get $steps))))

  (func (export "_start")
    (call $churn (i32.const 300000) (i32.const 2))
    (call $churn (i32.const 280000) (i32.const 1))
    (call $churn (i32.const 660000) (i32.const 2))
    (call $churn (i32.const 500000) (i32.const 1))))
"#;

/// `_start`'s phases: steps, and allocations in 3 steps.
const PHASES: [(u32, u32); 4] = [(300_000, 2), (280_000, 1), (660_000, 2), (500_000, 1)];

/// What `churn` allocates and frees, replayed: the totals with what is live at the end, and
/// the peak of live bytes with the blocks live then (the first moment it was reached).
fn replay() -> (Allocs, u64, u64) {
    let (mut x, mut live, mut all) = (1u32, Vec::<u64>::new(), Allocs::default());
    let (mut bytes, mut peak, mut at_peak) = (0u64, 0u64, 0u64);
    for (steps, k) in PHASES {
        for _ in 0..steps {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let r = x >> 8;
            if live.is_empty() || x % 3 < k {
                let size = u64::from(r % 16 + 1);
                live.push(size);
                (all.allocs, all.alloc_bytes) = (all.allocs + 1, all.alloc_bytes + size);
                bytes += size;
                if bytes > peak {
                    (peak, at_peak) = (bytes, live.len() as u64);
                }
            } else {
                let size = live.swap_remove((r % live.len() as u32) as usize);
                (all.frees, all.freed_bytes) = (all.frees + 1, all.freed_bytes + size);
                bytes -= size;
            }
        }
    }
    all.held = live.len() as u64;
    all.held_bytes = bytes;
    (all, peak, at_peak)
}

#[test]
fn the_live_table_grows_and_the_peak_is_exact() {
    let wasm = wat::parse_str(CHURN).unwrap();
    let (expected, peak, at_peak) = replay();
    // Past 3/4 of 2^18 slots, the table's size after the first phase: it grows again.
    assert!(at_peak > 196_608, "{expected:?}");
    for state in [StateLocation::OwnMemory, StateLocation::StateModule] {
        let options = Options {
            metric: Metric::Instructions,
            state,
            allocations: true,
            ..Options::default()
        };
        let (p, outcome) = profile_module_with(&wasm, &options);
        assert_eq!(outcome.exit_code, 0);
        check_invariants(&p);
        let summary = p.allocations.clone().expect("allocations recorded");
        assert_eq!(
            (summary.untracked, summary.unmatched_frees),
            (0, 0),
            "{state:?}"
        );
        assert_eq!(summary.peak_bytes, peak, "{state:?}");
        let total = p.total_allocs();
        assert_eq!(
            total,
            Allocs {
                at_peak,
                at_peak_bytes: peak,
                ..expected
            },
            "{state:?}"
        );
        assert_eq!(summary.at_peak_bytes, peak, "{state:?}");
    }
}

/// The regions the live table outgrew hold nothing but zeros at the end (so that a JS host's
/// dump leaves them out), though the growths that left them wrote only their written parts'
/// zeros: the first region, below the nodes, and every chunk but the table's own.
#[test]
fn outgrown_regions_are_left_empty() {
    use cargo_wasmprof::layout as l;
    let options = Options {
        metric: Metric::Instructions,
        allocations: true,
        ..Options::default()
    };
    let done = cargo_wasmprof::instrument::instrument(&wat::parse_str(CHURN).unwrap(), &options)
        .expect("instruments");
    common::validate(&done.wasm);
    let memory = run(&done.wasm).dump.expect("a dump").memory;
    let layout = &done.meta.layout;
    let u32_at = |at: u32| {
        let at = at as usize;
        u32::from_le_bytes(memory[at..at + 4].try_into().unwrap())
    };
    let zeros = |from: u32, to: u32| memory[from as usize..to as usize].iter().all(|&b| b == 0);
    let table = u32_at(l::HDR_LIVE_TABLE);
    assert_ne!(table, layout.live_off, "the table grew");
    assert!(zeros(layout.live_off, layout.nodes_off));
    let mut chunk = u32_at(l::HDR_CHUNKS);
    let mut outgrown = 0;
    while chunk != 0 {
        let head = layout.nodes_off + (chunk - 1) * layout.node_size;
        let end = head + u32_at(head + 4) * layout.node_size;
        if head + l::CHUNK_HEAD != table {
            assert!(zeros(head + l::CHUNK_HEAD, end), "the chunk at {head}");
            outgrown += 1;
        }
        chunk = u32_at(head);
    }
    assert!(outgrown >= 7, "{outgrown} chunks outgrown");
}
