//! The command line's value enums: each a clap [`ValueEnum`] that mirrors a plain enum of
//! a lower layer (their names and `--help` texts here), converted both ways, so that clap
//! stays in `cli` and the layers below take plain values.

use clap::ValueEnum;

use crate::build::Target;
use crate::diff::DiffFormat;
use crate::format::{Format, Weight};
use crate::meta::{Metric, Sampler, StateLocation};
use crate::profile::Grouping;
use crate::status::ColorChoice;

/// A clap value enum `$arg` for the plain enum `$plain`, variant for variant: its doc
/// comments are `--help`'s, its names the command line's.
macro_rules! value_enum {
    (
        $(#[$doc:meta])*
        $arg:ident for $plain:ident {
            $( $(#[$vattr:meta])* $variant:ident, )*
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
        pub enum $arg {
            $( $(#[$vattr])* $variant, )*
        }

        impl From<$arg> for $plain {
            fn from(value: $arg) -> $plain {
                match value {
                    $( $arg::$variant => $plain::$variant, )*
                }
            }
        }

        impl From<$plain> for $arg {
            fn from(value: $plain) -> $arg {
                match value {
                    $( $plain::$variant => $arg::$variant, )*
                }
            }
        }
    };
}

value_enum! {
    /// `--metric`.
    MetricArg for Metric {
        /// Calls and arcs only: no clock, no exit probes, no calling-context tree. The
        /// cheapest.
        Calls,
        /// Wall time, self and inclusive, per function, arc and calling context, estimated
        /// by sampling: the probes keep the exact counts, arcs and context tree and say
        /// which context runs; a sampler outside the program's thread credits each interval
        /// to it. No clock read per call, and the probes' own time is left out of the
        /// figures.
        Time,
        /// Wall time read from a clock at every entry and exit: every call timed, the
        /// probes' cost (calibrated at start-up) subtracted.
        ExactTime,
        /// Executed wasm instructions, self and inclusive: the same on every run and
        /// machine.
        Instructions,
    }
}

value_enum! {
    /// `--state`.
    StateArg for StateLocation {
        /// A memory of its own inside the instrumented module: the fastest, for hosts with
        /// multi-memory (wasmtime, current browsers).
        OwnMemory,
        /// A small second module, carried in the instrumented module's `wasmprof.state`
        /// section, that owns the memory and the probes; the instrumented module imports
        /// them. For hosts that allow one memory per module (node 20).
        StateModule,
    }
}

value_enum! {
    /// `--sampler`.
    SamplerArg for Sampler {
        /// Interrupt the program's threads and walk their stacks: each sample is where the
        /// code was, the probes' own code left out by its address (the embedded wasmtime on
        /// Linux).
        Stacks,
        /// A sampler beside the program reads which calling context the probes say runs
        /// (any host, a host of your own that shares the profiler's memory too).
        Word,
        /// V8's own sampler, which the JS runtime starts under node: which function runs,
        /// not where in it (JS hosts take it unless the module keeps its calling contexts).
        V8,
    }
}

value_enum! {
    /// `--format`.
    FormatArg for Format {
        /// The gprof-style report: flat profile, call graph, tests by cost.
        Text,
        /// The profile itself, as cargo-wasmprof reads it back.
        Json,
        /// gzipped profile.proto, for `go tool pprof` and speedscope.
        Pprof,
        /// A callgrind.out file, for KCachegrind, QCachegrind and callgrind_annotate.
        Callgrind,
        /// Folded stacks (`a;b;c value`), for flamegraph tools.
        Folded,
        /// An SVG flame graph (`--icicle` hangs it from the top).
        Flamegraph,
        /// speedscope's JSON file format.
        Speedscope,
        /// The Firefox Profiler's processed format, for profiler.firefox.com.
        Firefox,
        /// A .cpuprofile (time profiles), for Chrome DevTools, VS Code and speedscope.
        Cpuprofile,
        /// One self-contained HTML page: flat profile, flame graph, call graph, search.
        Html,
    }
}

value_enum! {
    /// `diff --format`.
    DiffFormatArg for DiffFormat {
        /// A table for a terminal.
        Text,
        /// The comparison as JSON, for scripts.
        Json,
        /// A Markdown table, largest regression first, for a pull request's comment or a
        /// CI job's summary.
        Markdown,
    }
}

value_enum! {
    /// `--weight`.
    WeightArg for Weight {
        /// Each context's self cost in the profile's metric.
        Cost,
        /// The bytes the allocations made in each context asked for.
        AllocBytes,
        /// The bytes of those still held at the end.
        HeldBytes,
    }
}

value_enum! {
    /// `--by`.
    GroupingArg for Grouping {
        /// Each function by itself.
        Function,
        /// The functions defined in one source file as one.
        File,
        /// The functions of one crate (a C library, an import module) as one.
        Crate,
    }
}

value_enum! {
    /// `--target`.
    TargetArg for Target {
        /// WASI preview 1: runs in the embedded wasmtime.
        #[value(name = "wasm32-wasip1")]
        Wasip1,
        /// WASI preview 1 with wasi-threads (std::thread, rayon): runs in the embedded
        /// wasmtime, each thread in an instance of its own.
        #[value(name = "wasm32-wasip1-threads")]
        Wasip1Threads,
        /// WASI 0.2 (and 0.3): the binaries are components, run in the embedded wasmtime.
        #[value(name = "wasm32-wasip2")]
        Wasip2,
        /// Emscripten: linked through wasmprof-emcc, run under node.
        #[value(name = "wasm32-unknown-emscripten")]
        Emscripten,
        /// wasm-bindgen crates: their wasm-bindgen-test binaries run by
        /// `wasm-bindgen-test-runner` under node.
        #[value(name = "wasm32-unknown-unknown")]
        Unknown,
    }
}

impl Default for TargetArg {
    fn default() -> TargetArg {
        Target::default().into()
    }
}

value_enum! {
    /// `--color`.
    ColorArg for ColorChoice {
        /// Color when writing to a terminal and NO_COLOR is not set.
        Auto,
        /// Always color.
        Always,
        /// Never color.
        Never,
    }
}

/// The command line's name of `value` (what clap parses back into it).
pub fn name_of<T: ValueEnum>(value: T) -> String {
    value
        .to_possible_value()
        .expect("no value is hidden")
        .get_name()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_lines_names_are_the_plain_enums() {
        for metric in Metric::ALL {
            assert_eq!(name_of(MetricArg::from(metric)), metric.name());
            assert_eq!(Metric::from(MetricArg::from(metric)), metric);
        }
        for state in StateLocation::ALL {
            assert_eq!(name_of(StateArg::from(state)), state.name());
        }
        for sampler in [Sampler::Stacks, Sampler::Word, Sampler::V8] {
            assert_eq!(name_of(SamplerArg::from(sampler)), sampler.name());
        }
        for format in Format::ALL {
            assert_eq!(name_of(FormatArg::from(format)), format.name());
        }
        for target in Target::ALL {
            assert_eq!(name_of(TargetArg::from(target)), target.triple());
        }
    }
}
