// cargo-wasmprof's runtime for Emscripten's -pthread: what each worker does for its thread
// and how the main thread reads every worker's state when the program ends. Not a script
// of its own: src/js_runtime.rs puts it inside templates/wasmprof-runtime.js, in that
// function's scope (it uses the runtime's `run`, `watched`, `setUp`, `usedBytes`, ...).

// A worker's side: what the main thread reads of its thread (`status`: the phase, how
// many pthreads the worker started, how many finished ones its `archive` holds), the
// archive (a shared memory that the worker appends each finished pthread's state to, as
// a record: u32 bytes, u32 cur, u32 whether an end reading follows, u32 0, u64 end, then
// the bytes, padded to 8), the state as it starts (`initial`), how deep
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
// worker starts its next pthread; the state is then as it started.
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

// In a worker the glue instantiates synchronously, from the module the main thread
// posted; the worker's state goes to the main thread before the worker says it is loaded.
function instantiateInWorker(imports, receive) {
  var module = Module['wasmModule'];
  var instantiated = setUp(module, imports);
  var instance = new WebAssembly.Instance(module, imports);
  instantiated(instance);
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
        sampleThread(d.memory);
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
