// cargo-wasmprof's page script for wasm-bindgen-test's browser page (added after the
// runtime by src/js_runtime.rs, `for_bindgen_page`): it posts the dump to cargo-wasmprof's
// server when the tests are done. The page writes the summary (`test result: ...`) into
// #output then, and the headless runner, which reads #output every 100 ms, closes the
// browser once it sees it. A mutation observer runs at the end of the task that wrote it,
// before the runner's next look (a task of its own), and posts the dump with a synchronous
// request, so the dump is with cargo-wasmprof before the browser goes.
// While the tests run, it posts the dump so far now and then (between tasks, when a test
// has written its line or a timer fires), so that a run the runner ends early (its
// timeout) still leaves the profile of what ran: at most once a second, and, for a large
// profile, no more often than every ten times what the last dump took to make.
(function () {
  var output = document.getElementById('output');
  if (!output) return console.error('wasmprof: the page has no #output, so the profile cannot be sent when the tests end');
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
  var timer = setInterval(postSoFar, 250);
  var observer = new MutationObserver(function () {
    if (output.textContent.indexOf('test result: ') < 0) return postSoFar();
    observer.disconnect();
    clearInterval(timer);
    var request = new XMLHttpRequest();
    request.open('POST', '__WASMPROF_DUMP_URL__', false);
    request.setRequestHeader('Content-Type', 'text/plain');
    try {
      request.send(JSON.stringify(wasmprof.profile()));
    } catch (e) {
      console.error('wasmprof: cannot send the profile: ' + e.message);
    }
  });
  observer.observe(output, { childList: true, characterData: true, subtree: true });
})();
