//! The empty functions that keep V8's inlining budget (`tests/wat/inlining.rs`) survive
//! wasm-bindgen, whose GC (walrus's) removes every function that nothing reaches: the
//! instrumenter names them in a declarative element segment, which that GC keeps.

use super::*;
use common::small_bodies;

/// Six functions of bodies under 50 bytes and the export that calls them: a share of small
/// bodies V8 gives its highest inlining budget, which the probes take the six out of.
const SMALL: &str = r#"
(module
  (memory (export "memory") 1)
  (func $mix (param i32) (param i32) (result i32)
    (i32.add (i32.rotl (i32.add (i32.mul (local.get 0) (i32.const 3))
                                (i32.xor (local.get 0) (local.get 1)))
                       (i32.const 5))
             (i32.const 7654321)))
  (func $a (param i32) (result i32) (call $mix (local.get 0) (i32.const 1234567)))
  (func $b (param i32) (result i32) (call $mix (local.get 0) (i32.const 2345678)))
  (func $c (param i32) (result i32) (call $mix (local.get 0) (i32.const 3456789)))
  (func $d (param i32) (result i32) (call $mix (local.get 0) (i32.const 4567890)))
  (func $e (param i32) (result i32) (call $mix (local.get 0) (i32.const 5678901)))
  (func (export "run") (param i32) (result i32)
    (call $e (call $d (call $c (call $b (call $a (local.get 0))))))))
"#;

/// `wasm-bindgen`, installed beside the runner (`cargo install wasm-bindgen-cli` installs
/// both).
fn wasm_bindgen() -> PathBuf {
    let runner = which::which_in(RUNNER, Some(path_with_runner()), ".").unwrap();
    let dir = std::fs::canonicalize(runner).unwrap();
    dir.parent().unwrap().join("wasm-bindgen")
}

#[test]
fn the_functions_for_v8s_inlining_budget_survive_wasm_bindgen() {
    if !ready() {
        return;
    }
    let wasm = wat::parse_str(SMALL).unwrap();
    let (small, defined) = small_bodies(&wasm);
    assert!(defined == 7 && 2 * small >= defined, "{small} of {defined}");
    let options = Options::default().for_wasm_bindgen();
    let instrumented = instrument::instrument(&wasm, &options).unwrap().wasm;
    validate(&instrumented);
    let without = Options {
        inlining_budget: false,
        ..options
    };
    let bare = small_bodies(&instrument::instrument(&wasm, &without).unwrap().wasm);
    let kept = small_bodies(&instrumented);
    assert!(
        kept.1 > bare.1 && 2 * kept.0 >= kept.1,
        "fillers added: {kept:?}, {bare:?} without them"
    );

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("small.wasm");
    std::fs::write(&input, &instrumented).unwrap();
    let out = output(
        Command::new(wasm_bindgen())
            .args(["--target", "nodejs", "--out-dir"])
            .arg(dir.path().join("out"))
            .arg(&input),
    );
    assert!(out.status.success(), "{out:?}");
    let bound = std::fs::read(dir.path().join("out/small_bg.wasm")).unwrap();
    validate(&bound);
    // bindgen has nothing of its own to add to a module without bindings, and removes none
    // of the fillers.
    assert_eq!(small_bodies(&bound), kept);
}
