// The CPU fallback's Web Worker: the same wasm module as the page. Its start function finds no
// window here and serves generation requests instead of mounting the app (app/src/worker.rs).
import init from './pkg/moescope-app.js';

init().catch((error) => {
  postMessage(JSON.stringify({ kind: 'error', message: `the CPU worker could not start: ${error}` }));
});
