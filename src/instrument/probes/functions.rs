//! The probes' out-of-line functions: the rare paths the inline probes call
//! (`dyn_arc`, `find_child`, `unwind_to`), and the state module's probes (`enter`, `exit`,
//! `count_call`), generated from the same code as the inline ones.

use walrus::ir::{BinaryOp, UnaryOp};
use walrus::{FunctionBuilder, FunctionId, GlobalId, InstrSeqBuilder, LocalId, Module, ValType};

use super::entry_exit::{ArcCounter, Reading, SampleWord, TimedOps};
use super::mem::Mem;
use super::tables::{count_dyn_arc, find_child, node_addr, push_is_direct};
use super::Func;
use crate::layout::{self, Layout};

/// `count_call(f: i32)`: the calls metric's entry probe, out of line.
pub(super) fn build_count_call(module: &mut Module, counter: &ArcCounter) -> FunctionId {
    let f = module.locals.add(ValType::I32);
    let locals = [
        module.locals.add(ValType::I32),
        module.locals.add(ValType::I32),
    ];
    let mut builder = FunctionBuilder::new(&mut module.types, &[ValType::I32], &[]);
    builder.name("__wasmprof_count_call".into());
    counter.count_arc(&mut builder.func_body(), Func::Local(f), locals);
    builder.finish(vec![f], &mut module.funcs)
}

/// The parameters of `exit`: parent, node, t0.
pub(super) const EXIT_PARAMS: [ValType; 3] = [ValType::I32, ValType::I32, ValType::I64];

/// The function ids whose code runs in the host: the imports (the first `imports` ids) and
/// the defined functions that become imports after the instrumenter (`shims`:
/// wasm-bindgen's generic-import shims, which its bindgen step replaces by JS functions).
/// Each has a thunk, so an entry from the host while one runs is its arc.
#[derive(Clone, Debug, Default)]
pub struct HostFunctions {
    /// How many imports there are: function ids below it are imports.
    pub imports: u32,
    /// The shims' function ids.
    pub shims: Vec<u32>,
}

impl HostFunctions {
    /// Pushes whether the function id in `func` is one of them (a comparison per shim: the
    /// walk that asks runs only on entries from the host).
    fn push_is_host(&self, b: &mut InstrSeqBuilder, func: LocalId) {
        b.local_get(func)
            .i32_const(self.imports as i32)
            .binop(BinaryOp::I32LtU);
        for &shim in &self.shims {
            b.local_get(func)
                .i32_const(shim as i32)
                .binop(BinaryOp::I32Eq)
                .binop(BinaryOp::I32Or);
        }
    }
}

/// How `dyn_arc` tells which import was running when the host called into the module.
#[derive(Clone)]
pub(super) enum HostEntry {
    /// The calls metric: the thunks keep the innermost running import's id + 1 in `active`.
    Active(GlobalId),
    /// A cost metric: the innermost node of a host function on the current path of the
    /// context tree. Activations above it that an unwinding left open are closed first
    /// (`unwind_to`).
    Tree {
        cur: GlobalId,
        unwind_to: FunctionId,
        host: HostFunctions,
    },
}

/// `dyn_arc(site: i32, f: i32)`: counts an arc from an indirect site or the host. An entry
/// from the host while an import runs is the import's arc (site [`layout::IMPORT_ENTRY`] |
/// the import's id); with the calls metric (where direct calls are counted at their sites
/// alone), the call is counted in f's counter too, so that it stays exact when the arc
/// table is full.
pub(super) fn build_dyn_arc(
    module: &mut Module,
    layout: &Layout,
    mem: &Mem,
    host_entry: &HostEntry,
) -> FunctionId {
    let s = module.locals.add(ValType::I32);
    let f = module.locals.add(ValType::I32);
    let slot = module.locals.add(ValType::I32);
    let start = module.locals.add(ValType::I32);
    let mut builder = FunctionBuilder::new(&mut module.types, &[ValType::I32, ValType::I32], &[]);
    builder.name("__wasmprof_dyn_arc".into());
    let mut b = builder.func_body();
    b.local_get(s).unop(UnaryOp::I32Eqz);
    b.if_else(
        None,
        |from_host| match host_entry {
            &HostEntry::Active(active) => {
                from_host.global_get(active).local_tee(slot);
                from_host.if_else(
                    None,
                    |import| {
                        import.local_get(slot).i32_const(1).binop(BinaryOp::I32Sub);
                        import_entry(import, s);
                    },
                    |_| {},
                );
            }
            HostEntry::Tree {
                cur,
                unwind_to,
                host,
            } => innermost_import(
                from_host,
                layout,
                mem,
                (*cur, *unwind_to, host),
                s,
                [slot, start],
            ),
        },
        |_| {},
    );
    count_dyn_arc(&mut b, layout, mem, s, f, [slot, start]);
    if matches!(host_entry, HostEntry::Active(_)) {
        mem.add64_element(&mut b, layout.calls_off, f, slot, |b| {
            b.i64_const(1);
        });
    }
    builder.finish(vec![s, f], &mut module.funcs)
}

/// `s = <pushed import id> | IMPORT_ENTRY`.
fn import_entry(b: &mut InstrSeqBuilder, s: LocalId) {
    b.i32_const(layout::IMPORT_ENTRY as i32)
        .binop(BinaryOp::I32Or)
        .local_set(s);
}

/// For an entry from the host: walks up from the current node to the innermost node of an
/// import; when there is one, closes what an unwinding left open above it and sets `s` to
/// its import-entry site; when the walk reaches the root (no import runs), closes whatever
/// was left open. A fold node on the way (a full tree) ends the walk with nothing done:
/// its path is lost. Uses `n` and `func` as scratch.
fn innermost_import(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    (cur, unwind_to, host): (GlobalId, FunctionId, &HostFunctions),
    s: LocalId,
    [n, func]: [LocalId; 2],
) {
    let nodes = layout.nodes_off;
    let first_context = layout.first_context_node() as i32;
    b.global_get(cur).local_set(n);
    b.block(None, |done| {
        let done_id = done.id();
        done.block(None, |root| {
            let root_id = root.id();
            root.block(None, |found| {
                let found_id = found.id();
                found.loop_(None, |up| {
                    let up_id = up.id();
                    up.local_get(n).unop(UnaryOp::I32Eqz).br_if(root_id);
                    up.local_get(n)
                        .i32_const(first_context)
                        .binop(BinaryOp::I32LtU);
                    up.if_else(
                        None,
                        |fold| {
                            // Fold node f + 1: an import's, or a path that is lost.
                            fold.local_get(n).i32_const(1).binop(BinaryOp::I32Sub);
                            fold.local_set(func);
                            host.push_is_host(fold, func);
                            fold.br_if(found_id);
                            fold.br(done_id);
                        },
                        |_| {},
                    );
                    node_addr(up, layout, n);
                    mem.load32(up, nodes + layout::NODE_FUNC);
                    up.local_set(func);
                    host.push_is_host(up, func);
                    up.br_if(found_id);
                    node_addr(up, layout, n);
                    mem.load32(up, nodes + layout::NODE_PARENT);
                    up.local_set(n).br(up_id);
                });
            });
            // The import's node is `n`, its function `func`.
            root.global_get(cur).local_get(n).binop(BinaryOp::I32Ne);
            root.if_else(
                None,
                |unwound| {
                    unwound.local_get(n).call(unwind_to);
                },
                |_| {},
            );
            root.local_get(func);
            import_entry(root, s);
            root.br(done_id);
        });
        // No import runs: nothing of the module should be open.
        done.global_get(cur);
        done.if_else(
            None,
            |unwound| {
                unwound.i32_const(0).call(unwind_to);
            },
            |_| {},
        );
    });
}

/// `unwind_to(target: i32)`: closes the activations from the current node up to `target`
/// (excluded) at the clock's reading now, each from the reading its entry kept in its
/// node, and makes `target` current. An activation whose exit probe never ran (a longjmp
/// or a JS exception unwound it) so gets its cost up to the moment control came back. The
/// walk stops early at a fold node (a full tree), whose path is lost.
pub(super) fn build_unwind_to(
    module: &mut Module,
    (layout, mem, cur): (&Layout, &Mem, GlobalId),
    clock: Option<Reading>,
    sample: Option<SampleWord>,
) -> FunctionId {
    let target = module.locals.add(ValType::I32);
    let n = module.locals.add(ValType::I32);
    let addr = module.locals.add(ValType::I32);
    let now = module.locals.add(ValType::I64);
    let mut builder = FunctionBuilder::new(&mut module.types, &[ValType::I32], &[]);
    builder.name("__wasmprof_unwind_to".into());
    let mut b = builder.func_body();
    let nodes = layout.nodes_off;
    SampleWord::mark_probes(sample, &mut b);
    // Without a clock (sampled time) there is nothing to close: the sampler credited each
    // moment to the context that ran then.
    let Some(clock) = clock else {
        b.local_get(target).global_set(cur);
        SampleWord::mark_context(sample, &mut b, target);
        return builder.finish(vec![target], &mut module.funcs);
    };
    b.instr(clock.read()).local_set(now);
    b.global_get(cur).local_set(n);
    b.block(None, |done| {
        let done_id = done.id();
        done.loop_(None, |up| {
            let up_id = up.id();
            up.local_get(n)
                .local_get(target)
                .binop(BinaryOp::I32Eq)
                .br_if(done_id);
            up.local_get(n)
                .i32_const(layout.first_context_node() as i32)
                .binop(BinaryOp::I32LtU)
                .br_if(done_id);
            node_addr(up, layout, n);
            up.local_set(addr);
            mem.add64(up, addr, nodes + layout::NODE_INCL, |b| {
                b.local_get(now).local_get(addr);
                mem.load64(b, nodes + layout::NODE_T0);
                b.binop(BinaryOp::I64Sub);
            });
            up.local_get(addr);
            mem.load32(up, nodes + layout::NODE_PARENT);
            up.local_set(n).br(up_id);
        });
    });
    b.local_get(target).global_set(cur);
    SampleWord::mark_context(sample, &mut b, target);
    builder.finish(vec![target], &mut module.funcs)
}

/// The entry probe's functions: `enter`, the global where it leaves the node it entered
/// from, and, where small leaves have their own inline entry, the function their stubs call.
pub(super) struct EnterFunctions {
    /// `enter(f: i32) -> i64`.
    pub(super) enter: FunctionId,
    /// The node the last entry entered from.
    pub(super) parent: GlobalId,
    /// `enter_from_stub(f: i32) -> i64`, when asked for.
    pub(super) enter_from_stub: Option<FunctionId>,
}

/// `enter(f: i32) -> i64`, the entry probe as a function (the state module's, and the
/// larger functions' on an own memory): [`TimedOps::enter`] for a function id in a
/// parameter, then the clock's reading, kept in the node and returned. The activation's
/// node is current then, and the node it entered from is left in the global returned beside
/// the function. With `leaves`, also `enter_from_stub`, `enter` for a leaf's
/// [`super::Reentry`] stub: the leaf's inline probe has marked the probes' time and looked
/// in the first child and the site's slot already, so it does neither again.
///
/// Its code is shared, so it can look in the call site's slot before the parent's first
/// child, which finds the callees of a function that calls several in turn. It calls
/// nothing on its common path (a direct site whose child is in the slot or first): the
/// rest, an entry from elsewhere or a child to look for, is a call in tail position of
/// `enter_other` or `enter_miss`, so that no value lives across a call and the function
/// saves no register (on fib through `enter`, about a nanosecond of a call's 10).
pub(super) fn build_enter(
    module: &mut Module,
    ops: &TimedOps,
    clock: Option<Reading>,
    leaves: bool,
) -> EnterFunctions {
    let zero = walrus::ConstExpr::Value(walrus::ir::Value::I32(0));
    let parent_global = module.globals.add_local(ValType::I32, true, false, zero);
    let entry = Entry {
        ops,
        clock,
        parent_global,
    };
    let miss = entry.build_miss(module);
    let other = entry.build_other(module, miss);
    EnterFunctions {
        enter: entry.build_enter(module, [miss, other], false),
        parent: parent_global,
        enter_from_stub: leaves.then(|| entry.build_enter(module, [miss, other], true)),
    }
}

/// What `enter` and its rare paths share.
struct Entry<'a> {
    ops: &'a TimedOps,
    clock: Option<Reading>,
    parent_global: GlobalId,
}

impl Entry<'_> {
    /// `enter`, or, `for_leaf`, `enter_from_stub` (see [`build_enter`]), which go on in
    /// `miss` and `other`.
    fn build_enter(
        &self,
        module: &mut Module,
        [miss, other]: [FunctionId; 2],
        for_leaf: bool,
    ) -> FunctionId {
        let ops = self.ops;
        let [f, s, parent, node, addr] = [(); 5].map(|()| module.locals.add(ValType::I32));
        let t0 = module.locals.add(ValType::I64);
        let mut builder = FunctionBuilder::new(&mut module.types, &[ValType::I32], &[ValType::I64]);
        let name = if for_leaf {
            "__wasmprof_enter_from_stub"
        } else {
            "__wasmprof_enter"
        };
        builder.name(name.into());
        let mut b = builder.func_body();
        if !for_leaf {
            ops.mark_probes(&mut b);
        }
        ops.counter.take_site(&mut b, s);
        b.local_get(s);
        push_is_direct(&mut b);
        b.if_else(
            None,
            |_| {},
            |other_entry| {
                other_entry.local_get(f).local_get(s).call(other).return_();
            },
        );
        if !ops.counter.at_sites {
            ops.counter.count_direct(&mut b, [s, addr]);
        }
        b.global_get(ops.cur).local_set(parent);
        if for_leaf {
            b.local_get(f).local_get(s).local_get(parent).call(miss);
            return builder.finish(vec![f], &mut module.funcs);
        }
        b.block(None, |found| {
            let found_id = found.id();
            ops.site_child(found, Func::Local(f), [parent, s, node], found_id);
            ops.first_child(found, Func::Local(f), [parent, node], found_id);
            found.local_get(f).local_get(s).local_get(parent);
            found.call(miss).return_();
        });
        self.finish(&mut b, [parent, node, addr], t0);
        builder.finish(vec![f], &mut module.funcs)
    }

    /// `enter_miss(f: i32, s: i32, parent: i32) -> i64`: `enter`'s end for an arc already
    /// counted, when `find_child` has to find the child of `parent` for `f`.
    fn build_miss(&self, module: &mut Module) -> FunctionId {
        let [f, s, parent, node, addr] = [(); 5].map(|()| module.locals.add(ValType::I32));
        let t0 = module.locals.add(ValType::I64);
        let i32s = [ValType::I32; 3];
        let mut builder = FunctionBuilder::new(&mut module.types, &i32s, &[ValType::I64]);
        builder.name("__wasmprof_enter_miss".into());
        let mut b = builder.func_body();
        b.local_get(parent).local_get(f).local_get(s);
        b.call(self.ops.find_child).local_set(node);
        self.finish(&mut b, [parent, node, addr], t0);
        builder.finish(vec![f, s, parent], &mut module.funcs)
    }

    /// `enter_other(f: i32, s: i32) -> i64`: `enter` for an entry from an indirect site or
    /// the host (`s` 0), whose arc `dyn_arc` counts (closing first, for an entry from the
    /// host, what an unwinding left open); then the current node's first child, where a
    /// function called through the same pointer again and again finds its node, or
    /// `enter_miss`.
    fn build_other(&self, module: &mut Module, miss: FunctionId) -> FunctionId {
        let [f, s, parent, node, addr] = [(); 5].map(|()| module.locals.add(ValType::I32));
        let t0 = module.locals.add(ValType::I64);
        let i32s = [ValType::I32; 2];
        let mut builder = FunctionBuilder::new(&mut module.types, &i32s, &[ValType::I64]);
        builder.name("__wasmprof_enter_other".into());
        let mut b = builder.func_body();
        self.ops.counter.count_other(&mut b, Func::Local(f), s);
        b.global_get(self.ops.cur).local_set(parent);
        b.block(None, |found| {
            let found_id = found.id();
            self.ops
                .first_child(found, Func::Local(f), [parent, node], found_id);
            found.local_get(f).local_get(s).local_get(parent);
            found.call(miss).return_();
        });
        self.finish(&mut b, [parent, node, addr], t0);
        builder.finish(vec![f, s], &mut module.funcs)
    }

    /// The end of an entry into `node` from `parent`: the node counted and current, the
    /// clock's reading kept in it and pushed (0 without a clock), the parent in its global.
    fn finish(&self, b: &mut InstrSeqBuilder, [parent, node, addr]: [LocalId; 3], t0: LocalId) {
        self.ops.entered(b, [node, addr]);
        if let Some(clock) = self.clock {
            self.ops.start(b, clock, addr, t0);
        }
        b.local_get(parent).global_set(self.parent_global);
        b.local_get(t0);
    }
}

/// `find_child(parent: i32, f: i32, site: i32) -> i32`: the child of `parent` for `f`,
/// entered from call site `site`: the one the site's slot or the child cache remembers,
/// found in the list, or added.
pub(super) fn build_find_child(module: &mut Module, layout: &Layout, mem: &Mem) -> FunctionId {
    let parent = module.locals.add(ValType::I32);
    let f = module.locals.add(ValType::I32);
    let site = module.locals.add(ValType::I32);
    let node = module.locals.add(ValType::I32);
    let prev = module.locals.add(ValType::I32);
    let addr = module.locals.add(ValType::I32);
    let slot = module.locals.add(ValType::I32);
    let mut builder = FunctionBuilder::new(
        &mut module.types,
        &[ValType::I32, ValType::I32, ValType::I32],
        &[ValType::I32],
    );
    builder.name("__wasmprof_find_child".into());
    let mut b = builder.func_body();
    find_child(
        &mut b,
        layout,
        mem,
        [parent, f, site, node],
        [prev, addr, slot],
    );
    b.local_get(node);
    builder.finish(vec![parent, f, site], &mut module.funcs)
}

/// `exit(parent: i32, node: i32, t0: i64)`, the state module's exit probe: reads the clock
/// and runs [`TimedOps::exit`].
pub(super) fn build_exit(
    module: &mut Module,
    ops: &TimedOps,
    clock: Option<Reading>,
) -> FunctionId {
    let parent = module.locals.add(ValType::I32);
    let node = module.locals.add(ValType::I32);
    let t0 = module.locals.add(ValType::I64);
    let addr = module.locals.add(ValType::I32);
    let mut builder = FunctionBuilder::new(&mut module.types, &EXIT_PARAMS, &[]);
    builder.name("__wasmprof_exit".into());
    let mut b = builder.func_body();
    if let Some(clock) = clock {
        b.instr(clock.read())
            .local_get(t0)
            .binop(BinaryOp::I64Sub)
            .local_set(t0);
    }
    ops.exit(&mut b, [parent, node, addr], clock.map(|_| t0));
    builder.finish(vec![parent, node, t0], &mut module.funcs)
}
