// cargo-wasmprof's runtime for programs that Emscripten links (added by wasmprof-emcc with
// --pre-js). It loads the instrumented module itself through Module.instantiateWasm (the
// hook Emscripten documents for this), instantiates the profiler's state module that the
// module carries, gives both the clock (or, with the sampled time metric, starts the
// sampler: a worker that reads which context runs from the state's shared memory), and
// saves the profile when the program ends:
// under node, to the file its environment names (src/js_runtime.rs: OUT_VAR) or
// <program>.wasmprof.json in the working directory; in a
// browser, `wasmprof.profile()` returns it and `wasmprof.save()` downloads it.
// It uses nothing of Emscripten's glue but Module.instantiateWasm and Module.locateFile,
// and, with -pthread, Module.PThread and Module.invokeEntryPoint: the glue's worker.js loads
// this same script in every worker, so each worker instantiates a state module of its own
// (a shared memory), sends it to the main thread, and notes in its header where the thread
// stands whenever it leaves wasm (the module's wait probe does so before each wait); the
// main thread reads every worker's state when the program ends (see `threadDump`).
// A wasm-bindgen program (wasm32-unknown-unknown) requires it instead, as the module
// `wasmprof` its instrumented module imports from, and takes `wasmprof.attach(meta, state)`
// (src/js_runtime.rs writes that module); the rest is the same.
var wasmprof = (function () {
  'use strict';
  var WASM_FILE = '__WASMPROF_WASM_FILE__';
  // What this runtime shares with cargo-wasmprof, all defined there (src/js_runtime.rs,
  // `contract`): the state's layout constants (LAYOUT), the metric's probes (METRIC), the
  // module's names for the profiler's exports, sections and imports (NAMES), the
  // environment variables it reads (ENV), the sampler's schedule (SAMPLING), the clocks'
  // names (CLOCKS), and the dump's format and fields (DUMP).
  var CONTRACT = '__WASMPROF_CONTRACT__';
  var LAYOUT = CONTRACT.layout, METRIC = CONTRACT.metric, NAMES = CONTRACT.names;
  var ENV = CONTRACT.env, SAMPLING = CONTRACT.sampling, CLOCKS = CONTRACT.clocks;
  var DUMP = CONTRACT.dump;
  var NODE_SIZE = LAYOUT.node_size;
  var PROGRAM = WASM_FILE.replace(/\.wasm$/, '');
  var isNode = typeof process === 'object' && !!(process.versions && process.versions.node);
  // In a worker of Emscripten's -pthread (worker.js sets this before it loads the script).
  var isPthread = typeof Module === 'object' && !!Module['ENVIRONMENT_IS_PTHREAD'];
  var scriptUrl = typeof document === 'object' && document.currentScript ? document.currentScript.src
    : typeof self === 'object' && self.location ? self.location.href : '';
  var now = isNode ? process.hrtime.bigint
    : function () { return BigInt(Math.round(performance.now() * 1e6)); };
  var run = { meta: null, state: null, started: null, trap: null, frames: null, frameTable: null };

  function locate() {
    if (Module['locateFile']) return Module['locateFile'](WASM_FILE, '');
    if (isNode) return require('path').join(__dirname, WASM_FILE);
    return new URL(WASM_FILE, scriptUrl || undefined).href;
  }

  function load() {
    var where = locate();
    if (isNode) return Promise.resolve(require('fs').readFileSync(where));
    return fetch(where, { credentials: 'same-origin' }).then(function (response) {
      if (!response.ok) throw new Error('cannot load ' + where + ': HTTP ' + response.status);
      return response.arrayBuffer();
    });
  }

  function section(module, name) {
    var found = WebAssembly.Module.customSections(module, name);
    if (!found.length) throw new Error(WASM_FILE + ' carries no `' + name + '` section: was it instrumented by wasmprof-emcc?');
    return found[0];
  }

  // Wasm traps leave the program through an export (or, in a worker, the thread's entry
  // point); remember the first one's message and, under node, save the profile at once:
  // when the glue rethrows the trap from node's uncaughtException handler (Emscripten
  // 3.1.6), node exits with 7 without an 'exit' event. The exit code saved then is 1 (a
  // trap's); an 'exit' event, if one comes, saves the real one.
  function watchTraps(exports) {
    var wrapped = {};
    Object.keys(exports).forEach(function (name) {
      var value = exports[name];
      wrapped[name] = typeof value === 'function' ? watched(value) : value;
    });
    return wrapped;
  }

  // `f` as JS calls it: the worker's state says it is in wasm meanwhile; `starting`, if
  // given, runs first (in wasm already).
  function watched(f, starting) {
    return function () {
      enterWasm();
      var trap = null;
      try {
        if (starting) starting();
        return f.apply(this, arguments);
      } catch (e) {
        // A stack overflow is a RangeError in V8; the glue's own handler may overflow
        // next, so the profile is saved now.
        if (e instanceof WebAssembly.RuntimeError || e instanceof RangeError) trap = e;
        throw e;
      } finally {
        leaveWasm(trap);
      }
    };
  }

  // A worker's side: what the main thread reads of its thread (`status`: the phase, how
  // many pthreads the worker started, how many finished ones its `archive` holds), the
  // archive (a shared memory that the worker appends each finished pthread's state to, as
  // a record: u32 bytes, u32 cur, u32 whether an end reading follows, u32 0, u64 end, then
  // the bytes, padded to 8), the state as the state module starts (`initial`), how deep
  // the calls from JS into wasm are, and, once it trapped, its state at the trap (the
  // glue's calls after it change nothing of it).
  var PHASE_READY = 0, PHASE_RUNNING = 1, PHASE_RETURNED = 2, PHASE_TRAPPED = 3;
  var RECORD_HEAD = 24;
  var mine = { status: null, archive: null, archived: 0, initial: null, depth: 0, frozen: null };

  function enterWasm() {
    if (!isPthread || !run.state || mine.depth++ > 0 || mine.frozen) return;
    Atomics.add(new Int32Array(run.state[NAMES.memory].buffer), LAYOUT.waiting / 4, 1);
  }

  function leaveWasm(trap) {
    if (!isPthread) {
      if (trap && !run.trap) {
        run.trap = trap.message;
        run.frames = trapFrames(trap);
        if (isNode) writeProfile(1);
      }
      return;
    }
    if (!run.state || --mine.depth > 0) return;
    var memory = run.state[NAMES.memory];
    if (mine.frozen) { // the glue's call after the trap: the state as the trap left it
      new Uint8Array(memory.buffer).set(mine.frozen.bytes);
      run.state[NAMES.cur].value = mine.frozen.cur;
      return;
    }
    publish();
    if (trap) {
      Atomics.store(mine.status, 0, PHASE_TRAPPED);
      mine.frozen = {
        bytes: new Uint8Array(memory.buffer).slice(0, usedBytes(new Uint8Array(memory.buffer))),
        cur: run.state[NAMES.cur].value
      };
    }
  }

  // A pthread's state (and what the worker did after it), appended to the archive when the
  // worker starts its next pthread; the state is then as the state module started.
  function handOver() {
    var memory = run.state[NAMES.memory];
    var words = new Int32Array(memory.buffer);
    var live = new Uint8Array(memory.buffer);
    var used = usedBytes(live);
    var at = mine.archived, size = RECORD_HEAD + Math.ceil(used / 8) * 8;
    var short = at + size - mine.archive.buffer.byteLength;
    try {
      if (short > 0) mine.archive.grow(Math.ceil(short / 65536));
    } catch (e) { // the next pthread adds to this one's state; its thread says so
      return;
    }
    var view = new DataView(mine.archive.buffer);
    var end = endReading();
    view.setUint32(at, used, true);
    view.setUint32(at + 4, run.state[NAMES.cur].value, true);
    view.setUint32(at + 8, end === null ? 0 : 1, true);
    view.setBigUint64(at + 16, BigInt(end === null ? 0 : end), true);
    new Uint8Array(mine.archive.buffer).set(live.subarray(0, used), at + RECORD_HEAD);
    mine.archived = at + size;
    Atomics.add(mine.status, 2, 1); // after the record: whoever counts it sees it whole
    var word = Atomics.load(words, LAYOUT.waiting / 4); // in wasm: even
    live.fill(0, 0, used);
    live.set(mine.initial);
    Atomics.store(words, LAYOUT.waiting / 4, word);
    run.state[NAMES.cur].value = 0; // the root
  }

  // Out of wasm: where the thread stands (its context node, its instruction counter) into
  // the state's header, then the waiting word odd, as the wait probe does before a wait:
  // whoever reads the word odd (and the same after copying the memory) has a whole state.
  function publish() {
    var memory = run.state[NAMES.memory];
    var view = new DataView(memory.buffer);
    view.setUint32(LAYOUT.wait_cur, run.state[NAMES.cur].value, true);
    var counter = run.state[NAMES.instructions];
    if (counter) view.setBigUint64(LAYOUT.wait_instructions, BigInt.asUintN(64, counter.value), true);
    var words = new Int32Array(memory.buffer);
    Atomics.add(words, LAYOUT.waiting / 4, 1);
    Atomics.notify(words, LAYOUT.waiting / 4); // a main thread that waits to read the state
  }

  // Where a trap left the program, for a metric without a context tree: the wasm frames
  // of the error's stack (V8 keeps the innermost Error.stackTraceLimit frames), as
  // function ids through the module's `wasmprof.frames` table, outermost first.
  function trapFrames(e) {
    var table = run.frameTable, ids = [];
    if (!table || typeof e.stack !== 'string') return ids;
    var re = /wasm-function\[(\d+)\]/g, m;
    while ((m = re.exec(e.stack)) !== null) {
      var index = Number(m[1]);
      if (index * 4 + 4 > table.byteLength) continue;
      var id = table.getUint32(index * 4, true);
      if (id !== NAMES.no_function) ids.push(id);
    }
    // A stack as long as V8 keeps may have lost its outer frames: NO_FUNCTION says so.
    var lines = e.stack.split('\n').filter(function (l) { return /^\s+at /.test(l); });
    if (ids.length && lines.length >= Error.stackTraceLimit) ids.push(NAMES.no_function);
    return ids.reverse();
  }

  // The profiler's state for `module`: its meta, its frame table, its own state module,
  // whose exports the module imports (with the clock) from NAMES.state_module.
  function setUp(module, imports) {
    var frames = WebAssembly.Module.customSections(module, NAMES.frames_section);
    imports[NAMES.state_module] = attach(JSON.parse(new TextDecoder().decode(section(module, NAMES.meta_section))),
      section(module, NAMES.state_section), frames.length ? new DataView(frames[0]) : null);
  }

  // The profiler's state from its meta and its state module's bytes (and the frame table,
  // where the module's function indices are still ours): what the module imports as
  // `wasmprof`.
  function attach(meta, stateBytes, frameTable) {
    run.meta = meta;
    run.frameTable = frameTable;
    var stateModule = new WebAssembly.Module(stateBytes);
    var clock = {};
    clock[NAMES.clock] = now;
    var stateImports = {};
    stateImports[NAMES.state_module] = clock;
    run.state = new WebAssembly.Instance(stateModule, stateImports).exports;
    var imports = Object.assign({}, clock, run.state);
    if (CONTRACT.metrics[run.meta.metric].sampled) startSampler();
    else if (early) early.terminate();
    return imports;
  }

  // In a worker the glue instantiates synchronously, from the module the main thread
  // posted; the worker's state goes to the main thread before the worker says it is loaded.
  function instantiateInWorker(imports, receive) {
    var module = Module['wasmModule'];
    setUp(module, imports);
    var instance = new WebAssembly.Instance(module, imports);
    var live = new Uint8Array(run.state[NAMES.memory].buffer);
    mine.initial = live.slice(0, usedBytes(live));
    mine.status = new Int32Array(new SharedArrayBuffer(12));
    // As large as four states can grow (a shared memory reserves its maximum).
    var pages = Math.min(65536, 4 * run.meta.layout.pages);
    mine.archive = new WebAssembly.Memory({ initial: 0, maximum: pages, shared: true });
    // A pthread's entry point: the worker's previous pthread (if any) is handed over first.
    var entry = watched(Module['invokeEntryPoint'], function () {
      if (Atomics.add(mine.status, 1, 1) > 0) handOver();
      Atomics.store(mine.status, 0, PHASE_RUNNING);
    });
    Module['invokeEntryPoint'] = function () {
      var result = entry.apply(this, arguments);
      Atomics.store(mine.status, 0, PHASE_RETURNED);
      return result;
    };
    postMessage({ wasmprof: 'thread', memory: run.state[NAMES.memory], status: mine.status, archive: mine.archive });
    publish(); // out of wasm until the glue calls in
    var exports = watchTraps(instance.exports);
    receive({ exports: exports }, module);
    return exports;
  }

  // The main thread's side of -pthread: each worker's state, as the worker sends it, the
  // ids of its threads (1, 2, ... as the main thread learns of them: `ids` for those in
  // its archive, `id` for its running or last one), and the error that a worker's trap
  // raises on the main thread (what ends the program).
  var threads = [], lastId = 0, collected = null;

  // Gives each pthread that worker `t` archived since the last look the id its running
  // thread had, and the running one the next.
  function countArchived(t) {
    for (var n = Atomics.load(t.status, 2); t.ids.length < n; t.id = ++lastId) t.ids.push(t.id);
  }

  function watchWorkers() {
    var pthreads = Module['PThread'];
    if (!pthreads) return;
    // The program's end terminates the workers, perhaps in wasm: their threads are read
    // before.
    var terminate = pthreads.terminateAllThreads;
    pthreads.terminateAllThreads = function () {
      collected = collectThreads();
      return terminate.apply(this, arguments);
    };
    var load = pthreads.loadWasmModuleToWorker;
    pthreads.loadWasmModuleToWorker = function (w) {
      var result = load.apply(this, arguments);
      var onmessage = w.onmessage, onerror = w.onerror;
      w.onmessage = function (e) {
        var d = e.data;
        if (d && d.wasmprof === 'thread') {
          threads.push({ id: ++lastId, ids: [], memory: d.memory, status: d.status, archive: d.archive, worker: w, trap: null, frames: [] });
          return;
        }
        return onmessage.apply(this, arguments);
      };
      w.onerror = function (e) {
        var t = threads.filter(function (t) { return t.worker === w; })[0];
        if (t && !t.trap) {
          countArchived(t);
          t.trap = String(e && e.message || e);
          t.frames = trapFrames(e);
          if (!run.trap) run.trap = 'thread ' + t.id + ': ' + t.trap;
          if (isNode) writeProfile(1);
        }
        return onerror.apply(this, arguments);
      };
      return result;
    };
  }

  Module['instantiateWasm'] = function (imports, receive) {
    if (isPthread) return instantiateInWorker(imports, receive);
    load().then(function (bytes) {
      return WebAssembly.compile(bytes);
    }).then(function (module) {
      setUp(module, imports);
      watchWorkers();
      return WebAssembly.instantiate(module, imports).then(function (instance) {
        return { instance: instance, module: module };
      });
    }, function (e) {
      console.error('wasmprof: cannot load ' + WASM_FILE + ': ' + (e && e.message || e));
      if (isNode) process.exit(1);
      throw e;
    }).then(function (loaded) {
      return ready.then(function () { return loaded; });
    }).then(function (loaded) {
      // The program runs from here on; what it throws takes the way it takes without us.
      run.started = now();
      receive({ exports: watchTraps(loaded.instance.exports) }, loaded.module);
    });
    return {};
  };

  // The sampler's source (templates/wasmprof-sampler.js), run in a worker of its own.
  var SAMPLER = '__WASMPROF_SAMPLER__';

  // The worker starts with the runtime, so that it is up by the time the program runs (a
  // worker takes tens of milliseconds to start, and a browser starts it only once the page
  // yields, which a program's main does not); it waits for the memory.
  var SOURCE = '(' + SAMPLER + ')';
  var early = null;
  var ready = Promise.resolve(); // a browser's worker says when it is up
  var isolated = isNode || (typeof Worker === 'function' && !!self.crossOriginIsolated);
  if (METRIC.sampled && isolated) {
    try {
      if (isNode) {
        early = new (require('worker_threads').Worker)(
          'require("worker_threads").parentPort.once("message", ' + SOURCE + ');', { eval: true });
        early.unref(); // the program's end ends the process
      } else {
        early = new Worker(URL.createObjectURL(new Blob(
          ['onmessage = function (e) { ' + SOURCE + '(e.data); }; postMessage("up");'],
          { type: 'text/javascript' })));
        // Chromium starts it only once the page yields, so the program waits for it (a
        // second at most) rather than run unsampled.
        var worker = early;
        ready = new Promise(function (resolve) {
          worker.onmessage = resolve;
          setTimeout(resolve, 1000);
        });
      }
    } catch (e) {
      console.error('wasmprof: cannot start the sampler, so the profile has no times: ' + e.message);
    }
  }

  function startSampler() {
    var memory = run.state[NAMES.memory];
    var data = {
      memory: memory,
      layout: LAYOUT,
      sampling: SAMPLING,
      nodes_off: run.meta.layout.nodes_off,
      nodes_cap: run.meta.layout.nodes_cap,
      interval_us: Number(isNode && process.env[ENV.sample_interval]) || SAMPLING.default_interval_us
    };
    if (early) {
      early.postMessage(data);
    } else if (!isolated) {
      console.warn('wasmprof: the page is not cross-origin isolated, so no worker can sample it and the profile has no times; use the exact-time metric for such pages (' + ENV.metric + '=exact-time at link time, or --metric exact-time)');
    }
  }

  function base64(bytes) {
    if (isNode) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('base64');
    var text = '';
    for (var i = 0; i < bytes.length; i += 0x8000) {
      text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(text);
  }

  // What the probes of the module's metric record (its meta says which metric).
  function probes() {
    return CONTRACT.metrics[run.meta.metric].probes;
  }

  // The reading that closes the activations still open: the instruction counter, or the
  // clock (in decimal: a JS number would lose the last digits).
  function endReading() {
    if (probes().counter) {
      var counter = run.state[NAMES.instructions];
      return counter ? counter.value.toString() : null;
    }
    return probes().clock ? now().toString() : null;
  }

  // How many bytes of a profiler's memory hold its state: up to its last context node.
  function usedBytes(memory) {
    var layout = run.meta.layout;
    var nodes = new DataView(memory.buffer, memory.byteOffset).getUint32(8, true);
    return Math.min(memory.length, layout.nodes_off + NODE_SIZE * Math.min(nodes, layout.nodes_cap));
  }

  // A worker's running (or last) thread as the main thread reads it when the program ends:
  // whole only while the worker is out of wasm or waits (the waiting word odd, and the
  // same after the copy); else null, a thread lost (it was running: a JS host cannot stop
  // it).
  function threadDump(t, deadline) {
    var words = new Int32Array(t.memory.buffer);
    var before = settled(words, deadline);
    if (before % 2 === 0) return null;
    var phase = Atomics.load(t.status, 0);
    var together = Atomics.load(t.status, 1) - t.ids.length; // the pthreads in this state
    var live = new Uint8Array(t.memory.buffer);
    var bytes = live.slice(0, usedBytes(live));
    if (Atomics.load(words, LAYOUT.waiting / 4) !== before) return null;
    var view = new DataView(bytes.buffer);

    return {
      id: t.id,
      how: t.trap ? 'trapped: ' + t.trap
        : phase === PHASE_RUNNING ? 'waiting when the program ended'
        : phase === PHASE_RETURNED ? (together > 1 ? 'returned (with the ' + (together - 1) +
          ' pthreads its worker ran before it: the archive was full)' : 'returned')
        : phase === PHASE_TRAPPED ? 'trapped'
        : phase === PHASE_READY ? 'ran no thread (an idle worker)'
        : 'in an unknown phase ' + phase,
      trap: t.trap,
      cur: view.getUint32(LAYOUT.wait_cur, true),
      end: probes().counter ? view.getBigUint64(LAYOUT.wait_instructions, true).toString()
        : probes().clock ? now().toString() : null,
      frames: t.frames,
      memory: base64(bytes)
    };
  }

  // The waiting word of a worker's state once it is odd, or at `deadline` (a worker ends
  // a pthread in wasm just after its joiner wakes, so a program that ends then finds it
  // there for a moment). The main thread may wait under node; a browser's may only spin.
  function settled(words, deadline) {
    var at = LAYOUT.waiting / 4;
    var word = Atomics.load(words, at);
    while (word % 2 === 0) {
      var left = deadline - Date.now();
      if (left <= 0) break;
      if (isNode) Atomics.wait(words, at, word, left);
      word = Atomics.load(words, at);
    }
    return word;
  }

  // How long the program's end waits for the workers still in wasm, in all (a thread that
  // computes on is lost after it).
  var SETTLE_MS = 1000;

  // Every thread of worker `t`: the pthreads it finished, then its running (or last) one.
  function workerDumps(t, deadline) {
    countArchived(t);
    var view = new DataView(t.archive.buffer), at = 0;
    var ended = t.ids.map(function (id) {
      var used = view.getUint32(at, true);
      var record = {
        id: id, how: 'returned', trap: null, cur: view.getUint32(at + 4, true),
        end: view.getUint32(at + 8, true) ? view.getBigUint64(at + 16, true).toString() : null,
        frames: [], memory: base64(new Uint8Array(t.archive.buffer, at + RECORD_HEAD, used))
      };
      at += RECORD_HEAD + Math.ceil(used / 8) * 8;
      return record;
    });
    return { ended: ended, live: threadDump(t, deadline) };
  }

  // Every worker's threads, and the ids of those lost.
  function collectThreads() {
    var deadline = Date.now() + SETTLE_MS;
    var all = [], lost = [];
    threads.forEach(function (t) {
      var d = workerDumps(t, deadline);
      all = all.concat(d.ended, d.live ? [d.live] : []);
      if (!d.live) lost.push(t.id);
    });
    return { threads: all, lost: lost };
  }

  // The dump that `cargo wasmprof report` decodes: the used part of the profiler's memory
  // (and of each worker's, with -pthread).
  function profile(exitCode) {
    if (!run.state) return null;
    var memory = new Uint8Array(run.state[NAMES.memory].buffer);
    var used = usedBytes(memory);
    var workers = collected || collectThreads();
    return checked({
      format: DUMP.format,
      version: run.meta.version,
      module: WASM_FILE,
      exit_code: exitCode === undefined ? 0 : exitCode,
      trap: run.trap,
      wall_ns: run.started === null ? 0 : Number(now() - run.started),
      clock: isNode ? CLOCKS.node : CLOCKS.browser,
      ticks_per_ns: 1,
      cur: run.state[NAMES.cur].value,
      end: endReading(),
      frames: run.frames || [],
      memory: base64(memory.subarray(0, used)),
      threads: workers.threads,
      lost_threads: workers.lost,
      meta: run.meta
    });
  }

  // `dump` as it is, once checked to have the fields cargo-wasmprof reads (DUMP; each
  // thread's too): a runtime that drifted from them says which, rather than leave a dump
  // that cannot be read without a word.
  function checked(dump) {
    var differ = function (object, fields) {
      var keys = Object.keys(object);
      return fields.filter(function (f) { return keys.indexOf(f) < 0; }).map(function (f) { return 'no ' + f; })
        .concat(keys.filter(function (k) { return fields.indexOf(k) < 0; }).map(function (k) { return 'an unknown ' + k; }));
    };
    var wrong = differ(dump, DUMP.fields);
    dump.threads.forEach(function (t) { wrong = wrong.concat(differ(t, DUMP.thread_fields)); });
    if (wrong.length) console.error('wasmprof: the dump does not have the fields cargo-wasmprof reads: ' + wrong.join(', '));
    return dump;
  }

  // Under node: writes the profile to the file ENV.out names or <program>.wasmprof.json,
  // through a temporary file renamed into place.
  function writeProfile(exitCode) {
    var dump = profile(exitCode);
    if (!dump) return;
    var fs = require('fs');
    var path = require('path');
    var out = process.env[ENV.out] || path.join(process.cwd(), PROGRAM + '.wasmprof.json');
    var tmp = out + '.' + process.pid + '.tmp';
    try {
      fs.writeFileSync(tmp, JSON.stringify(dump));
      fs.renameSync(tmp, out);
    } catch (e) {
      console.error('wasmprof: cannot write ' + out + ': ' + e.message);
    }
  }

  if (isNode && !isPthread) process.on('exit', writeProfile);

  return {
    /** wasm-bindgen's glue: the module's `wasmprof` imports, the program running from now
     * on (its bindgen pass drops our custom sections, so they come from the caller). */
    attach: function (meta, stateBytes) {
      var imports = attach(meta, stateBytes, null);
      run.started = now();
      return imports;
    },
    /** The profile so far, as `cargo wasmprof report` reads it. */
    profile: function () { return profile(0); },
    /** Downloads the profile as <program>.wasmprof.json. */
    save: function (name) {
      var blob = new Blob([JSON.stringify(profile(0))], { type: 'application/json' });
      var link = document.createElement('a');
      link.href = URL.createObjectURL(blob);
      link.download = name || PROGRAM + '.wasmprof.json';
      link.click();
      setTimeout(function () { URL.revokeObjectURL(link.href); }, 0);
    }
  };
})();
if (typeof globalThis === 'object') globalThis['wasmprof'] = wasmprof;
