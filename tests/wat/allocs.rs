//! The live table on a long run of allocations and frees in random order, with addresses
//! reused: every figure follows from the program's own random sequence, replayed here.

use super::*;
use cargo_wasmprof::profile::Allocs;

/// `churn` runs `STEPS` steps of a linear congruential generator: two steps in three
/// allocate 1 to 16 bytes (`malloc`, a slab of 16-byte slots that reuses freed ones, so
/// addresses come back), the third frees a live block picked at random. About a third of
/// the allocations stay live, far more than the live table starts with room for (49,152).
const CHURN: &str = r#"
(module
  (memory (export "memory") 256)
  ;; The slab's next new slot, from 4 MiB; freed slots on a stack at 64 KiB.
  (global $bump (mut i32) (i32.const 4194304))
  (global $freed (mut i32) (i32.const 0))

  (func $malloc (param $size i32) (result i32)
    (if (global.get $freed) (then
      (global.set $freed (i32.sub (global.get $freed) (i32.const 4)))
      (return (i32.load offset=65536 (global.get $freed)))))
    (global.set $bump (i32.add (global.get $bump) (i32.const 16)))
    (i32.sub (global.get $bump) (i32.const 16)))

  (func $free (param $p i32)
    (i32.store offset=65536 (global.get $freed) (local.get $p))
    (global.set $freed (i32.add (global.get $freed) (i32.const 4))))

  ;; The live blocks' addresses in an array at 2 MiB, n of them.
  (func $churn (param $steps i32) (local $x i32) (local $r i32) (local $n i32) (local $j i32)
    (local.set $x (i32.const 1))
    (loop $step
      (local.set $x (i32.add (i32.mul (local.get $x) (i32.const 1103515245)) (i32.const 12345)))
      (local.set $r (i32.shr_u (local.get $x) (i32.const 8)))
      (if (i32.or (i32.eqz (local.get $n)) (i32.rem_u (local.get $x) (i32.const 3)))
        (then
          (i32.store offset=2097152 (i32.shl (local.get $n) (i32.const 2))
            (call $malloc (i32.add (i32.rem_u (local.get $r) (i32.const 16)) (i32.const 1))))
          (local.set $n (i32.add (local.get $n) (i32.const 1))))
        (else
          (local.set $j (i32.rem_u (local.get $r) (local.get $n)))
          (call $free (i32.load offset=2097152 (i32.shl (local.get $j) (i32.const 2))))
          (local.set $n (i32.sub (local.get $n) (i32.const 1)))
          (i32.store offset=2097152 (i32.shl (local.get $j) (i32.const 2))
            (i32.load offset=2097152 (i32.shl (local.get $n) (i32.const 2))))))
      (local.set $steps (i32.sub (local.get $steps) (i32.const 1)))
      (br_if $step (local.get $steps))))

  (func (export "_start") (call $churn (i32.const 300000))))
"#;

/// The steps `churn` runs.
const STEPS: u32 = 300_000;

/// What `churn` allocates and frees, replayed: the totals, what is live at the end, and
/// the peak of live bytes.
fn replay() -> (Allocs, u64) {
    let (mut x, mut live, mut all) = (1u32, Vec::<u64>::new(), Allocs::default());
    let (mut bytes, mut peak) = (0u64, 0u64);
    for _ in 0..STEPS {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let r = x >> 8;
        if live.is_empty() || x % 3 != 0 {
            let size = u64::from(r % 16 + 1);
            live.push(size);
            (all.allocs, all.alloc_bytes) = (all.allocs + 1, all.alloc_bytes + size);
            bytes += size;
            peak = peak.max(bytes);
        } else {
            let size = live.swap_remove((r % live.len() as u32) as usize);
            (all.frees, all.freed_bytes) = (all.frees + 1, all.freed_bytes + size);
            bytes -= size;
        }
    }
    all.held = live.len() as u64;
    all.held_bytes = bytes;
    (all, peak)
}

#[test]
fn the_live_table_grows_and_follows_every_block() {
    let wasm = wat::parse_str(CHURN).unwrap();
    let (expected, peak) = replay();
    assert!(expected.held > 49_152, "{expected:?}");
    for state in [StateLocation::OwnMemory, StateLocation::StateModule] {
        let options = Options {
            metric: Metric::Instructions,
            state,
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
        let counted = Allocs {
            at_peak: 0,
            at_peak_bytes: 0,
            ..total
        };
        assert_eq!(counted, expected, "{state:?}");
        // The copy at the peak: taken within 1% or 64 KiB of it, never above.
        assert!(
            total.at_peak_bytes <= peak
                && (total.at_peak_bytes * 101 >= peak * 100
                    || total.at_peak_bytes + 64 * 1024 >= peak),
            "{state:?}: {total:?}, peak {peak}"
        );
    }
}
