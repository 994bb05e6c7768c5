//! `wasmprof-emcc`: Emscripten's emcc with the profiler added at the final link (see
//! [`cargo_wasmprof::emcc`]). A copy or link of it named `wasmprof-em++` works alike.

fn main() {
    cargo_wasmprof::emcc::main()
}
