// cargo-wasmprof's runtime, its part for V8's own sampler. Not a script of its own:
// src/js_runtime.rs puts it inside templates/wasmprof-runtime.js, in that function's scope
// (it uses the runtime's `run`, `NAMES`, `ENV`, `SAMPLING`, `isNode` and `noSampler`).

// V8's own sampler, for a module whose meta names it: under node the inspector's Profiler
// domain, started before the program runs and stopped at the first dump (node answers a
// session's message at once); in a page the JS Self-Profiling API, which the page's
// `Document-Policy: js-profiling` allows (Chromium samples every 10 ms at best) and whose
// samples come in a promise (`stopV8`). Its samples are the stacks of the module's
// functions (`stacksOf`).
var v8 = null;
// What a sampler that failed leaves: no samples.
var NO_PROFILE = { nodes: [], samples: [], timeDeltas: [] };
// The most samples a page's sampler keeps: hours at its 10 ms.
var PAGE_BUFFER = 1000000;
// Starts V8's sampler; false where none can start (a page that does not allow it, which
// the dump says, or a worker).
function startV8() {
  if (!isNode) {
    try {
      var page = new Profiler({ sampleInterval: SAMPLING.v8_interval_us / 1000, maxBufferSize: PAGE_BUFFER });
      v8 = { page: page, started: performance.now(), profile: null, stopping: null };
      return true;
    } catch (e) {
      noSampler = 'no_v8_sampler';
      return false;
    }
  }
  var session = new (require('inspector').Session)();
  session.connect();
  var interval = Number(process.env[ENV.sample_interval]) || SAMPLING.v8_interval_us;
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: interval });
  session.post('Profiler.start');
  v8 = { session: session, profile: null };
  return true;
}

// A page's sampler runs, and its samples are not in yet: `stopV8` brings them.
function v8Pending() {
  return !!(v8 && v8.page && !v8.profile);
}

// Stops V8's sampler and keeps its profile (a promise: a page's trace comes in one).
function stopV8() {
  if (!v8 || v8.profile) return Promise.resolve();
  if (!v8.page) return Promise.resolve(stopInspector());
  if (!v8.stopping) {
    v8.stopping = v8.page.stop().then(function (trace) {
      v8.profile = profileOfTrace(trace, v8.started);
    }, function (e) {
      console.error("wasmprof: the page's sampler failed, so the profile has no times: " + (e && e.message || e));
      v8.profile = NO_PROFILE;
    });
  }
  return v8.stopping;
}

// Stops node's inspector's sampler and keeps its profile (node answers at once).
function stopInspector() {
  v8.session.post('Profiler.stop', function (e, reply) {
    v8.profile = e ? NO_PROFILE : reply.profile;
  });
}

// A JS Self-Profiling trace (frames, resources, stacks, samples) as the CPU profile node's
// inspector gives (nodes with call frames and children, samples, time deltas in
// microseconds), which `stacksOf` reads: a frame's column counts from 1 where the
// inspector's counts from 0, and a sample without a stack (no JS running) is the idle
// node's, before the trace's first.
function profileOfTrace(trace, started) {
  var frame = function (f) {
    var url = f.resourceId === undefined ? '' : trace.resources[f.resourceId];
    return { functionName: f.name || '', url: url || '', columnNumber: (f.column || 1) - 1 };
  };
  var nodes = [{ id: 0, callFrame: { functionName: '(idle)', url: '', columnNumber: -1 }, children: [] }];
  trace.stacks.forEach(function (s, i) {
    nodes.push({ id: i + 1, callFrame: frame(trace.frames[s.frameId]), children: [] });
  });
  trace.stacks.forEach(function (s, i) {
    if (s.parentId !== undefined) nodes[s.parentId + 1].children.push(i + 1);
  });
  var last = started, samples = [], deltas = [];
  trace.samples.forEach(function (s) {
    samples.push(s.stackId === undefined ? 0 : s.stackId + 1);
    deltas.push(Math.max(0, s.timestamp - last) * 1000);
    last = s.timestamp;
  });
  return { nodes: nodes, samples: samples, timeDeltas: deltas };
}

// V8's samples so far as the dump's `stacks`, or null without them (no V8 sampler, or a
// page's before `stopV8`).
function v8Stacks() {
  if (!v8 || v8Pending()) return null;
  if (!v8.profile) stopInspector();
  var stacks = stacksOf(v8.profile);
  if (v8.page) stacks.in_page = true;
  return stacks;
}

// Where each function body of the module that ran lies: [start, end) byte offsets (from
// its size's first byte), in order; V8 names a wasm frame's function by such an offset.
function codeBodies(bytes) {
  var at = 8, bodies = [];
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
    if (id === 10) {
      for (var count = leb(); count > 0; count--) {
        var start = at, length = leb();
        bodies.push([start, at + length]);
        at += length;
      }
    }
    at = end;
  }
  return bodies;
}

// A V8 CPU profile as stacks of the module's function ids (outermost first) with their
// samples and time. The module's frames are those of the wasm script the samples' outermost
// wasm frames are in (node 20's variant calls a state module, the probes'); a sample whose
// innermost wasm frame is the probes' counts as theirs, one whose innermost frames are
// JS (an import's) as the host's under the innermost wasm frame.
function stacksOf(profile) {
  var byId = new Map(), parent = new Map();
  profile.nodes.forEach(function (n) {
    byId.set(n.id, n);
    (n.children || []).forEach(function (c) { parent.set(c, n.id); });
  });
  var framesOf = function (id) {
    var frames = [];
    for (var at = id; at !== undefined; at = parent.get(at)) frames.push(byId.get(at).callFrame);
    return frames; // innermost first
  };
  // V8's wrappers between JS and wasm (`js-to-wasm:...`, `wasm-to-js:...`) are the host's,
  // whatever script they name.
  var isWasm = function (f) {
    return f.url.indexOf('wasm://') === 0 && !/^(js-to-wasm|wasm-to-js)/.test(f.functionName);
  };
  var outermost = new Map();
  profile.samples.forEach(function (id) {
    var wasm = framesOf(id).filter(isWasm);
    if (wasm.length) outermost.set(wasm[wasm.length - 1].url, (outermost.get(wasm[wasm.length - 1].url) || 0) + 1);
  });
  var ours = null, most = 0;
  outermost.forEach(function (n, url) { if (n > most) { ours = url; most = n; } });
  var bodies = run.bytes ? codeBodies(run.bytes) : [];
  var imported = run.module ? WebAssembly.Module.imports(run.module).filter(function (i) { return i.kind === 'function'; }).length : 0;
  var idOf = function (column) {
    var lo = 0, hi = bodies.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (bodies[mid][0] <= column) lo = mid + 1; else hi = mid;
    }
    var k = lo - 1, table = run.frameTable;
    if (k < 0 || column >= bodies[k][1] || !table || (imported + k) * 4 + 4 > table.byteLength) return NAMES.no_function;
    return table.getUint32((imported + k) * 4, true);
  };
  var tally = new Map();
  var out = { stacks: [], taken: 0, in_probes: 0, outside: 0, outside_ns: 0, truncated: 0, truncated_ns: 0, dropped: 0, dropped_ns: 0 };
  var deltas = profile.timeDeltas || [];
  profile.samples.forEach(function (id, i) {
    var ns = Math.max(0, Math.round((deltas[i] || 0) * 1000));
    out.taken++;
    // Inside the module's innermost frame: JS (the host's), or the probes' code (a state
    // module's, or a function of the profiler's own).
    var frames = framesOf(id), ids = [], inHost = false, probes = false;
    for (var j = 0; j < frames.length && !(probes && ids.length); j++) {
      var f = frames[j];
      var fid = f.url === ours && isWasm(f) ? idOf(f.columnNumber) : null;
      if (fid !== null && fid !== NAMES.no_function) ids.push(fid);
      else if (!ids.length && (fid !== null || isWasm(f))) probes = true;
      else if (!ids.length) inHost = true;
    }
    if (probes) {
      out.in_probes++;
      return;
    }
    if (!ids.length) {
      out.outside++;
      out.outside_ns += ns;
      return;
    }
    var key = ids.join(',') + (inHost ? 'h' : '');
    var entry = tally.get(key);
    if (!entry) tally.set(key, entry = { frames: ids.reverse(), line: NAMES.no_line, in_host: inHost, samples: 0, ns: 0 });
    entry.samples++;
    entry.ns += ns;
  });
  tally.forEach(function (entry) { out.stacks.push(entry); });
  return out;
}
