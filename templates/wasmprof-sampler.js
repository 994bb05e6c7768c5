// cargo-wasmprof's sampler for the sampled time metric under a JS host, a function that
// runs in a worker of its own (templates/wasmprof-runtime.js starts it with this source and
// posts it `d`: the profiler's shared memory, its layout, the schedule, the interval).
// Every interval (more often at first, so that a short run still gets samples:
// d.sampling, src/sampling.rs) it credits the time since the previous sample to the
// context node that the probes say runs: the same accounting as src/host/sampler.rs.
// It sleeps between samples, in the dense phase too, where a wait of 10 us lasts about
// 90 on Linux (its timer slack): a worker that spins takes a CPU from V8's compiler and GC
// threads, and on a machine of two CPUs the program it measures then stays longer in its
// baseline code (BENCHMARKS.md, "Under node": the kernels took up to twice as long).
// It samples in slices of SLICE_NS and lets its worker take its messages between them:
// `inbox(take)` has each later message (another thread's memory, a pthread's) given to
// `take`, and the sampler samples that thread too from the next slice on. Each thread's
// samples go to its own memory, each worth the time that passed, as the embedded host's
// sampler does for its threads.
function sampler(d, inbox) {
  var SLICE_NS = 10000000n;
  var L = d.layout, S = d.sampling;
  var threads = [];
  function views(t) { // renewed when the memory grows
    t.i32 = new Int32Array(t.memory.buffer);
    t.u64 = new BigUint64Array(t.memory.buffer);
  }
  function add(memory) {
    var t = { memory: memory, i32: null, u64: null };
    views(t);
    threads.push(t);
  }
  function take(t, ns, late) {
    var node = Atomics.load(t.i32, L.where / 4) >>> 0;
    Atomics.add(t.u64, L.samples / 8, 1n);
    if (late) Atomics.add(t.u64, L.late_samples / 8, 1n);
    if (node === L.in_probes) {
      Atomics.add(t.u64, L.probe_samples / 8, 1n);
    } else if (node === 0 || node >= d.max_nodes) {
      Atomics.add(t.u64, L.idle_samples / 8, 1n);
    } else {
      var at = d.nodes_off + node * d.node_size;
      if (at + d.node_size > t.u64.byteLength) views(t); // the tree grew the memory
      Atomics.add(t.u64, (at + L.node_samples) / 8, 1n);
      Atomics.add(t.u64, (at + L.node_sample_ns) / 8, ns);
    }
  }
  add(d.memory);
  var pause = new Int32Array(new SharedArrayBuffer(4));
  var clock = typeof process === 'object' && process.hrtime ? process.hrtime.bigint
    : function () { return BigInt(Math.round(performance.now() * 1e6)); };
  var interval = BigInt(d.interval_us) * 1000n;
  var floor = BigInt(S.dense_floor_ns), divided = interval / BigInt(S.dense_divisor);
  var dense = divided > floor ? divided : floor;
  var phase = BigInt(S.dense_phase_ns), factor = BigInt(S.late_factor), slack = BigInt(S.late_slack_ns);
  var began = clock(), last = began;
  var added = [];
  inbox(function (memory) { added.push(memory); });
  // The next slice, once the worker's messages are taken: node's setImmediate (node 20
  // would deliver a MessageChannel's messages one after another and none of the worker's),
  // a message to itself in a browser.
  var again = typeof setImmediate === 'function' ? function () { setImmediate(slice); }
    : (function (next) {
      next.port1.onmessage = slice;
      return function () { next.port2.postMessage(null); };
    })(new MessageChannel());
  function slice() {
    while (added.length) add(added.shift());
    var end = last + SLICE_NS;
    while (last < end) {
      Atomics.wait(pause, 0, 0, Number(last - began < phase ? dense : interval) / 1e6);
      var t = clock();
      var ns = t - last;
      last = t;
      // Late: it waited for a CPU. Judged against the interval, also in the dense phase,
      // whose sleeps last what the system gives (90-300 us for 10 asked, on two CPUs
      // shared with V8's compiler threads).
      var late = ns > factor * interval + slack;
      for (var i = 0; i < threads.length; i++) take(threads[i], ns, late);
    }
    again();
  }
  slice();
}
