// cargo-wasmprof's runtime, its part for V8's own sampler. Not a script of its own:
// src/js_runtime.rs puts it inside templates/wasmprof-runtime.js, in that function's scope
// (it uses the runtime's `run`, `NAMES`, `ENV`, `SAMPLING`, `isNode` and `noSampler`).

// V8's own sampler (the inspector's Profiler domain), under node, for a module whose meta
// names it: started before the program runs, stopped at the first dump (node answers a
// session's message at once), its samples the stacks of the module's functions
// (`stacksOf`). In a page, where no inspector runs, the profile has no times and says why.
var v8 = null;
function startV8() {
  if (!isNode) {
    noSampler = 'no_v8_sampler';
    return;
  }
  var session = new (require('inspector').Session)();
  session.connect();
  var interval = Number(process.env[ENV.sample_interval]) || SAMPLING.v8_interval_us;
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: interval });
  session.post('Profiler.start');
  v8 = { session: session, profile: null };
}

// V8's samples so far as the dump's `stacks`, or null without V8's sampler.
function v8Stacks() {
  if (!v8) return null;
  if (!v8.profile) {
    v8.session.post('Profiler.stop', function (e, reply) {
      v8.profile = e ? { nodes: [], samples: [], timeDeltas: [] } : reply.profile;
    });
  }
  return stacksOf(v8.profile);
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
