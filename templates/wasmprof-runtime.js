// cargo-wasmprof's runtime for programs that Emscripten links (added by wasmprof-emcc with
// --pre-js). It loads the instrumented module itself through Module.instantiateWasm (the
// hook Emscripten documents for this): where the host allows a module two memories, the
// module itself, whose probes keep the profiler's state in a memory of their own; elsewhere
// (node 20) the variant the module carries, whose state is in a state module that the
// runtime instantiates (see `forThisHost`). It gives the module the clock (or, with the
// sampled time metric, starts the sampler: a worker that reads which context runs from
// the state's shared memory), and saves the profile when the program ends: under node, to
// the file its environment names (src/js_runtime.rs: OUT_VAR) or
// <program>.wasmprof.json in the working directory; in a browser, `wasmprof.stop()` gives
// it (a promise) and `wasmprof.save()` downloads it.
// It uses nothing of Emscripten's glue but Module.instantiateWasm and Module.locateFile,
// and, with -pthread, Module.PThread and Module.invokeEntryPoint: the glue's worker.js loads
// this same script in every worker, so each worker has a state of its own (its instance's
// memory, or its state module's: a shared memory), sends it to the main thread, and notes
// in its header where the thread stands whenever it leaves wasm (the module's wait probe
// does so before each wait); the main thread reads every worker's state when the program
// ends (templates/wasmprof-pthreads.js, which goes in this function).
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
  var PROGRAM = WASM_FILE.replace(/\.wasm$/, '');
  var isNode = typeof process === 'object' && !!(process.versions && process.versions.node);
  // In a worker of Emscripten's -pthread (worker.js sets this before it loads the script).
  var isPthread = typeof Module === 'object' && !!Module['ENVIRONMENT_IS_PTHREAD'];
  var scriptUrl = typeof document === 'object' && document.currentScript ? document.currentScript.src
    : typeof self === 'object' && self.location ? self.location.href : '';
  var now = isNode ? process.hrtime.bigint
    : function () { return BigInt(Math.round(performance.now() * 1e6)); };
  // `depth`: the main thread's calls from JS into the module under way.
  // `bytes`, `module`: the module that ran, which V8's frames are named in.
  var run = { meta: null, state: null, started: null, trap: null, frames: null, frameTable: null, depth: 0, bytes: null, module: null };

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
      run.depth++;
      try {
        if (starting) starting();
        return f.apply(this, arguments);
      } catch (e) {
        // A stack overflow is a RangeError in V8; the glue's own handler may overflow
        // next, so the profile is saved now.
        if (e instanceof WebAssembly.RuntimeError || e instanceof RangeError) trap = e;
        else if (run.depth === 1) leftUncaught(e);
        throw e;
      } finally {
        run.depth--;
        leaveWasm(trap);
      }
    };
  }

  // A JS exception (an import's error, not a trap) that leaves the program's outermost
  // call may end the process with no 'exit' event too (3.1.6's glue rethrows it from
  // node's uncaughtException handler when the runtime is kept alive, and node exits with
  // 7): the profile is saved now, as of a run that ended on it. If the program goes on
  // (the glue caught it), the 'exit' event saves the profile again, without it. The
  // glue's own ways out, `exit()`'s ExitStatus and 'unwind', are not such an end.
  function leftUncaught(e) {
    if (!isNode || isPthread || run.trap || e === 'unwind' || (e && e.name === 'ExitStatus')) return;
    run.trap = NAMES.uncaught + (e instanceof Error ? e.name + ': ' + e.message : String(e));
    run.frames = e instanceof Error ? trapFrames(e) : [];
    writeProfile(1);
    run.trap = null;
    run.frames = null;
  }

  // Emscripten's -pthread: each worker's side and the main thread's (templates/
  // wasmprof-pthreads.js, in this scope).
  '__WASMPROF_PTHREADS__';

  // Every error's stack reads as without the profiler: the frames of the thunks that the
  // module's calls of its imports go through (`NAME (wasmprof thunk)`) are left out (a
  // panic's stack in wasm-bindgen-test's output, a trap's under node). A
  // `prepareStackTrace` set before (source-map-support's) gets the frames without them;
  // `trapFrames` reads the whole stack.
  var wholeStacks = new WeakMap();
  var previousPrepare = Error.prepareStackTrace;
  // How many frames an error's stack shows: all that V8 keeps, but for a module without a
  // context tree, for which V8 keeps more (`keepDeepStacks`): the program's limit.
  var shownFrames = Infinity;
  Error.prepareStackTrace = function (error, frames) {
    var at = function (frame) { return '    at ' + frame; };
    var shown = frames.filter(function (frame) {
      return !/ \(wasmprof thunk\)$/.test(frame.getFunctionName() || '');
    }).slice(0, shownFrames);
    if (error !== null && typeof error === 'object') wholeStacks.set(error, frames.map(at).join('\n'));
    if (previousPrepare) return previousPrepare(error, shown);
    return [String(error)].concat(shown.map(at)).join('\n');
  };

  // A module without a context tree has its open calls at a trap from the error's stack:
  // V8 keeps DEEP_STACK frames of it, of which the stack shows as many as before.
  var DEEP_STACK = 256;
  function keepDeepStacks() {
    if (Error.stackTraceLimit < DEEP_STACK) {
      shownFrames = Error.stackTraceLimit;
      Error.stackTraceLimit = DEEP_STACK;
    }
  }

  // Where a trap left the program, for a metric without a context tree: the wasm frames
  // of the error's stack (V8 keeps the innermost Error.stackTraceLimit frames), the thunks'
  // included, as function ids through the module's `wasmprof.frames` table, outermost first.
  function trapFrames(e) {
    var table = run.frameTable, ids = [];
    if (!table || typeof e.stack !== 'string') return ids;
    var stack = wholeStacks.get(e) || e.stack;
    var re = /wasm-function\[(\d+)\]/g, m;
    while ((m = re.exec(stack)) !== null) {
      var index = Number(m[1]);
      if (index * 4 + 4 > table.byteLength) continue;
      var id = table.getUint32(index * 4, true);
      if (id !== NAMES.no_function) ids.push(id);
    }
    // A stack as long as V8 keeps may have lost its outer frames: NO_FUNCTION says so.
    var lines = stack.split('\n').filter(function (l) { return /^\s+at /.test(l); });
    if (ids.length && lines.length >= Error.stackTraceLimit) ids.push(NAMES.no_function);
    return ids.reverse();
  }

  // A module with two memories (the profiler's own beside the program's) where the host
  // allows one (node 22 and later, current browsers); else the variant it carries for hosts
  // that allow a module one memory (node 20), with the profiler's state in a state module.
  var TWO_MEMORIES = new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 5, 5, 2, 0, 0, 0, 0]);
  function forThisHost(bytes) {
    if (WebAssembly.validate(TWO_MEMORIES)) return bytes;
    return customSection(new Uint8Array(bytes), NAMES.one_memory_section) || bytes;
  }

  // The contents of the custom section `name` of the module `bytes` (one that need not
  // compile here), or null.
  function customSection(bytes, name) {
    var at = 8; // past the magic and the version
    function leb() {
      var value = 0, scale = 1, byte;
      do {
        byte = bytes[at++];
        value += (byte & 0x7f) * scale;
        scale *= 128;
      } while (byte & 0x80);
      return value;
    }
    while (at < bytes.length) {
      var id = bytes[at++], size = leb(), end = at + size;
      if (id === 0) {
        var length = leb();
        if (new TextDecoder().decode(bytes.subarray(at, at + length)) === name) return bytes.slice(at + length, end);
      }
      at = end;
    }
    return null;
  }

  // The profiler's state for `module`: its meta, its frame table, and what the module
  // imports from NAMES.state_module (the clock, and, where it carries a state module, that
  // module's exports). Returns what to call with the module's instance, where the state
  // is when the module keeps it in a memory of its own.
  function setUp(module, imports) {
    var frames = WebAssembly.Module.customSections(module, NAMES.frames_section);
    var meta = JSON.parse(new TextDecoder().decode(section(module, NAMES.meta_section)));
    var frameTable = frames.length ? new DataView(frames[0]) : null;
    var stateModule = WebAssembly.Module.customSections(module, NAMES.state_section);
    if (stateModule.length) {
      imports[NAMES.state_module] = attach(meta, stateModule[0], frameTable);
      return function () {};
    }
    run.meta = meta;
    run.frameTable = frameTable;
    if (!meta.contexts) keepDeepStacks();
    imports[NAMES.state_module] = clockImports();
    return function (instance) {
      run.state = instance.exports;
      startTiming();
    };
  }

  // What the module imports to read the clock.
  function clockImports() {
    var clock = {};
    clock[NAMES.clock] = now;
    return clock;
  }

  // The sampler, for a sampled metric: V8's own where the module's meta names it and it can
  // start (node; a page that allows it), else the word sampler, which a page runs where the
  // module keeps its calling contexts (the dump's meta then names it); the worker started
  // for that is not needed otherwise.
  function startTiming() {
    var sampled = CONTRACT.metrics[run.meta.metric].sampled;
    var v8Meta = sampled && run.meta.sampler === NAMES.v8_sampler;
    var v8Here = v8Meta && startV8();
    // (A page that is not cross-origin isolated has no SharedArrayBuffer global.)
    var shared = Object.prototype.toString.call(run.state[NAMES.memory].buffer)
      === '[object SharedArrayBuffer]';
    if (v8Meta && !v8Here && run.meta.contexts && shared) {
      run.meta.sampler = NAMES.word_sampler;
      noSampler = null;
    }
    if (sampled && run.meta.sampler !== NAMES.v8_sampler) return startSampler();
    if (early) early.terminate();
    early = null;
  }

  // The profiler's state from its meta and its state module's bytes (and the frame table,
  // where the module's function indices are still ours): what the module imports as
  // `wasmprof`.
  function attach(meta, stateBytes, frameTable) {
    run.meta = meta;
    run.frameTable = frameTable;
    if (!meta.contexts) keepDeepStacks();
    var stateModule = new WebAssembly.Module(stateBytes);
    var clock = clockImports();
    var stateImports = {};
    stateImports[NAMES.state_module] = clock;
    run.state = new WebAssembly.Instance(stateModule, stateImports).exports;
    var imports = Object.assign({}, clock, run.state);
    startTiming();
    return imports;
  }

  Module['instantiateWasm'] = function (imports, receive) {
    if (isPthread) return instantiateInWorker(imports, receive);
    load().then(function (bytes) {
      run.bytes = new Uint8Array(forThisHost(bytes));
      return WebAssembly.compile(run.bytes);
    }).then(function (module) {
      var instantiated = setUp(module, imports);
      watchWorkers();
      return WebAssembly.instantiate(module, imports).then(function (instance) {
        instantiated(instance);
        run.module = module;
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
  // worker takes tens of milliseconds to start); it waits for the memory, and says when it
  // has it. The main thread's sampler samples the pthreads too: their workers send it their
  // memories, which it takes between its slices (one worker instead of one per pthread's:
  // BENCHMARKS.md, "Under node").
  var SOURCE = '(' + SAMPLER + ')';
  var early = null;
  var noSampler = null; // why none runs, when the metric is sampled (the dump says)
  var ready = Promise.resolve(); // the sampler has the memory
  var isolated = isNode || (typeof Worker === 'function' && !!self.crossOriginIsolated);
  if (METRIC.sampled && !isPthread && CONTRACT.sampler !== NAMES.v8_sampler) {
    if (isolated) early = startWorker();
    else noSampler = typeof Worker === 'function' ? 'not_isolated' : 'no_worker';
  }

  // The sampler's worker, or null when it cannot start.
  function startWorker() {
    try {
      if (isNode) {
        var worker = new (require('worker_threads').Worker)(
          'var port = require("worker_threads").parentPort; port.once("message", function (d) { ' +
          'port.postMessage("sampling"); ' + SOURCE + '(d, function (take) { port.on("message", take); }); });',
          { eval: true });
        worker.unref(); // the program's end ends the process
        return worker;
      }
      return new Worker(URL.createObjectURL(new Blob(
        ['onmessage = function (e) { postMessage("sampling"); ' + SOURCE +
          '(e.data, function (take) { onmessage = function (e) { take(e.data); }; }); };'],
        { type: 'text/javascript' })));
    } catch (e) {
      noSampler = 'worker_failed';
      console.error('wasmprof: cannot start the sampler, so the profile has no times: ' + e.message);
      return null;
    }
  }

  // When `worker` says it samples, or a second from now: the program waits for that. A
  // worker gets the memory only once the thread that posts it yields (Chromium delivers it
  // then, and a page's program runs its main without yielding: it would end before its
  // first sample), and on a busy machine a worker can take longer than a short program.
  function sampling(worker) {
    return new Promise(function (resolve) {
      var timer = setTimeout(resolve, 1000);
      if (isNode) {
        timer.unref();
        worker.once('message', resolve);
      } else {
        worker.onmessage = resolve;
      }
    });
  }

  // A pthread's memory for the main thread's sampler, which takes it from its next slice
  // on (after the main thread's own, which it starts with).
  var pendingThreads = [];
  function sampleThread(memory) {
    if (!early) return;
    if (pendingThreads) pendingThreads.push(memory);
    else early.postMessage(memory);
  }

  function startSampler() {
    // A worker not started early (the module's sampler was not the one expected).
    if (!early && noSampler === null) {
      if (isolated) early = startWorker();
      else noSampler = typeof Worker === 'function' ? 'not_isolated' : 'no_worker';
    }
    var memory = run.state[NAMES.memory];
    var data = {
      memory: memory,
      layout: LAYOUT,
      sampling: SAMPLING,
      nodes_off: run.meta.layout.nodes_off,
      // The most nodes the memory holds: the contexts, and the live table's chunks.
      max_nodes: Math.floor((run.meta.layout.pages * 65536 - run.meta.layout.nodes_off) / run.meta.layout.node_size),
      node_size: run.meta.layout.node_size,
      interval_us: Number(isNode && process.env[ENV.sample_interval]) || SAMPLING.default_interval_us
    };
    if (early) {
      ready = sampling(early);
      early.postMessage(data);
      pendingThreads.forEach(function (memory) { early.postMessage(memory); });
      pendingThreads = null;
    } else if (noSampler !== null && noSampler !== 'worker_failed') {
      var why = noSampler === 'not_isolated' ? 'the page is not cross-origin isolated, so no worker can sample it'
        : 'this context cannot start a worker (a shared or service worker) to sample it';
      console.warn('wasmprof: ' + why + ', and the profile has no times; use the exact-time metric here (' + ENV.metric + '=exact-time at link time, or --metric exact-time)');
    }
  }

  // V8's own sampler (templates/wasmprof-v8.js, in this scope).
  '__WASMPROF_V8__';

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

  // How many bytes of a profiler's memory hold its state: up to its last node (a context,
  // or a chunk the live table grew into).
  function usedBytes(memory) {
    var layout = run.meta.layout;
    var nodes = new DataView(memory.buffer, memory.byteOffset).getUint32(8, true);
    return Math.min(memory.length, layout.nodes_off + layout.node_size * nodes);
  }

  // `bytes` without its runs of zeros of 16 KiB or more (whole 4 KiB blocks: the live
  // table's and the arc table's empty slots): the bytes kept, and the runs left out as
  // [offset, length] pairs.
  function sparse(bytes) {
    var BLOCK = 4096, RUN = 4;
    var words = new Int32Array(bytes.buffer, bytes.byteOffset, bytes.length >> 2);
    var zero = function (at) {
      for (var w = at >> 2, end = (at + BLOCK) >> 2; w < end; w++) if (words[w] !== 0) return false;
      return true;
    };
    var holes = [], from = -1;
    for (var at = 0; at + BLOCK <= bytes.length; at += BLOCK) {
      if (zero(at)) {
        if (from < 0) from = at;
        continue;
      }
      if (from >= 0 && at - from >= RUN * BLOCK) holes.push([from, at - from]);
      from = -1;
    }
    var last = bytes.length - (bytes.length % BLOCK);
    if (from >= 0 && last - from >= RUN * BLOCK) holes.push([from, last - from]);
    if (!holes.length) return { kept: bytes, holes: holes };
    var size = holes.reduce(function (n, h) { return n - h[1]; }, bytes.length);
    var kept = new Uint8Array(size), start = 0, to = 0;
    holes.forEach(function (h) {
      kept.set(bytes.subarray(start, h[0]), to);
      to += h[0] - start;
      start = h[0] + h[1];
    });
    kept.set(bytes.subarray(start), to);
    return { kept: kept, holes: holes };
  }

  // The dump that `cargo wasmprof report` decodes: the used part of the profiler's memory
  // (and of each worker's, with -pthread).
  function profile(exitCode) {
    if (!run.state) return null;
    // Call sites that count in globals store their counts into the memory first.
    if (typeof run.state[NAMES.flush] === 'function') run.state[NAMES.flush]();
    var memory = new Uint8Array(run.state[NAMES.memory].buffer);
    var used = sparse(memory.subarray(0, usedBytes(memory)));
    var workers = collected || collectThreads();
    var stacks = v8Stacks();
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
      memory: base64(used.kept),
      holes: used.holes,
      threads: workers.threads,
      lost_threads: workers.lost,
      no_sampler: v8Pending() ? 'not_stopped' : noSampler,
      stacks: stacks,
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
    /** The profile so far, as `cargo wasmprof report` reads it. In a page that samples
     * itself, without the samples: `stop()` brings them. */
    profile: function () { return profile(0); },
    /** The profile, as `profile()`, once V8's sampler has stopped and its samples are in
     * (a promise). */
    stop: function () {
      return stopV8().then(function () { return profile(0); });
    },
    /** Downloads the profile as <program>.wasmprof.json, once the samples are in. */
    save: function (name) {
      return stopV8().then(function () {
        var blob = new Blob([JSON.stringify(profile(0))], { type: 'application/json' });
        var link = document.createElement('a');
        link.href = URL.createObjectURL(blob);
        link.download = name || PROGRAM + '.wasmprof.json';
        link.click();
        setTimeout(function () { URL.revokeObjectURL(link.href); }, 0);
      });
    }
  };
})();
if (typeof globalThis === 'object') globalThis['wasmprof'] = wasmprof;
