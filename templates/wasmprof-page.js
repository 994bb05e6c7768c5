// cargo-wasmprof's page script for wasm-bindgen-test in a browser (added after the runtime
// by src/js_runtime.rs, `for_bindgen_page`): it posts the dump to cargo-wasmprof's server
// when the tests are done, and the dump so far while they run, so that a run the runner
// ends early (its timeout) still leaves the profile of what ran: at most once a second,
// and, for a large profile, no more often than every ten times what the last dump took
// to make. The last dump is with cargo-wasmprof before the runner, which reads the page's
// #output every 100 ms, sees the summary (`test result: ...`) and closes the browser.
// - In the page (`run_in_browser`): the page writes the summary into #output. A mutation
//   observer runs at the end of the task that wrote it, before the runner's next look (a
//   task of its own); a dump so far goes between tasks, when a test has written its line
//   or a timer fires. The page sends its last dump with a synchronous request.
// - In a worker (`run_in_dedicated_worker`, `run_in_shared_worker`,
//   `run_in_service_worker`): the tests' output reaches the page as the worker's messages
//   (`["__wbgtest_output_append", text]`), through the worker's own `postMessage` (a
//   dedicated worker) or a `MessagePort`'s (a shared or service worker), and the page
//   appends it to #output. Either posts the dump before the summary's message leaves (once
//   the job that wrote it ends), and a dump so far with the messages before. A worker sends
//   its last dump with `fetch` (a service worker has no XMLHttpRequest) and holds the
//   summary's message until the server has it.
(function () {
  var next = 0;
  function postSoFar() {
    var start = performance.now();
    if (start < next) return;
    var dump = JSON.stringify(wasmprof.profile());
    var end = performance.now();
    next = end + Math.max(1000, 10 * (end - start));
    fetch('__WASMPROF_SO_FAR_URL__', { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: dump })
      .catch(function () {}); // the last dump, or the next one, says it all
  }
  function cannotSend(e) {
    console.error('wasmprof: cannot send the profile: ' + e.message);
  }
  // The last dump, synchronously (in the page).
  function postLast() {
    var request = new XMLHttpRequest();
    request.open('POST', '__WASMPROF_DUMP_URL__', false);
    request.setRequestHeader('Content-Type', 'text/plain');
    try {
      request.send(JSON.stringify(wasmprof.profile()));
    } catch (e) {
      cannotSend(e);
    }
  }
  // The last dump, settled once the server has it (in a worker).
  function postLastAsync() {
    try {
      return fetch('__WASMPROF_DUMP_URL__', { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: JSON.stringify(wasmprof.profile()) })
        .then(function (response) { if (!response.ok) throw new Error('the server answered ' + response.status); })
        .catch(cannotSend);
    } catch (e) {
      return Promise.resolve(cannotSend(e));
    }
  }
  if (typeof document === 'undefined') {
    // The summary is written from inside the module's code: its message, and any after it,
    // wait for the current job to end, when the module's frames have returned and the dump
    // is of a finished run; they leave, in order, once the dump is posted.
    var held = null;
    var watch = function (forward) {
      return function (message) {
        if (held) return void held.push([forward, this, arguments]);
        var output = Array.isArray(message) && message[0] === '__wbgtest_output_append';
        if (output && String(message[1]).indexOf('test result: ') >= 0) {
          held = [[forward, this, arguments]];
          return void queueMicrotask(function () {
            postLastAsync().then(function () {
              var waiting = held;
              held = null;
              waiting.forEach(function (m) { m[0].apply(m[1], m[2]); });
            });
          });
        }
        if (output) postSoFar();
        return forward.apply(this, arguments);
      };
    };
    if (typeof self.postMessage === 'function') self.postMessage = watch(self.postMessage);
    MessagePort.prototype.postMessage = watch(MessagePort.prototype.postMessage);
    return;
  }
  var output = document.getElementById('output');
  if (!output) return console.error('wasmprof: the page has no #output, so the profile cannot be sent when the tests end');
  var timer = setInterval(postSoFar, 250);
  var observer = new MutationObserver(function () {
    if (output.textContent.indexOf('test result: ') < 0) return postSoFar();
    observer.disconnect();
    clearInterval(timer);
    postLast();
  });
  observer.observe(output, { childList: true, characterData: true, subtree: true });
})();
