// cargo-wasmprof's page script for wasm-bindgen-test's browser page (added after the
// runtime by src/js_runtime.rs, `for_bindgen_page`): it posts the dump to cargo-wasmprof's
// server when the tests are done. The page writes the summary (`test result: ...`) into
// #output then, and the headless runner, which reads #output every 100 ms, closes the
// browser once it sees it. A mutation observer runs at the end of the task that wrote it,
// before the runner's next look (a task of its own), and posts the dump with a synchronous
// request, so the dump is with cargo-wasmprof before the browser goes.
(function () {
  var output = document.getElementById('output');
  if (!output) return console.error('wasmprof: the page has no #output, so the profile cannot be sent when the tests end');
  var observer = new MutationObserver(function () {
    if (output.textContent.indexOf('test result: ') < 0) return;
    observer.disconnect();
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
