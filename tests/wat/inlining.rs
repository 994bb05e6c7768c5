//! A module for V8 keeps the inlining budget of the program's own module. V8 scales the
//! budget by the module's share of function bodies under 50 bytes (the lowest at 25% or
//! less, the highest at 50% or more); the probes make the bodies larger, so the
//! instrumented module gets empty functions that nothing calls, as many as that share needs.

use super::*;
use cargo_wasmprof::instrument::instrument;
use cargo_wasmprof::meta;
use common::{small_bodies, validate};

#[test]
fn a_module_for_v8_keeps_half_its_bodies_small_with_functions_nothing_calls() {
    let wasm = wat::parse_str(PROGRAM).unwrap();
    // Nine functions, most of them small: V8's highest budget.
    let (small, defined) = small_bodies(&wasm);
    assert!(defined == 9 && 2 * small >= defined, "{small} of {defined}");
    for metric in [
        Metric::Time,
        Metric::Calls,
        Metric::Instructions,
        Metric::ExactTime,
    ] {
        let options = Options {
            metric,
            ..Options::default().for_js_host()
        };
        let done = instrument(&wasm, &options).unwrap();
        let without = Options {
            inlining_budget: false,
            ..options.clone()
        };
        let bare = instrument(&wasm, &without).unwrap().wasm;
        // The module, and the variant it carries for hosts that allow one memory.
        let variant = meta::custom_section(&done.wasm, meta::ONE_MEMORY_SECTION)
            .unwrap()
            .expect("the one-memory variant")
            .to_vec();
        let bare_variant = meta::custom_section(&bare, meta::ONE_MEMORY_SECTION)
            .unwrap()
            .unwrap()
            .to_vec();
        for (kept, bare) in [(&done.wasm, &bare), (&variant, &bare_variant)] {
            validate(kept);
            let (small, defined) = small_bodies(kept);
            let (bare_small, bare_defined) = small_bodies(bare);
            // The context tree's probes (of the metrics that keep it) make every body of
            // the program larger than 50 bytes.
            assert!(
                !options.keeps_contexts() || 2 * bare_small < bare_defined,
                "{metric:?}: {bare_small} of {bare_defined} small without the fillers"
            );
            if 2 * bare_small >= bare_defined {
                assert_eq!((small, defined), (bare_small, bare_defined), "{metric:?}");
                continue;
            }
            assert!(
                2 * small >= defined && 2 * (small - 1) < defined - 1,
                "{metric:?}: a half, with no filler more than that takes ({small} of {defined})"
            );
            assert_eq!(
                defined - bare_defined,
                small - bare_small,
                "{metric:?}: every function added is small"
            );
        }
        // They are none of the program's functions.
        assert_eq!(done.meta.functions.len(), 2 + 9, "{metric:?}");
        // A module instrumented in place without them is instrumented again.
        assert!(options.produced(&done.meta) && !without.produced(&done.meta));
    }
}

#[test]
fn a_module_of_large_bodies_gets_no_functions_for_v8() {
    // Three functions of 60 `nop`s each (bodies of 62 bytes) and a small `_start`: a share
    // of 25%, V8's lowest budget with or without the probes.
    let nops = "nop ".repeat(60);
    let wat = format!(
        r#"(module
          (func $a {nops}) (func $b {nops}) (func $c {nops})
          (func (export "_start") (call $a) (call $b) (call $c)))"#
    );
    let wasm = wat::parse_str(&wat).unwrap();
    assert_eq!(small_bodies(&wasm), (1, 4));
    let options = Options::default().for_js_host();
    let kept = instrument(&wasm, &options).unwrap().wasm;
    let without = Options {
        inlining_budget: false,
        ..options
    };
    let bare = instrument(&wasm, &without).unwrap().wasm;
    validate(&kept);
    assert_eq!(small_bodies(&kept), small_bodies(&bare));
}
